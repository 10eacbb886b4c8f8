#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: containerd (runc.v2 shim) runs the runtime shim as its runc binary
# (`ctr run --runc-binary .../oci-rdma-runtime`): the container gets the devices, the
# memlock limit and the plan's settings in /etc/nccl.conf, an image's own nccl.conf keeps
# its values, a process started with `ctr task exec` sees the settings; a container that
# opts out is left unchanged. ctr's containers get a new network namespace that no hook sets
# up, so the shim writes /etc/nccl.conf itself; on a read-only root its nccl-conf stage
# does.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"

need_root_runc
command -v ctr >/dev/null 2>&1 || cant_run "ctr (containerd) not installed"
setup_work
trap 'rc=$?; stop_daemons; cleanup_work $rc' EXIT

spec_edit_node
make_rootfs "$WORK/rootfs"
make_image_rootfs "$WORK/rootfs-img"
install_shim
start_containerd "$WORK/node.conf" "$WORK/node"

NS=orh-e2e-$$
N=0
ROOTFS=$WORK/rootfs
run_ctr_shim() {
	N=$((N + 1))
	RC=0
	OUT=$(ctr -a "$CD_SOCK" -n "$NS" run --rm --rootfs --runc-binary "$SHIM" "$@" \
		"$ROOTFS" "orh-e2e-$$-$N" /bin/sh -c "$INSIDE" 2>"$WORK/ctr.err" </dev/null) || RC=$?
	ERR=$(cat "$WORK/ctr.err")
}
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)

run_ctr_shim --env NCCL_IB_HCA=mine
check "ctr run through the shim succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_spec_edit_inside

ROOTFS=$WORK/rootfs-img run_ctr_shim
check "image with its own nccl.conf: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_image_conf_kept "containerd shim"

# a process started later with ctr task exec reads the same file
RC=0
ctr -a "$CD_SOCK" -n "$NS" run -d --rootfs --runc-binary "$SHIM" "$WORK/rootfs" \
	"orh-e2e-$$-x" /bin/sleep 600 >/dev/null 2>"$WORK/ctr.err" </dev/null || RC=$?
check "ctr run -d through the shim succeeds (rc $RC: $(cat "$WORK/ctr.err"))" [ "$RC" = 0 ]
RC=0
OUT=$(ctr -a "$CD_SOCK" -n "$NS" task exec --exec-id x1 "orh-e2e-$$-x" /bin/sh -c "$INSIDE" 2>&1 </dev/null) || RC=$?
check_conf_has_plan "ctr task exec: the process sees every plan setting in /etc/nccl.conf"
# what was done, as inspect shows it. ctr gives the container a new network namespace that
# no hook sets up: the shim knows its network (empty) and writes /etc/nccl.conf itself; no
# nccl-conf stage runs, and its record is the shim's, alive while the bundle is there
J=$("$HOOK" inspect "orh-e2e-$$-x" --json 2>&1 || true)
check "inspect: the shim served the container alone: its record, the plan's ports, /etc/nccl.conf written" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["id"] == sys.argv[2] and r["stage"] == "runtime shim" and r["alive"] is True, r
assert r["pid"] == 0 and r["bundle"]["path"].endswith("/" + sys.argv[2]), r
assert r["node_read"] == "by the runtime shim" and "node_from" not in r, r
assert r["nccl_conf"]["result"] == "written" and r["nccl_conf"]["added"] > 0, r["nccl_conf"]
assert any(p["used"] for p in r["plan"]["ports"]), r["plan"]
assert r["time_ms"]["shim"]["steps"]["/etc/nccl.conf"] > 0, r["time_ms"]' "$J" "orh-e2e-$$-x"
# (the bundle's path comes from inspect: none, or no config.json there, fails the check)
check "the shim's edit registered no nccl-conf stage, and left no node.json" \
	bash -c '[ -n "$1" ] && [ -f "$1/config.json" ] && ! grep -q nccl-conf "$1/config.json" &&
		[ ! -e "$2/node.json" ] && [ -f "$2/record.json" ]' \
	_ "$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["bundle"]["path"])' "$J" 2>/dev/null)" \
	"/run/oci-rdma-hook/orh-e2e-$$-x"
ctr -a "$CD_SOCK" -n "$NS" task kill -s KILL "orh-e2e-$$-x" >/dev/null 2>&1 || true
sleep 1
ctr -a "$CD_SOCK" -n "$NS" task rm -f "orh-e2e-$$-x" >/dev/null 2>&1 || true
check "the state directory is gone once the task is removed (the shim's delete)" \
	bash -c '[ -n "$1" ] && [ ! -e "$2" ]' _ "$J" "/run/oci-rdma-hook/orh-e2e-$$-x"
ctr -a "$CD_SOCK" -n "$NS" container rm "orh-e2e-$$-x" >/dev/null 2>&1 || true

# A read-only root: the shim cannot write the file in place, so its edit registers the
# nccl-conf stage, which binds a copy over it and decides from the shim's node.json. The
# file it makes holds the same plan as the shim's own (the same node, config and network).
SHIM_CONF=$(grep -v '^#' "$WORK/rootfs/etc/nccl.conf" 2>&1)
make_rootfs "$WORK/rootfs-ro"
RC=0
ctr -a "$CD_SOCK" -n "$NS" run -d --read-only --rootfs --runc-binary "$SHIM" "$WORK/rootfs-ro" \
	"orh-e2e-$$-ro" /bin/sleep 600 >/dev/null 2>"$WORK/ctr.err" </dev/null || RC=$?
