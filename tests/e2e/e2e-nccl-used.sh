#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# What NCCL used, in the record (nccl_record), with runc containers served by the live hook
# on the sample node seed001-roce: a container given RDMA gets the capture's three lines in
# /etc/nccl.conf and the capture directory, a 1 MiB tmpfs of mode 1777 mounted nosuid,
# nodev, noexec; a fake "NCCL" in it (a shell line, as uid 1000) writes a real NCCL 2.28.9
# log of a run over sockets (tests/nccl/nccl-2.28.9-socket.log) to NCCL_DEBUG_FILE's
# expanded path, and inspect shows NET/Socket and flags it (the list's NCCL column, a
# warning). A container whose process.env sets NCCL_DEBUG=WARN, one whose image's
# /etc/nccl.conf sets NCCL_DEBUG, one whose image has no /run (no directory can be made),
# and one on a node with nccl_record = no get no capture lines and no mount, and the
# record says why. Through podman's precreate (the spec edit and its nccl-conf stage), the
# directory and the lines are there too.
. "$(dirname "$0")/lib.sh"
need_root_runc
setup_work

DIR=/run/oci-rdma-hook-nccl
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
ASK="$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true'}"
make_node seed001-roce.json "$WORK/node"
write_conf "$WORK/on.conf" "[node]
memlock = 4M
[containers]
nccl_record = yes"
write_conf "$WORK/off.conf" "[node]
memlock = 4M
[containers]
nccl_record = no"
make_rootfs "$WORK/rootfs"
mkdir -p "$WORK/rootfs/run"
chmod 1777 "$WORK/rootfs/tmp"
cp "$ORH_SRCDIR/tests/nccl/nccl-2.28.9-socket.log" "$WORK/rootfs/nccl.log"

# wait_out ID: $OUT from the container's /tmp/out once it has its memlock line (the
# containers share $WORK/rootfs: the last one's file is removed first)
wait_out() {
	OUT=
	for i in $(seq 1 50); do
		OUT=$(runc exec "$1" cat /tmp/out 2>/dev/null || true)
		inside_ran && break
		sleep 0.1
	done
}

# The fake NCCL: NCCL_DEBUG_FILE of /etc/nccl.conf with %p expanded to its pid, the real
# log copied there, as NCCL's fopen(..., "w") would write it
FAKE='f=$(sed -n "s/^NCCL_DEBUG_FILE=//p" /etc/nccl.conf); f=${f%\%p}$$;
[ -n "$f" ] && cat /nccl.log >"$f" && echo "wrote $f";
{ echo "memlock $(ulimit -l)"; cat /etc/nccl.conf; grep " /run/oci-rdma-hook-nccl " /proc/mounts;
  stat -c "mode %a" /run/oci-rdma-hook-nccl; ls /run/oci-rdma-hook-nccl; } >/tmp/out; sleep 60'
AS_USER="$ASK; c['process']['user'] = {'uid': 1000, 'gid': 1000}"

ID="orh-e2e-$$-used"
make_bundle "$WORK/b1" "$WORK/rootfs" "$WORK/node" "$WORK/on.conf" "$FAKE" "$AS_USER"
runc run -d --bundle "$WORK/b1" "$ID" </dev/null >"$WORK/b1.out" 2>&1 || true
wait_out "$ID"
check_ran "a container given RDMA"
check "its /etc/nccl.conf holds the capture's three lines" \
	bash -c 'grep -qx NCCL_DEBUG=INFO <<<"$1" && grep -qx NCCL_DEBUG_SUBSYS=INIT,NET <<<"$1" &&
		grep -qx "NCCL_DEBUG_FILE=/run/oci-rdma-hook-nccl/nccl.%p" <<<"$1"' _ "$OUT"
check "the capture directory is a tmpfs of 1 MiB, nosuid, nodev, noexec, mode 1777" \
	bash -c 'grep -Eq "^[^ ]+ /run/oci-rdma-hook-nccl tmpfs rw,nosuid,nodev,noexec,(.*,)?size=1024k( |,)" <<<"$1" &&
		grep -qx "mode 1777" <<<"$1"' _ "$OUT"
check "uid 1000 wrote its file there (NCCL_DEBUG_FILE's %p expanded)" \
	grep -Eqx "nccl\.[0-9]+" <<<"$OUT"
