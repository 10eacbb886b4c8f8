#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: the sysfs view of a device subset, and the [env] settings NCCL does not
# read. A container given one device of the sample node (rule 8: its spec holds uverbs1;
# or a CDI request for one) lists only that device's entries in /sys/class/infiniband,
# infiniband_verbs and infiniband_mad, with the host's relative targets, on read-only
# mounts: through the live hook (runc), the runtime shim (containerd), the precreate hook
# (podman) and the CDI spec's hook (podman). A container given every device sees the
# host's entries, with no mount over them. This host's kernel has no RDMA class in its
# sysfs: each container gets the sample node's /sys/class bound over its own (what the
# host's /sys would show), read-only, and the view goes over that.
# The config's UCX_TLS reaches PID 1's environment through the shim and precreate; the
# live hook writes it into /etc/nccl.conf and its log says the environment lacks it.
# The views of 300 random subsets of a 64-HCA node are all removed by inspect's sweeps once
# their containers are gone.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"

need_root_runc
setup_work
trap 'rc=$?; stop_daemons; cleanup_work $rc' EXIT

make_node seed001-roce.json "$WORK/node"
CLASS=$WORK/node/sys/class
# every device usable (rule 2 would leave mlx5_0 out): "everything" is the node's 9
write_conf "$WORK/node.conf" "[node]
memlock = 4M
skip_default_route_nic = no
[env]
UCX_TLS = rc,sm"
INSIDE='for c in infiniband infiniband_verbs infiniband_mad; do for e in /sys/class/$c/*; do [ -L "$e" ] && echo "sys:$c/${e##*/} $(readlink "$e")"; done; done; echo "abi:$(cat /sys/class/infiniband_verbs/abi_version)"; awk "\$5 ~ /^\/sys\/class\/infiniband/ { print \"mnt:\" \$5 \" \" \$6 }" /proc/self/mountinfo; tr "\0" "\n" </proc/1/environ | grep "^UCX_" | sed "s/^/env:/"; sed -n "s/^UCX_/conf:UCX_/p" /etc/nccl.conf 2>/dev/null; echo "memlock $(ulimit -l)"'
FIXTURE_BEFORE=$(cd "$CLASS" && find . -printf '%p %y %l\n' | sort)

# expected DEV...: the "sys:" lines of a container that sees the devices DEV (all: every
# entry), from the sample node
expected() {
	local c e dev
	for c in infiniband infiniband_verbs infiniband_mad; do
		for e in "$CLASS/$c"/*; do
			[ -L "$e" ] || continue
			if [ "$1" != all ]; then
				if [ $c = infiniband ]; then dev=${e##*/}; else dev=$(cat "$e/ibdev"); fi
				[[ " $* " == *" $dev "* ]] || continue
			fi
			echo "sys:$c/${e##*/} $(readlink "$e")"
		done
	done
}

# check_view LABEL DEV...: $OUT is a container's that ran, whose class directories list
# exactly the entries of DEV (all: every one, with no mount over them)
check_view() {
	local label=$1 got want
	shift
	check_ran "$label"
	got=$(grep '^sys:' <<<"$OUT" || true)
	want=$(expected "$@")
	check "$label: /sys/class/infiniband* list $* ($(wc -l <<<"$want") entries, the sample node's targets; got: $(head -c 300 <<<"$got"))" \
		[ -n "$want" -a "$got" = "$want" ]
	check "$label: abi_version is the node's" grep -qx "abi:$(cat "$CLASS/infiniband_verbs/abi_version")" <<<"$OUT"
	if [ "$1" = all ]; then
		check "$label: no mount over the class directories" out_lacks '^mnt:'
	else
		check "$label: the view is mounted read-only, nosuid, nodev, noexec over the three class directories ($(grep '^mnt:' <<<"$OUT" | tr '\n' ' '))" \
			[ "$(grep -cE '^mnt:/sys/class/infiniband(_verbs|_mad)? ro,nosuid,nodev,noexec(,|$)' <<<"$OUT")" = 3 ]
	fi
}

