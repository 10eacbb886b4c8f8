#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: the NRI plugin as containerd 2.3.4 runs it itself, and the pods' fail-closed
# annotation. One private containerd (config version 3, its root, state and sockets under
# $WORK, NRI on with its socket, plugin_path and plugin_config_path there, NRI's default
# validator enabled), plain runc, no handler of ours; pods through its CRI plugin as the
# kubelet drives them (tests/cri/cri.py). The cases:
#   - pre-installed: a link 10-oci-rdma-hook to the binary in plugin_path, its config in
#     plugin_config_path (the only place that names the sample node, as [node] sysroot):
#     containerd starts it with no argument, it registers, and an annotated pod is served
#     from that node (what the container sees: the device allowed, the node's memlock, the
#     plan in /etc/nccl.conf), its nccl-conf stage run by the plugin at StartContainer from
#     the same config, no hook in the container's config.json;
#   - a pod carrying NRI's required-plugins annotation (required-plugins.noderesource.dev)
#     naming oci-rdma-hook starts while the plugin is up;
#   - a config in plugin_config_path that the node config's parser refuses: containerd logs
#     the plugin's refusal naming "Configure's config" and the line; the plugin is not used,
#     and the required-plugins pod is refused ("not present"), while a pod without the
#     annotation starts;
#   - the plugin up again (connected to the socket): the same pod starts, served;
#   - containerd's validator with reject_oci_hook_adjustment = true, the plugin on the
#     socket: by default (nri_stage = start) the annotated pod starts, served, no hook in its
#     config.json, its record the stage's run by the plugin at StartContainer, its state
#     directory gone at RemoveContainer; with the stage as a hook (nri_stage = hook):
#     with nri_hooks = yes the annotated pod is refused for the plugin's hook; with
#     nri_hooks = no it starts, served without hooks (the device allowed, the node's
#     memlock, the plan in /etc/nccl.conf from the plugin's read-only copy, no hook of ours
#     in its config.json; `inspect` shows the plugin's record "served without hooks" and
#     what was not done), and its state directory goes at RemoveContainer; with the
#     default (auto) the first pod is refused, the plugin logs the rejection naming
#     reject_oci_hook_adjustment and nri_hooks, and the next pod is served without hooks,
#     its record naming the rejection.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"
CRI_SRC=${ORH_SRCDIR:-$HERE/../..}
. "$CRI_SRC/tests/cri/lib.sh"
need_root_runc
PEERS=${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}
for p in containerd ctr containerd-shim-runc-v2; do
	[ -x "$PEERS/$p" ] || cant_run "$PEERS/$p missing (tests/setup-debian.sh builds it)"
done
export PATH=$PEERS:$PATH
command -v jq >/dev/null 2>&1 || cant_run "jq not installed"
[ -x "${PAUSE:-}" ] || cant_run "PAUSE (the static tests/cri/pause.c) not built"
CRI_PY=$(cri_py) ||
	cant_run "no python3 with grpc and grpc_tools (python3-grpcio, python3-grpc-tools)"

setup_work
PODS=()
PLUGIN_PID=""
PRE_EXISTING=""
[ -e /run/containerd ] && PRE_EXISTING=/run/containerd
stop_all() {
	local id
	for id in "${PODS[@]}"; do
		[ -z "$id" ] || cri rmp -f "$id" >/dev/null 2>&1 || true
	done
	[ -z "$PLUGIN_PID" ] || { kill "$PLUGIN_PID" 2>/dev/null; wait "$PLUGIN_PID" 2>/dev/null; } || true
	stop_daemons
	for id in $(runc --root /run/containerd/runc/k8s.io list -q 2>/dev/null); do
		! grep -qwF "$id" "$WORK/ids" 2>/dev/null ||
			runc --root /run/containerd/runc/k8s.io delete -f "$id" >/dev/null 2>&1 || true
	done
	rm -f "/run/oci-rdma-hook/.nri-10-oci-rdma-hook.conf"
	[ -n "$PRE_EXISTING" ] || rmdir /run/containerd/runc/k8s.io /run/containerd/runc \
		/run/containerd/s /run/containerd 2>/dev/null || true
}
trap 'rc=$?; stop_all; cleanup_work $rc' EXIT

CD=$WORK/cd
NRI_SOCK=$CD/state/nri/nri.sock
cri() { cri_at "$CD" "$@"; }
spec_edit_node # $WORK/node (seed001-roce), $INSIDE
NODE_CONF="[node]
sysroot = $WORK/node
memlock = 4M
[containers]
activation = annotation"
write_conf "$WORK/node.conf" "$NODE_CONF"
make_rootfs "$WORK/rootfs"
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)