LIST=$("$HOOK" inspect 2>&1 || true)
check "inspect lists it with NCCL 'Socket!', alive" \
	grep -Eq "^${ID:0:16} +createRuntime +requested .* Socket! +yes$" <<<"$LIST"
check "the list's header has the NCCL column" grep -Eq "^ID .* WARNINGS +NCCL +ALIVE$" <<<"$LIST"
INS=$("$HOOK" inspect "$ID" 2>&1 || true)
check "inspect ID: nccl_used.communicators[0].transports: NET/Socket" \
	grep -qx "nccl_used.communicators\[0\].transports: NET/Socket" <<<"$INS"
check "inspect ID: the communicator's id, rank and network from the log" \
	bash -c 'grep -qx "nccl_used.communicators\[0\].comm_id: 0x7dd2d326828f362" <<<"$1" &&
		grep -qx "nccl_used.communicators\[0\].nranks: 2" <<<"$1" &&
		grep -qx "nccl_used.communicators\[0\].network: Socket" <<<"$1"' _ "$INS"
check "inspect ID: nccl_used.socket_with_rdma: true, and a warning saying so" \
	bash -c 'grep -qx "nccl_used.socket_with_rdma: true" <<<"$1" &&
		grep -Eq "^warnings\[[0-9]+\]: the container was given RDMA, and NCCL used NET/Socket in 1 of 1 communicators" <<<"$1"' _ "$INS"
check "inspect ID: nccl.record says on" grep -q "^nccl.record: on: " <<<"$INS"
J=$("$HOOK" inspect "$ID" --json 2>&1 || true)
check "inspect ID --json: nccl_used, one file, one communicator" \
	python3 -c 'import json, sys
u = json.loads(sys.argv[1])["nccl_used"]
assert u["files"] == 1 and u["truncated"] is False, u
assert len(u["communicators"]) == 1 and u["communicators"][0]["rank"] == 0, u' "$J"
runc delete -f "$ID" >/dev/null 2>&1 || true

# The user's own NCCL_DEBUG: no capture at all
NOCAP='{ echo "memlock $(ulimit -l)"; cat /etc/nccl.conf; grep -c " /run/oci-rdma-hook-nccl " /proc/mounts; } >/tmp/out; sleep 60'
ID2="orh-e2e-$$-warn"
make_bundle "$WORK/b2" "$WORK/rootfs" "$WORK/node" "$WORK/on.conf" "$NOCAP" \
	"$ASK; c['process']['env'].append('NCCL_DEBUG=WARN')"
rm -f "$WORK/rootfs/tmp/out"
runc run -d --bundle "$WORK/b2" "$ID2" </dev/null >"$WORK/b2.out" 2>&1 || true
wait_out "$ID2"
check_ran "NCCL_DEBUG=WARN in process.env"
check "NCCL_DEBUG=WARN in process.env: /etc/nccl.conf has the plan (NCCL_IB_HCA), no NCCL_DEBUG*" \
	bash -c 'grep -q "^NCCL_IB_HCA=" <<<"$1" && ! grep -q "^NCCL_DEBUG" <<<"$1"' _ "$OUT"
check "NCCL_DEBUG=WARN in process.env: no capture mount" grep -qx 0 <<<"$OUT"
INS=$("$HOOK" inspect "$ID2" 2>&1 || true)
check "NCCL_DEBUG=WARN: the record says why" \
	grep -qx "nccl.record: off: the container's process.env sets an NCCL_DEBUG variable" <<<"$INS"
runc delete -f "$ID2" >/dev/null 2>&1 || true

# The image's own /etc/nccl.conf sets NCCL_DEBUG: it stays, no capture line is added
make_rootfs "$WORK/rootfs3"
mkdir -p "$WORK/rootfs3/run"
printf 'NCCL_DEBUG=VERSION\n' >"$WORK/rootfs3/etc/nccl.conf"
ID3="orh-e2e-$$-img"
make_bundle "$WORK/b3" "$WORK/rootfs3" "$WORK/node" "$WORK/on.conf" "$NOCAP" "$ASK"
runc run -d --bundle "$WORK/b3" "$ID3" </dev/null >"$WORK/b3.out" 2>&1 || true
wait_out "$ID3"
check_ran "the image sets NCCL_DEBUG"
check "the image sets NCCL_DEBUG: its line stays, the only NCCL_DEBUG* line" \
	bash -c 'grep -qx NCCL_DEBUG=VERSION <<<"$1" && [ "$(grep -c "^NCCL_DEBUG" <<<"$1")" = 1 ] &&
		grep -q "^NCCL_IB_HCA=" <<<"$1"' _ "$OUT"
