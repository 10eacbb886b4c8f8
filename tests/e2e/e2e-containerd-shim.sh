#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: containerd (runc.v2 shim) runs the runtime shim as its runc binary
# (`ctr run --runc-binary .../oci-rdma-runtime`): PID 1 gets the plan's variables,
# the devices and the memlock limit; a container that opts out is left unchanged.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"

need_root_runc
command -v ctr >/dev/null 2>&1 || cant_run "ctr (containerd) not installed"
setup_work
trap 'rc=$?; stop_daemons; cleanup_work $rc' EXIT

spec_edit_node
make_rootfs "$WORK/rootfs"
install_shim
start_containerd "$WORK/node.conf" "$WORK/node"

NS=orh-e2e-$$
N=0
run_ctr_shim() {
	N=$((N + 1))
	RC=0
	OUT=$(ctr -a "$CD_SOCK" -n "$NS" run --rm --rootfs --runc-binary "$SHIM" "$@" \
		"$WORK/rootfs" "orh-e2e-$$-$N" /bin/sh -c "$INSIDE" 2>"$WORK/ctr.err" </dev/null) || RC=$?
	ERR=$(cat "$WORK/ctr.err")
}
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)

run_ctr_shim --env NCCL_IB_HCA=mine
check "ctr run through the shim succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_spec_edit_inside

run_ctr_shim --annotation oci-rdma-hook/enable=false
check "opted-out container runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check "opted-out container has no NCCL variable and no RDMA device" \
	bash -c "! grep -q -e '^NCCL_' -e infiniband <<<\"\$1\"" _ "$OUT"
check "opted-out container keeps the default memlock" \
	bash -c "! grep -qx 'memlock 4096' <<<\"\$1\"" _ "$OUT"

finish