CD2_TABLES='[plugins."io.containerd.nri.v1.nri".default_validator]
    enable = true' cd2_config "$CD" "$NRI_SOCK"

DEFAULT_MEMLOCK=64
CD_RUN=0
start_cd() {
	CD_RUN=$((CD_RUN + 1))
	CD_LOG=$CD/containerd-$CD_RUN.log
	(
		ulimit -S -l $DEFAULT_MEMLOCK
		exec containerd --config "$CD/config.toml" >"$CD_LOG" 2>&1
	) &
	DAEMON_PIDS=($!)
	wait_for 30 ctr -a "$CD/containerd.sock" version ||
		cant_run "containerd did not start: $(tail -5 "$CD_LOG")"
	wait_for 20 cri_ready || cant_run "the CRI is not ready: $(cri status 2>&1 | tr '\n' ' ')"
}
restart_cd() {
	stop_daemons
	start_cd
}
cri_ready() {
	local s
	s=$(cri status 2>/dev/null || true)
	grep -qx 'RuntimeReady true' <<<"$s"
}
# synced NAME: containerd (this run's log) has the plugin NAME (IDX-NAME) synchronized: a
# pre-installed one, or one that connected to the socket
synced() {
	local done="(synchronization success|connected and synchronized)"
	grep -Eq "(pre-installed NRI plugin|plugin) .*\"$1.\" $done" "$CD_LOG"
}

# ---- the plugin pre-installed: a link in plugin_path, its config in plugin_config_path ----
ln -s "$HOOK" "$CD/nri/plugins/10-oci-rdma-hook"
write_conf "$CD/nri/conf.d/oci-rdma-hook.conf" "$NODE_CONF"
start_cd
check "containerd is 2.3.4" eval \
	'ctr -a "$CD/containerd.sock" version | grep -Eq "Version: +v?2\.3\.4"'
cri_images "$CD" "$PAUSE" "$WORK/rootfs" >"$WORK/images.log" 2>&1 ||
	cant_run "the local images: $(cat "$WORK/images.log")"
check "pre-installed: containerd started 10-oci-rdma-hook, connected and synchronized" \
	wait_for 20 synced 10-oci-rdma-hook
check "pre-installed: the plugin runs as containerd's child, started with no argument" \
	eval 'pgrep -P "${DAEMON_PIDS[0]}" -x 10-oci-rdma-hoo >/dev/null &&
		[ "$(tr "\0" " " </proc/$(pgrep -P "${DAEMON_PIDS[0]}" -x 10-oci-rdma-hoo)/cmdline)" \
			= "$CD/nri/plugins/10-oci-rdma-hook " ]'

MARK_RAN=orh-nri-ran
MARK_END=orh-nri-end
SHOW='for f in /dev/infiniband/*; do [ -e "$f" ] && probe "$f"; done'
CASE=""
# run_pod NAME [POD-JQ]: a pod in the node's network with one container that prints its
# marker, $INSIDE and $SHOW; its log in $OUT, the ids in $POD and $CTR; a refused start:
# status 1 and the CRI's error in $CRI_ERR
run_pod() {
	local name=$1 d=$WORK/pods/$1
	CASE=$name OUT="" POD="" CTR=""
	mkdir -p "$d/logs"
	cri_pod_json "$d/pod.json" "$name" 2 "$d/logs" "${2:-.}"
	cri_ctr_json "$d/ctr.json" 2 \
		"echo $MARK_RAN; $INSIDE; $SHOW; echo $MARK_END; exec sleep 600"
	cri_start_pod "$CD" "$d" "" || { POD=$CRI_POD; [ -z "$POD" ] || PODS+=("$POD"); return 1; }
	POD=$CRI_POD CTR=$CRI_CTR
	PODS+=("$POD")
	echo "$POD $CTR" >>"$WORK/ids"
	wait_for 20 grep -q "$MARK_END" "$d/logs/work.log" || true
	OUT=$(cri logs "$CTR" 2>&1)
	check_ran "$name"
}
end_pod() {
	[ -n "$POD" ] || return 0
	cri rmp -f "$POD" >/dev/null 2>&1 || not_ok "$CASE: rmp -f"
	PODS=("${PODS[@]/$POD/}")
	POD=""
}
seen() { grep "^$1" <<<"$OUT" | tr '\n' ' '; }
check_plan_served() {
	check "$1: uverbs1 is allowed by the device cgroup (open: ENXIO, not EPERM)" \
		grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT"
	check "$1: memlock raised to the node's 4 MiB ($(seen memlock))" \
		grep -qx 'memlock 4096' <<<"$OUT"
	check_conf_has_plan "$1: /etc/nccl.conf has every plan setting"
}
OPT_IN='.annotations["oci-rdma-hook/enable"] = "true"'
REQUIRED='.annotations["required-plugins.noderesource.dev/container.work"] = "[oci-rdma-hook]"'

