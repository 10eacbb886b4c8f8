#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: `oci-rdma-hook cdi --output` writes a CDI spec that podman accepts;
# `--device rdma.oci-rdma-hook.io/hca=all` gives every chosen device, a single HCA its own
# node and rdma_cm. The spec has no env edit (it would replace the user's own values and
# fix the host's interface name): its createRuntime hook (oci-rdma-hook cdi-createRuntime)
# writes the plan into the container's /etc/nccl.conf, computed in the container's network
# namespace (a bridge network: its eth0), where the user's variables and the image's own
# lines win, and gives the node's memlock, soft and hard, unless the container sets
# RLIMIT_MEMLOCK itself (podman --ulimit memlock=...).
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v podman >/dev/null 2>&1 || cant_run "podman not installed"
# podman 4.3 has no --cdi-spec-dir: specs are read from /etc/cdi and /var/run/cdi only.
CDI_DIR=/var/run/cdi
CDI_FILE=$CDI_DIR/oci-rdma-hook-e2e-$$.json
mkdir -p "$CDI_DIR" || cant_run "cannot create $CDI_DIR"
for f in "$CDI_DIR"/*.json /etc/cdi/*.json; do
	[ -e "$f" ] && grep -q '"rdma.oci-rdma-hook.io/hca"' "$f" &&
		cant_run "$f already defines rdma.oci-rdma-hook.io/hca (a second spec of the kind conflicts)"
done
setup_work
trap 'rc=$?; rm -f "$CDI_FILE"; cleanup_work $rc' EXIT

# memlock 4 MiB: a hard limit cannot be raised here (no CAP_SYS_RESOURCE), so the test
# starts podman, and the containers that inherit its limits, at 1 MiB soft / 4 MiB hard
# (below this machine's hard limit); only the hook raises the soft limit to 4 MiB.
make_node seed001-roce.json "$WORK/node"
# the host's default route on eno1 (an onboard NIC without RDMA, as on many servers; so
# mlx5_0 is a fabric NIC here): a container never has that name
sed -i 's/^eth0\t/eno1\t/' "$WORK/node/proc/net/route"
write_conf "$WORK/node.conf" "[node]
memlock = 4M"
ulimit -Sl 1024 && ulimit -Hl 4096 || cant_run "cannot lower RLIMIT_MEMLOCK to 1 MiB/4 MiB"
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = []
EOF
export CONTAINERS_CONF="$WORK/containers.conf"

check "cdi --output writes the spec" "$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" \
	cdi --output "$CDI_FILE"
check "the spec is JSON of cdiVersion 0.5.0" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["cdiVersion"] == "0.5.0" and d["kind"] == "rdma.oci-rdma-hook.io/hca", d
names = [x["name"] for x in d["devices"]]
assert names[-1] == "all" and "mlx5_1" in names, names
' "$CDI_FILE"
check "the spec's createRuntime hook is this binary's cdi-createRuntime with --config and --sysroot" \
	python3 -c '
import json, os, sys
d = json.load(open(sys.argv[1]))
want = [{"hookName": "createRuntime", "path": os.path.realpath(sys.argv[2]),
         "args": ["oci-rdma-hook", "--config", sys.argv[3], "--sysroot", sys.argv[4], "cdi-createRuntime"]}]
assert d["containerEdits"]["hooks"] == want, d["containerEdits"].get("hooks")
' "$CDI_FILE" "$HOOK" "$WORK/node.conf" "$WORK/node"
check "the spec has no env edit, spec-wide or per device" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert not [x for x in [d["containerEdits"]] + [e["containerEdits"] for e in d["devices"]] if "env" in x]
' "$CDI_FILE"
check "no temporary file is left beside the spec" \
	bash -c "! ls -a '$CDI_DIR' | grep -q '^\.oci-rdma-hook-e2e-$$.json.orh-'"

podman_setup

INSIDE='tr "\0" "\n" </proc/1/environ | grep "^NCCL_" | sed "s/^/env:/" | sort; sed -n "s/^[[:space:]]*NCCL_/conf:NCCL_/p" /etc/nccl.conf 2>/dev/null; echo "memlock $(ulimit -Sl) $(ulimit -Hl)"; for f in /dev/infiniband/*; do [ -e "$f" ] && stat -c "%n %F %t:%T" "$f"; done; echo "ifs $(ls /sys/class/net | tr "\n" " ")"; true'
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)
host_if=$(grep '^NCCL_SOCKET_IFNAME=' <<<"$PLAN")
[ -n "$host_if" ] || cant_run "the fake node's plan names no NCCL_SOCKET_IFNAME"

run_podman --device rdma.oci-rdma-hook.io/hca=all -e NCCL_IB_TIMEOUT=5
check "podman run --device ...=all succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_conf_has_plan "all: /etc/nccl.conf has every plan setting, NCCL_IB_HCA included"
check "all: the user's NCCL_IB_TIMEOUT=5 stays in PID 1's environment, which NCCL prefers" \
	grep -qx "env:NCCL_IB_TIMEOUT=5" <<<"$OUT"
check "all: nothing else of the plan in PID 1's environment" \
	[ "$(grep -c '^env:' <<<"$OUT")" = 1 ]
check "--network none: no NCCL_SOCKET_IFNAME (the container has no route), not the host's $host_if" \
	out_lacks 'NCCL_SOCKET_IFNAME'
for n in uverbs1 uverbs8 rdma_cm; do
	want=$(stat -c '%t:%T' "$WORK/node/dev/infiniband/$n")
	check "all: /dev/infiniband/$n is a character device $want" \
		grep -qx "/dev/infiniband/$n character special file $want" <<<"$OUT"
done
check "all: the hook gives the node's memlock, soft and hard 4 MiB" grep -qx 'memlock 4096 4096' <<<"$OUT"

# a bridge network: the container's own interface, and the user's value winning
bridge_run() {
	RC=0
	OUT=$("${PODMAN[@]}" run --rm --network bridge "$@" "${PODMAN_IMAGE:-localhost/orh-e2e-bb}" \
		/bin/sh -c "$INSIDE" 2>"$WORK/podman.err") || RC=$?
	ERR=$(cat "$WORK/podman.err")
}
bridge_run --device rdma.oci-rdma-hook.io/hca=all
check "bridge network: podman run --device ...=all succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
cif=$(sed -n 's/^ifs //p' <<<"$OUT" | tr ' ' '\n' | grep -v '^lo$' | head -1)
check "bridge network: NCCL_SOCKET_IFNAME is the container's own interface ($cif), not the host's $host_if" \
	grep -qx "conf:NCCL_SOCKET_IFNAME==$cif" <<<"$OUT"
bridge_run --device rdma.oci-rdma-hook.io/hca=all -e NCCL_SOCKET_IFNAME==lo
check "bridge network, -e NCCL_SOCKET_IFNAME==lo: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check "bridge network: the host's $host_if is nowhere in the container" \
	out_lacks -F "${host_if#NCCL_SOCKET_IFNAME=}"
check "bridge network: the user's -e NCCL_SOCKET_IFNAME==lo is what PID 1 has" \
	grep -qx "env:NCCL_SOCKET_IFNAME==lo" <<<"$OUT"
check "bridge network: ... and no other NCCL_SOCKET_IFNAME is in PID 1's environment" \
	[ "$(grep -c '^env:NCCL_SOCKET_IFNAME=' <<<"$OUT")" = 1 ]

# the image's own /etc/nccl.conf keeps its values
IMG_CONF='NCCL_IB_HCA=image_hca
NCCL_DEBUG=WARN'
make_image_rootfs "$WORK/rootfs-img"
tar -C "$WORK/rootfs-img" -cf "$WORK/rootfs-img.tar" .
"${PODMAN[@]}" import "$WORK/rootfs-img.tar" localhost/orh-e2e-img:latest >/dev/null ||
	cant_run "podman import failed"
PODMAN_IMAGE=localhost/orh-e2e-img run_podman --device rdma.oci-rdma-hook.io/hca=all
check "image with its own nccl.conf: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_image_conf_kept "CDI"

# With any --ulimit, podman also sets nofile and nproc (to 1048576) unless given: above
# the hard limits a container inherits here, which runc cannot raise. Give those.
read -r nofile nproc < <("${PODMAN[@]}" run --rm --network none localhost/orh-e2e-bb /bin/sh -c \
	'echo "$(ulimit -Sn):$(ulimit -Hn) $(ulimit -Su):$(ulimit -Hu)"') ||
	cant_run "cannot read a container's default limits"
run_podman --device rdma.oci-rdma-hook.io/hca=all --ulimit memlock=2097152:3145728 \
	--ulimit "nofile=$nofile" --ulimit "nproc=$nproc"
check "podman run --device ...=all --ulimit memlock=... succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check "the user's RLIMIT_MEMLOCK in the spec wins over the node's" \
	grep -qx 'memlock 2048 3072' <<<"$OUT"

run_podman --device rdma.oci-rdma-hook.io/hca=mlx5_2
check "podman run --device ...=mlx5_2 succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check "mlx5_2: exactly its uverbs node and rdma_cm" \
	[ "$(grep -o '^/dev/infiniband/[a-z_0-9]*' <<<"$OUT" | tr '\n' ' ')" = "/dev/infiniband/rdma_cm /dev/infiniband/uverbs2 " ]
check "mlx5_2: NCCL_IB_HCA is mlx5_2's port alone (the devices it was given, rule 8)" \
	grep -qx 'conf:NCCL_IB_HCA==mlx5_2:1' <<<"$OUT"
check "mlx5_2: the other settings are in /etc/nccl.conf" grep -q '^conf:NCCL_IB_GID_INDEX=' <<<"$OUT"
check "mlx5_2: the spec-wide hook gives the node's memlock" grep -qx 'memlock 4096 4096' <<<"$OUT"

run_podman
check "without --device: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check "without --device nothing is injected" out_lacks -e 'NCCL_' -e infiniband
check "without --device no hook runs: memlock stays 1 MiB/4 MiB" grep -qx 'memlock 1024 4096' <<<"$OUT"

"${PODMAN[@]}" rmi -f localhost/orh-e2e-bb localhost/orh-e2e-img >/dev/null 2>&1 || true
"${PODMAN[@]}" system reset -f >/dev/null 2>&1 || true
finish