check "ctr run -d --read-only through the shim succeeds (rc $RC: $(cat "$WORK/ctr.err"))" [ "$RC" = 0 ]
RC=0
OUT=$(ctr -a "$CD_SOCK" -n "$NS" task exec --exec-id r1 "orh-e2e-$$-ro" /bin/sh -c "$INSIDE" 2>&1 </dev/null) || RC=$?
check_conf_has_plan "read-only root: the process sees every plan setting in /etc/nccl.conf"
check "read-only root: the stage's file holds the lines the shim wrote for the same plan" \
	bash -c '[ -n "$1" ] && [ "$1" = "$(grep "^conf:" <<<"$2" | sed "s/^conf://" | grep -v "^#")" ]' \
	_ "$SHIM_CONF" "$OUT"
J=$("$HOOK" inspect "orh-e2e-$$-ro" --json 2>&1 || true)
check "inspect: the nccl-conf stage took the shim's reading of the node (node.json), with the shim's time" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["stage"] == "nccl-conf" and r["alive"] is True, r
assert r["node_read"] == "by the runtime shim", r.get("node_read")
assert r["node_from"] == "/run/oci-rdma-hook/%s/node.json" % sys.argv[2], r.get("node_from")
assert r["nccl_conf"]["bind_mounted_from"], r["nccl_conf"]
assert r["time_ms"]["shim"]["steps"]["node, plan and spec edit"] > 0, r["time_ms"]' "$J" "orh-e2e-$$-ro"
check "the node.json the stage took is root's alone, beside the record" \
	[ "$(stat -c '%U %a' "/run/oci-rdma-hook/orh-e2e-$$-ro/node.json" 2>&1)" = "root 600" ]
ctr -a "$CD_SOCK" -n "$NS" task kill -s KILL "orh-e2e-$$-ro" >/dev/null 2>&1 || true
sleep 1
ctr -a "$CD_SOCK" -n "$NS" task rm -f "orh-e2e-$$-ro" >/dev/null 2>&1 || true
check "read-only root: the state directory is gone once the task is removed" \
	bash -c '[ -n "$1" ] && [ ! -e "$2" ]' _ "$J" "/run/oci-rdma-hook/orh-e2e-$$-ro"
ctr -a "$CD_SOCK" -n "$NS" container rm "orh-e2e-$$-ro" >/dev/null 2>&1 || true

# (a fresh rootfs: ctr runs the directory itself, where the runs above wrote nccl.conf)
make_rootfs "$WORK/rootfs-off"
ROOTFS=$WORK/rootfs-off run_ctr_shim --annotation oci-rdma-hook/enable=false
check "opted-out container runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "opted-out container"

# activation = annotation: `ctr run --env OCI_RDMA_HOOK_ENABLE=true` asks as the
# annotation does (the shim reads the node config at every start); a fresh rootfs each
printf '[containers]\nactivation = annotation\n' >>"$WORK/node.conf"
make_rootfs "$WORK/rootfs-env"
ROOTFS=$WORK/rootfs-env run_ctr_shim --env OCI_RDMA_HOOK_ENABLE=true
check "activation = annotation, --env OCI_RDMA_HOOK_ENABLE=true: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_served "--env OCI_RDMA_HOOK_ENABLE=true"
make_rootfs "$WORK/rootfs-noreq"
ROOTFS=$WORK/rootfs-noreq run_ctr_shim
check "activation = annotation, no request: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "activation = annotation, no request"

# on_error = fail: a container that asked, with a preset the node does not know, is refused,
# and ctr's own error says why (the shim appends the reason to runc's --log file).
printf '[containers]\non_error = fail\nimage_check = warn\n' >>"$WORK/node.conf"
run_ctr_shim --annotation oci-rdma-hook/enable=true --annotation oci-rdma-hook/preset=../../x
check "on_error=fail: a refused container does not run (rc $RC)" \
	bash -c '[ "$1" != 0 ] && ! grep -q "^memlock" <<<"$2"' _ "$RC" "$OUT"
check "on_error=fail: ctr's error gives the reason (stderr: $ERR)" \
	grep -q "annotation 'oci-rdma-hook/preset': unknown preset '../../x'" <<<"$ERR"

# strict means strict: a container that asked and gets no usable port (the config's include
# names none of the node's HCAs) is refused, with the reason in ctr's error
printf '[node]\ninclude = mlx5_99\n' >>"$WORK/node.conf"
make_rootfs "$WORK/rootfs-strict"
ROOTFS=$WORK/rootfs-strict run_ctr_shim --annotation oci-rdma-hook/enable=true
check "on_error=fail, asked, no usable port: refused, ctr's error says why (rc $RC: $ERR)" \
	bash -c '[ "$1" != 0 ] && ! grep -q "^memlock" <<<"$2" &&
		 grep -q "no usable RDMA port on this node (mlx5_0:1: not in the config.s include list" <<<"$3"' \
	_ "$RC" "$OUT" "$ERR"

finish