run_pod preinstalled "$OPT_IN" || not_ok "preinstalled: the pod did not start: $CRI_ERR"
check_plan_served preinstalled
INSPECT=$("$HOOK" inspect "$CTR" --json 2>&1) || true
check "preinstalled: the nccl-conf stage wrote /etc/nccl.conf from the node the plugin read" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["node_read"] == "by the NRI plugin", r.get("node_read")
assert r["nccl_conf"]["result"] in ("written", "merged"), r
' "$INSPECT"
check "preinstalled: the plugin ran the stage at StartContainer, from Configure's config" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["stage"] == "nccl-conf", r.get("stage")
assert r["edited_by"].endswith("its stage run by the plugin at StartContainer"), r["edited_by"]
assert r["activation"]["result"] == "requested", r["activation"]  # activation = annotation
' "$INSPECT"
check "preinstalled: no hook in the container's config.json" \
	jq -e '[.hooks // {} | .[][]?] | length == 0' \
	"$CD/state/io.containerd.runtime.v2.task/k8s.io/$CTR/config.json"
end_pod

run_pod required-up "$OPT_IN | $REQUIRED" || not_ok "required-up: refused: $CRI_ERR"
check_plan_served required-up
end_pod

# ---- a config the parser refuses: the plugin refuses Configure, containerd does not use it --
write_conf "$CD/nri/conf.d/oci-rdma-hook.conf" "[node]
memlock = 4M
bogus = 1"
restart_cd
check "bad config: containerd logs the plugin's refusal naming Configure's config and its line" \
	wait_for 20 grep -q "Configure's config:3: .*bogus" "$CD_LOG"
check "bad config: the plugin was not synchronized" eval '! synced 10-oci-rdma-hook'
RC=0
run_pod required-down "$OPT_IN | $REQUIRED" || RC=$?
check "required-down: the pod is refused while the plugin is down ($CRI_ERR)" \
	eval '[ "$RC" = 1 ] && grep -q "required plugin \"oci-rdma-hook\" not present" <<<"$CRI_ERR"'
end_pod
run_pod plain-down "$OPT_IN" || not_ok "plain-down: refused: $CRI_ERR"
check "plain-down: a pod without the annotation starts, unserved ($(seen memlock))" \
	grep -qx "memlock $DEFAULT_MEMLOCK" <<<"$OUT"
end_pod

# ---- the plugin up again, on the socket: the same pod starts, served ----------------------
"$HOOK" nri --socket "$NRI_SOCK" --config "$WORK/node.conf" 2>"$WORK/plugin.log" &
PLUGIN_PID=$!
check "up again: containerd has 50-oci-rdma-hook connected and synchronized" \
	wait_for 20 synced 50-oci-rdma-hook
run_pod required-again "$OPT_IN | $REQUIRED" || not_ok "required-again: refused: $CRI_ERR"
check_plan_served required-again
end_pod

# ---- containerd's validator rejecting OCI hooks: reject_oci_hook_adjustment = true --------
kill "$PLUGIN_PID" 2>/dev/null; wait "$PLUGIN_PID" 2>/dev/null || true
PLUGIN_PID=""
rm -f "$CD/nri/plugins/10-oci-rdma-hook"
sed -i 's/^    enable = true$/    enable = true\n    reject_oci_hook_adjustment = true/' "$CD/config.toml"
# plugin_on CONFIG LOG: containerd restarted, the plugin on its socket with CONFIG
plugin_on() {
	[ -z "$PLUGIN_PID" ] || { kill "$PLUGIN_PID" 2>/dev/null; wait "$PLUGIN_PID" 2>/dev/null; } || true
	restart_cd
	"$HOOK" nri --socket "$NRI_SOCK" --config "$1" 2>"$2" &
	PLUGIN_PID=$!
	wait_for 20 synced 50-oci-rdma-hook || not_ok "$1: the plugin was not synchronized"
}
# no_hook_of_ours: the container's config.json (containerd's bundle) has no hook at all
no_hook_of_ours() {
	jq -e '[.hooks // {} | .[][]?] | length == 0' \
		"$CD/state/io.containerd.runtime.v2.task/k8s.io/$CTR/config.json" >/dev/null
}
REJECTED="attempted restricted OCI hook injection"
# served_no_hook NAME: the annotated pod NAME started, served, with no hook in its
# config.json; its record in $INSPECT
served_no_hook() {
	run_pod "$1" "$OPT_IN" || not_ok "$1: the pod did not start: $CRI_ERR"
	check_plan_served "$1"
	check "$1: no hook in the container's config.json" no_hook_of_ours
	INSPECT=$("$HOOK" inspect "$CTR" --json 2>&1) || true
}

