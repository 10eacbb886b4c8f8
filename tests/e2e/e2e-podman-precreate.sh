#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: podman (runc, cgroupfs) with a hooks.d directory holding the precreate
# registration; the spec edit must reach PID 1 (environment, rlimit, devices) and leave a
# variable the user set, and a container that opts out, alone.
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v podman >/dev/null 2>&1 || cant_run "podman not installed"
setup_work

spec_edit_node
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = []
EOF
export CONTAINERS_CONF="$WORK/containers.conf"

# The shipped registration, pointed at the build and the fake node.
mkdir -p "$WORK/hooks.d"
python3 - "${ORH_SRCDIR:-$(dirname "$0")/../..}/hooks.d/oci-rdma-hook-precreate.json.in" "$WORK/hooks.d/oci-rdma-hook-precreate.json" \
	"$HOOK" "$WORK/node" "$WORK/node.conf" <<'EOF'
import json, sys
src, dst, hook, node, conf = sys.argv[1:6]
h = json.load(open(src))
assert h["stages"] == ["precreate"], h["stages"]
assert h["when"] == {"always": True}
assert [e.split("=")[0] for e in h["hook"]["env"]] == ["PATH"]
h["hook"]["path"] = hook
h["hook"]["args"] = ["oci-rdma-hook", "--sysroot", node, "--config", conf, "precreate"]
json.dump(h, open(dst, "w"))
EOF

podman_setup --hooks-dir "$WORK/hooks.d"

# What a container on this node gets (host network view).
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)
[ -n "$PLAN" ] || cant_run "the fake node gives an empty plan"

# (b) activated: env in PID 1, the user's NCCL_IB_HCA kept, devices, memlock.
run_podman -e NCCL_IB_HCA=mine
check "podman run with the precreate hook succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_spec_edit_inside
check "only one NCCL_IB_HCA in PID 1's environment" [ "$(grep -c '^NCCL_IB_HCA=' <<<"$OUT")" = 1 ]
check "NCCL_IB_TIMEOUT from the preset is in PID 1's environment" grep -q '^NCCL_IB_TIMEOUT=' <<<"$OUT"
check "uverbs0 (left out by the plan) is not given" bash -c "! grep -q uverbs0 <<<\"\$1\"" _ "$OUT"

# (g) opted out: nothing changes.
run_podman --annotation oci-rdma-hook/enable=false
check "opted-out container runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check "opted-out container has no NCCL variable" bash -c "! grep -q '^NCCL_' <<<\"\$1\"" _ "$OUT"
check "opted-out container has no RDMA device" bash -c "! grep -q infiniband <<<\"\$1\"" _ "$OUT"
check "opted-out container keeps the default memlock" \
	bash -c "! grep -qx 'memlock 4096' <<<\"\$1\"" _ "$OUT"

"${PODMAN[@]}" rmi -f localhost/orh-e2e-bb >/dev/null 2>&1 || true
"${PODMAN[@]}" system reset -f >/dev/null 2>&1 || true
finish