J=$("$HOOK" inspect "$ID3" --json 2>&1 || true)
check "the image sets NCCL_DEBUG: the record keeps its line" \
	python3 -c 'import json, sys
c = json.loads(sys.argv[1])["nccl_conf"]
assert "NCCL_DEBUG=VERSION" in c["image_lines_kept"], c' "$J"
runc delete -f "$ID3" >/dev/null 2>&1 || true

# No /run in the image: no capture directory can be made, so no capture line is written
# (NCCL, finding no directory for NCCL_DEBUG_FILE, would write to the workload's stdout)
make_rootfs "$WORK/rootfs5"
ID5="orh-e2e-$$-norun"
make_bundle "$WORK/b5" "$WORK/rootfs5" "$WORK/node" "$WORK/on.conf" "$NOCAP" "$ASK"
runc run -d --bundle "$WORK/b5" "$ID5" </dev/null >"$WORK/b5.out" 2>&1 || true
wait_out "$ID5"
check_ran "no /run in the image"
check "no /run in the image: the plan's lines, no NCCL_DEBUG* line, no capture mount" \
	bash -c 'grep -q "^NCCL_IB_HCA=" <<<"$1" && ! grep -q "^NCCL_DEBUG" <<<"$1" &&
		grep -qx 0 <<<"$1"' _ "$OUT"
J=$("$HOOK" inspect "$ID5" --json 2>&1 || true)
check "no /run in the image: the record says the capture was left out, and why" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["nccl"]["record"].startswith("on: "), r["nccl"]
assert r["nccl_conf"]["record_left_out"].startswith("no /run in the container"), r["nccl_conf"]
assert r["nccl_used"]["capture"].startswith("none: "), r["nccl_used"]' "$J"
runc delete -f "$ID5" >/dev/null 2>&1 || true

# nccl_record = no
ID4="orh-e2e-$$-off"
make_bundle "$WORK/b4" "$WORK/rootfs" "$WORK/node" "$WORK/off.conf" "$NOCAP" "$ASK"
rm -f "$WORK/rootfs/tmp/out"
runc run -d --bundle "$WORK/b4" "$ID4" </dev/null >"$WORK/b4.out" 2>&1 || true
wait_out "$ID4"
check_ran "nccl_record = no"
check "nccl_record = no: no NCCL_DEBUG* line, no capture mount" \
	bash -c 'grep -q "^NCCL_IB_HCA=" <<<"$1" && ! grep -q "^NCCL_DEBUG" <<<"$1" &&
		grep -qx 0 <<<"$1"' _ "$OUT"
INS=$("$HOOK" inspect "$ID4" 2>&1 || true)
check "nccl_record = no: the record says so" grep -qx "nccl.record: off: nccl_record = no" <<<"$INS"
runc delete -f "$ID4" >/dev/null 2>&1 || true
# The spec-edit path (podman's precreate): the nccl-conf stage mounts the directory and
# writes the three lines, as the live hook does
if command -v podman >/dev/null 2>&1; then
	rm -rf "$WORK/node" "$WORK/rootfs"
	spec_edit_node
	printf '[containers]\nnccl_record = yes\n' >>"$WORK/node.conf"
	hooks_d "$WORK/hooks.d" "$HOOK" "$WORK/node.conf" oci-rdma-hook-precreate
	podman_setup --hooks-dir "$WORK/hooks.d"
	RC=0
	OUT=$("${PODMAN[@]}" run --rm --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
		--network none --annotation oci-rdma-hook/enable=true localhost/orh-e2e-bb \
		/bin/sh -c 'echo "memlock $(ulimit -l)"; cut -d" " -f2,3,4 /proc/mounts; cat /etc/nccl.conf' \
		2>"$WORK/podman.err") || RC=$?
	ERR=$(cat "$WORK/podman.err")
	check_ran "podman precreate"
	check "podman precreate: the capture directory is a tmpfs, nosuid, nodev, noexec" \
		grep -Eq "^/run/oci-rdma-hook-nccl tmpfs rw,nosuid,nodev,noexec," <<<"$OUT"
	check "podman precreate: /etc/nccl.conf holds NCCL_DEBUG_FILE into it" \
		grep -qx "NCCL_DEBUG_FILE=/run/oci-rdma-hook-nccl/nccl.%p" <<<"$OUT"
fi
finish