UVERBS1=$(stat -c '%t %T' "$WORK/node/dev/infiniband/uverbs1")
MAJ=$((16#${UVERBS1% *}))
MIN=$((16#${UVERBS1#* }))

# ---- the live hook (runc) ----
make_rootfs "$WORK/rootfs"
SYSCLASS_MOUNT='c["mounts"].append({"destination": "/sys/class", "type": "bind", "source": "'"$CLASS"'", "options": ["rbind", "ro"]})'
GIVE_ONE='c["linux"].setdefault("devices", []).append({"path": "/dev/infiniband/uverbs1", "type": "c", "major": '$MAJ', "minor": '$MIN', "fileMode": 438, "uid": 0, "gid": 0})'
make_bundle "$WORK/b1" "$WORK/rootfs" "$WORK/node" "$WORK/node.conf" "$INSIDE" "$SYSCLASS_MOUNT
$GIVE_ONE"
run_ctr "$WORK/b1"
check "live hook, one device given: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_view "live hook, uverbs1 given" mlx5_1
check "live hook: UCX_TLS in /etc/nccl.conf" grep -qx 'conf:UCX_TLS=rc,sm' <<<"$OUT"
check "live hook: its log says the environment lacks UCX_TLS" \
	grep -q "UCX_TLS ($WORK/node.conf:5) is not in the container's environment" "$WORK/b1/hook.log"

make_bundle "$WORK/b2" "$WORK/rootfs" "$WORK/node" "$WORK/node.conf" "$INSIDE" "$SYSCLASS_MOUNT"
run_ctr "$WORK/b2"
check "live hook, every device: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_view "live hook, every device" all
check "the sample node's class directories are as they were" \
	[ "$(cd "$CLASS" && find . -printf '%p %y %l\n' | sort)" = "$FIXTURE_BEFORE" ]

# ---- the runtime shim (containerd) ----
if command -v ctr >/dev/null 2>&1 && command -v containerd >/dev/null 2>&1; then
	install_shim
	start_containerd "$WORK/node.conf" "$WORK/node"
	NS=orh-e2e-$$
	N=0
	run_ctr_shim() {
		N=$((N + 1))
		make_rootfs "$WORK/rootfs-cd$N"
		RC=0
		OUT=$(ctr -a "$CD_SOCK" -n "$NS" run --rm --rootfs --runc-binary "$SHIM" \
			--mount "type=bind,src=$CLASS,dst=/sys/class,options=rbind:ro" "$@" \
			"$WORK/rootfs-cd$N" "orh-e2e-$$-$N" /bin/sh -c "$INSIDE" 2>"$WORK/ctr.err" </dev/null) || RC=$?
		ERR=$(cat "$WORK/ctr.err")
	}
	run_ctr_shim --device "$WORK/node/dev/infiniband/uverbs1"
	check "shim, one device given: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
	check_view "shim, uverbs1 given" mlx5_1
	check "shim: UCX_TLS in PID 1's environment" grep -qx 'env:UCX_TLS=rc,sm' <<<"$OUT"
	run_ctr_shim --env UCX_TLS=tcp
	check "shim, every device: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
	check_view "shim, every device" all
	check "shim: the user's UCX_TLS stands, alone" \
		[ "$(grep '^env:UCX_TLS=' <<<"$OUT")" = "env:UCX_TLS=tcp" ]
	stop_daemons
else
	not_ok "containerd (ctr) is not installed: the shim's cases did not run"
fi

# ---- the precreate hook (podman) ----
if command -v podman >/dev/null 2>&1; then
	printf '[containers]\ndefault_ulimits = []\n' >"$WORK/containers.conf"
	export CONTAINERS_CONF="$WORK/containers.conf"
	hooks_d "$WORK/hooks.d" "$HOOK" "$WORK/node.conf" oci-rdma-hook-precreate
	podman_setup --hooks-dir "$WORK/hooks.d"
	run_podman -v "$CLASS:/sys/class:ro" --device "$WORK/node/dev/infiniband/uverbs1:/dev/infiniband/uverbs1"
	check "podman precreate, one device given: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
	check_view "podman precreate, uverbs1 given" mlx5_1
	check "podman precreate: UCX_TLS in PID 1's environment" grep -qx 'env:UCX_TLS=rc,sm' <<<"$OUT"
	run_podman -v "$CLASS:/sys/class:ro"
	check "podman precreate, every device: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
	check_view "podman precreate, every device" all
	# every shipped hooks.d file: precreate mounts the view, the live createRuntime hook
	# finds it there and mounts nothing more
	hooks_d "$WORK/hooks.d" "$HOOK" "$WORK/node.conf" oci-rdma-hook oci-rdma-hook-poststop
	run_podman -v "$CLASS:/sys/class:ro" --device "$WORK/node/dev/infiniband/uverbs1:/dev/infiniband/uverbs1"
	check "podman, every hooks.d file, one device given: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
	check_view "podman, every hooks.d file, uverbs1 given (one mount per class directory)" mlx5_1
	rm -f "$WORK"/hooks.d/*
	# a CDI request for one device (the CDI spec's createRuntime hook), without precreate
	CDI_FILE=/var/run/cdi/oci-rdma-hook-e2e-sysview-$$.json
	if mkdir -p /var/run/cdi && ! grep -qs '"rdma.oci-rdma-hook.io/hca"' /var/run/cdi/*.json /etc/cdi/*.json; then
		trap 'rc=$?; rm -f "$CDI_FILE"; stop_daemons; cleanup_work $rc' EXIT
		"$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" cdi --output "$CDI_FILE"
		podman_setup
		run_podman -v "$CLASS:/sys/class:ro" --device rdma.oci-rdma-hook.io/hca=mlx5_1
		check "CDI, one device: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
		check_view "CDI, mlx5_1 requested" mlx5_1
		run_podman -v "$CLASS:/sys/class:ro" --device rdma.oci-rdma-hook.io/hca=all
		check "CDI, every device: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
		check_view "CDI, every device" all
		rm -f "$CDI_FILE"
	else
		not_ok "a CDI spec of the kind rdma.oci-rdma-hook.io/hca is there already: the CDI cases did not run"
	fi
else
	not_ok "podman is not installed: the precreate cases did not run"
fi
check "the sample node's class directories are as they were, after every engine" \
	[ "$(cd "$CLASS" && find . -printf '%p %y %l\n' | sort)" = "$FIXTURE_BEFORE" ]

# ---- 300 subsets of a 64-HCA node: no view left once their containers are gone ----
# The live hook serves 300 containers, each given a random subset of the node's 64 devices
# (rule 8): one stand-in process (fake_ctr) that every hook takes for the container it
# serves. Each gets the view of its subset, which its record names and its state
# directory links to. Once the containers are gone, inspect's sweeps remove their state
# directories (256 a sweep: two sweeps), then the views that no state directory links to.
# The sweep keeps a view made or used in the last 10 minutes (a container may be starting
# with it): the mtimes of these views are set back 20 minutes, as that wait would.
RUN=/run/oci-rdma-hook
python3 "$MKNODE" "$NODES/scale.json" "$WORK/node64" --devnodes \
	--scale hcas=64,ports=1,gid_tbl_len=4,addrs_per_port=1 >/dev/null
write_conf "$WORK/node64.conf" "[node]
skip_default_route_nic = no
[containers]
activation = always"
make_rootfs "$WORK/r64"
make_bundle "$WORK/b64" "$WORK/r64" "$WORK/node64" "$WORK/node64.conf" true \
	'c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
python3 - "$WORK/b64" "$WORK/node64/dev/infiniband" <<'EOF2'
import json, os, random, sys
b, dev = sys.argv[1:3]
c = json.load(open(b + "/config.json"))
rnd = random.Random(28)
for i in range(1, 301):
    given = [n for n in range(64) if rnd.random() < 0.5] or [0]
    c["linux"]["devices"] = []
    for n in given:
        st = os.stat("%s/uverbs%d" % (dev, n))
        c["linux"]["devices"].append({"path": "/dev/infiniband/uverbs%d" % n, "type": "c",
                                      "major": os.major(st.st_rdev),
                                      "minor": os.minor(st.st_rdev), "fileMode": 438})
    os.makedirs("%s/%d" % (b, i), exist_ok=True)
    json.dump(c, open("%s/%d/config.json" % (b, i), "w"))
EOF2
if fake_ctr "$WORK/r64"; then
	for i in $(seq 1 300); do
		printf '{"ociVersion":"1.0.2","id":"orh-e2e-%s-v%s","status":"creating","pid":%s,"bundle":"%s"}' \
			"$$" "$i" "$SLEEPER" "$WORK/b64/$i" |
			"$HOOK" --sysroot "$WORK/node64" --config "$WORK/node64.conf" createRuntime \
			2>>"$WORK/b64.log" || true
	done
fi
VIEWS=$(python3 -c 'import glob, json, sys
for f in glob.glob(sys.argv[1] + "/orh-e2e-" + sys.argv[2] + "-v*/record.json"):
    print(json.load(open(f)).get("sysfs_view", "none"))' "$RUN" "$$" | sort -u)
check "300 subsets: 300 records, each naming its view, which is there ($(wc -l <<<"$VIEWS") views)" \
	bash -c '[ "$(ls -d "$1/orh-e2e-$2-v"* | wc -l)" = 300 ] && [ "$(wc -l <<<"$3")" = 300 ] &&
		! grep -qx none <<<"$3" && while read -r v; do [ -d "$v" ] || exit 1; done <<<"$3"' \
	_ "$RUN" "$$" "$VIEWS"
stop_fake_ctr
while read -r v; do [ ! -d "$v" ] || touch -d '-20 minutes' "$v"; done <<<"$VIEWS"
"$HOOK" inspect >/dev/null 2>&1 || true
"$HOOK" inspect >/dev/null 2>&1 || true
check "300 subsets, their containers gone: no state directory left" \
	bash -c '! ls -d "$1/orh-e2e-$2-v"* >/dev/null 2>&1' _ "$RUN" "$$"
check "300 subsets, their containers gone: none of their views left ($(ls -A "$RUN/.sysfs" | wc -l) entries in $RUN/.sysfs)" \
	bash -c 'while read -r v; do [ ! -e "$v" ] || exit 1; done <<<"$1"' _ "$VIEWS"

finish