# the default: the stage run by the plugin at StartContainer, no hook to reject
plugin_on "$WORK/node.conf" "$WORK/plugin-start.log"
served_no_hook start-validator
check "start-validator: inspect shows the stage's record, run by the plugin at StartContainer" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["stage"] == "nccl-conf", r.get("stage")
assert r["alive"] is True, r.get("alive")
assert r["edited_by"].endswith("its stage run by the plugin at StartContainer"), r["edited_by"]
assert r["node_read"] == "by the NRI plugin", r.get("node_read")
' "$INSPECT"
START_DIR=/run/oci-rdma-hook/$CTR
end_pod
check "start-validator: the plugin removed the state directory at RemoveContainer" \
	wait_for 20 test ! -e "$START_DIR"

# the stage as an OCI hook (nri_stage = hook): what the validator does to it
write_conf "$WORK/hooks-yes.conf" "$NODE_CONF
nri_stage = hook
nri_hooks = yes"
plugin_on "$WORK/hooks-yes.conf" "$WORK/plugin-yes.log"
check "validator: containerd runs with reject_oci_hook_adjustment = true" \
	grep -q '^    reject_oci_hook_adjustment = true$' "$CD/config.toml"
RC=0
run_pod hooks-yes "$OPT_IN" || RC=$?
check "hooks-yes: the pod is refused for the plugin's hook ($CRI_ERR)" \
	eval '[ "$RC" = 1 ] && grep -q "$REJECTED" <<<"$CRI_ERR"'
end_pod
check "hooks-yes: the plugin logs the likely rejection and goes on giving hooks (nri_hooks = yes)" \
	wait_for 20 grep -q 'reject_oci_hook_adjustment = true); nri_hooks = yes in the node config: the plugin goes on giving hooks' \
	"$WORK/plugin-yes.log"

write_conf "$WORK/hooks-no.conf" "$NODE_CONF
nri_hooks = no"
plugin_on "$WORK/hooks-no.conf" "$WORK/plugin-no.log"
served_no_hook hooks-no
check "hooks-no: inspect shows the plugin's record: served without hooks, nri_hooks = no" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["stage"] == "NRI plugin", r.get("stage")
assert r["alive"] is None, r.get("alive")  # no process, no bundle: neither there nor gone
assert "served without hooks (nri_hooks = no in the node config)" in r["edited_by"], r
assert r["node_read"] == "by the NRI plugin", r.get("node_read")
assert r["nccl_conf"]["result"] == "written" and r["nccl_conf"]["added"] > 0, r["nccl_conf"]
assert any(w.startswith("not done without hooks: ") for w in r["warnings"]), r["warnings"]
' "$INSPECT"
NOHOOK_DIR=/run/oci-rdma-hook/$CTR
HAD_DIR=0
[ -f "$NOHOOK_DIR/nccl.conf" ] && HAD_DIR=1
end_pod
check "hooks-no: the plugin removed the state directory (its nccl.conf copy) at RemoveContainer" \
	eval '[ "$HAD_DIR" = 1 ] && wait_for 20 test ! -e "$NOHOOK_DIR"'

write_conf "$WORK/hooks-auto.conf" "$NODE_CONF
nri_stage = hook"
plugin_on "$WORK/hooks-auto.conf" "$WORK/plugin-auto.log"
RC=0
run_pod auto-first "$OPT_IN" || RC=$?
check "auto: the first pod is refused for the plugin's hook ($CRI_ERR)" \
	eval '[ "$RC" = 1 ] && grep -q "$REJECTED" <<<"$CRI_ERR"'
end_pod
check "auto: the plugin logs the rejection, naming reject_oci_hook_adjustment and nri_hooks" \
	wait_for 20 grep -q 'reject_oci_hook_adjustment = true.*without hooks.*nri_hooks = no' \
	"$WORK/plugin-auto.log"
served_no_hook auto-next
check "auto-next: inspect shows the plugin's record: served without hooks, the rejection why" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["stage"] == "NRI plugin", r.get("stage")
assert "served without hooks (the runtime rejected the OCI hooks" in r["edited_by"], r
assert "reject_oci_hook_adjustment" in r["edited_by"], r["edited_by"]
' "$INSPECT"
end_pod

if [ "$FAILS" != 0 ]; then
	echo "# containerd's NRI lines:"
	grep -ih 'nri\|plugin "' "$CD"/containerd-*.log | tail -n 30 | sed 's/^/#   /'
fi
finish
