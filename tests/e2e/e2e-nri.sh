#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end through NRI: `oci-rdma-hook nri` connected to containerd 2.3.4's NRI socket,
# pods driven through containerd's CRI plugin as the kubelet drives it (tests/cri/cri.py),
# with the plain runc runtime and no handler of ours: nothing in containerd's config names
# oci-rdma-hook. One private containerd (config version 3, its root, state and sockets under
# $WORK, NRI on with its socket in that state directory) serves every case; each case is a
# pod, and checks first that its container ran, then what the workload sees from inside:
#   - annotated: the uverbs nodes usable (allowed by the device cgroup: ENXIO on open), the
#     memlock raised, the plan in /etc/nccl.conf, for ExecSync's process too, the record
#     written and shown by `inspect`, its stage deciding from the node the plugin read
#     (node.json); the sandbox is left as containerd made it;
#   - the image's own /etc/nccl.conf: merged with the plan by the nccl-conf stage, which
#     the plugin runs itself at StartContainer (no hook in config.json), the image's
#     settings kept; the same with a read-only root (the merged file bind-mounted, the
#     image's own left as it was);
#   - CRI devices carrying uverbs2 (a device plugin's DeviceSpec): only mlx5_2;
#   - NVIDIA_VISIBLE_DEVICES=2,3 on the DGX-like node: the NICs near those GPUs (rule 9);
#   - uid 1000 with every capability dropped, in the pod network: memlock raised and
#     NCCL_SOCKET_IFNAME naming the pod's own eth0;
#   - a pod that asks for nothing gets nothing;
#   - two plugins at once: ours and tests/nri/orh-nri-adddev, which adds a device: both
#     plugins' devices in the container;
#   - the plugin killed with SIGKILL while containerd waits on it: the pod starts, unserved,
#     within a bound; the plugin started again serves the next pod;
#   - containerd restarted: the running plugin reconnects and serves the next pod;
#   - SIGTERM ends the plugin with status 0;
#   - the NRI DaemonSet's container (deploy/kubernetes/overlays/nri) run by this containerd
#     from the nri image's root with its host paths: it copies the binary and the node
#     config to /opt/oci-rdma-hook and its plugin serves a pod; not in the host's PID
#     namespace, it gives the stage as OCI hooks, run from there.
# The plugin reads the node ($WORK/node, a link switched between sample nodes) and its
# config ($WORK/node.conf) for every container.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"
CRI_SRC=${ORH_SRCDIR:-$HERE/../..}
. "$CRI_SRC/tests/cri/lib.sh"
need_root_runc
PEERS=${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}
for p in containerd ctr containerd-shim-runc-v2 orh-nri-adddev; do
	[ -x "$PEERS/$p" ] || cant_run "$PEERS/$p missing (tests/setup-debian.sh builds it)"
done
# containerd 2.3.4 and its own runc shim (found through PATH), its ctr
export PATH=$PEERS:$PATH
command -v jq >/dev/null 2>&1 || cant_run "jq not installed"
command -v ip >/dev/null 2>&1 || cant_run "iproute2 (ip) not installed"
for p in bridge host-local loopback; do
	[ -x "/usr/lib/cni/$p" ] || cant_run "/usr/lib/cni/$p missing (containernetworking-plugins)"
done
[ -x "${PAUSE:-}" ] || cant_run "PAUSE (the static tests/cri/pause.c) not built"
CRI_PY=$(cri_py) ||
	cant_run "no python3 with grpc and grpc_tools (python3-grpcio, python3-grpc-tools)"
"$HOOK" nri --help >/dev/null 2>&1 || cant_run "this oci-rdma-hook has no nri command"

setup_work
NET=orh-nri-$$
BRIDGE=orhnri$$
PODS=()
PLUGIN_PID="" ADDDEV_PID=""
PRE_EXISTING=""
for d in /var/lib/cni /run/containerd; do [ -e "$d" ] && PRE_EXISTING="$PRE_EXISTING $d"; done

# stop_pid PID: SIGTERM, then SIGKILL after 5 s; its status in $STOP_RC
stop_pid() {
	STOP_RC=""
	[ -n "$1" ] || return 0
	kill "$1" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$1" 2>/dev/null || true
	STOP_RC=0
	wait "$1" 2>/dev/null || STOP_RC=$?
}
# stop_nri: every pod (their containers with them), both plugins, containerd, then what a
# failure left: the runc containers of those pods, the bridge, CNI's cache, and the
# directories containerd and CNI made outside $WORK when they were not there before
stop_nri() {
	local id
	for id in "${PODS[@]}"; do
		[ -z "$id" ] || cri rmp -f "$id" >/dev/null 2>&1 || true
	done
	stop_pid "$ADDDEV_PID"
	stop_pid "$PLUGIN_PID"
	! declare -F stop_daemonset >/dev/null || stop_daemonset
	stop_daemons
	for id in $(runc --root /run/containerd/runc/k8s.io list -q 2>/dev/null); do
		! grep -qwF "$id" "$WORK/ids" 2>/dev/null ||
			runc --root /run/containerd/runc/k8s.io delete -f "$id" >/dev/null 2>&1 || true
	done
	ip link del "$BRIDGE" 2>/dev/null || true
	rm -f /var/lib/cni/results/"$NET"-* 2>/dev/null
	case " $PRE_EXISTING " in *" /var/lib/cni "*) ;; *)
		rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true ;;
	esac
	case " $PRE_EXISTING " in *" /run/containerd "*) ;; *)
		rmdir /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd/s \
			/run/containerd 2>/dev/null || true ;;
	esac
}
trap 'rc=$?; stop_nri; cleanup_work $rc' EXIT

CD=$WORK/cd
NRI_SOCK=$CD/state/nri/nri.sock
cri() { cri_at "$CD" "$@"; }

# ---- the nodes, the images, the network ---------------------------------------------------
spec_edit_node # $WORK/node (seed001-roce), $WORK/node.conf (memlock 4M), $INSIDE, $IMG_CONF
mkdir -p "$WORK/nodes"
mv "$WORK/node" "$WORK/nodes/seed"
make_node dgx-h100.json "$WORK/nodes/dgx"
use_node() { ln -sfn "nodes/$1" "$WORK/node"; }
use_node seed
write_conf "$WORK/node.conf" "[node]
memlock = 4M
[containers]
activation = annotation"
# a device plugin's node: uverbs2's numbers, outside the node's tree
mkdir -p "$WORK/devplugin"
mknod "$WORK/devplugin/uverbs2" c 231 194
make_rootfs "$WORK/rootfs"
make_image_rootfs "$WORK/rootfs-conf"

# containerd 2.3.4, config version 3: the CRI plugin with the runc runtime only, the local
# pause image, the native snapshotter, the bridge CNI; NRI on, its socket under the state
# directory, no pre-installed plugin, the default request timeout (2 s)
cd2_config "$CD" "$NRI_SOCK"
mkdir -p "$WORK/cni-ipam"
cat >"$CD/net.d/10-$NET.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$NET",
  "plugins": [{
    "type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false,
    "ipam": {
      "type": "host-local", "dataDir": "$WORK/cni-ipam",
      "ranges": [[{"subnet": "10.213.79.0/24", "gateway": "10.213.79.1"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
EOF

# containers inherit containerd's limits: a 64 KiB soft memlock, so that a raise shows
DEFAULT_MEMLOCK=64
CD_RUN=0
# start_cd: containerd (its log $CD/containerd-N.log, N counting the starts), ready for CRI
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
}
start_cd
check "containerd is 2.3.4" eval \
	'ctr -a "$CD/containerd.sock" version | grep -Eq "Version: +v?2\.3\.4"'
check "containerd's config names no handler and no binary of ours" \
	eval '! containerd --config "$CD/config.toml" config dump 2>/dev/null | grep -qi rdma'
cri_images "$CD" "$PAUSE" "$WORK/rootfs" >"$WORK/images.log" 2>&1 ||
	cant_run "the local images: $(cat "$WORK/images.log")"
"$CRI_PY" "$CRI_SRC/tests/cri/mkimage.py" "$WORK/rootfs-conf" localhost/orh-e2e-conf:1 \
	"$CD/img/conf.tar" >>"$WORK/images.log" 2>&1 &&
	ctr -a "$CD/containerd.sock" -n k8s.io images import --snapshotter native \
		"$CD/img/conf.tar" >>"$WORK/images.log" 2>&1 ||
	cant_run "the image with its own /etc/nccl.conf: $(cat "$WORK/images.log")"
# cri_ready: the runtime and the network ready (containerd 2.3 also reports its deprecation
# warnings, cgroup v1 among them, as a condition: not one a pod start waits on)
cri_ready() {
	local s
	s=$(cri status 2>/dev/null || true)
	grep -qx 'RuntimeReady true' <<<"$s" && grep -qx 'NetworkReady true' <<<"$s"
}
wait_for 20 cri_ready || cant_run "the CRI is not ready: $(cri status 2>&1 | tr '\n' ' ')"

# ---- the plugins ----------------------------------------------------------------------------
# synced NAME: how often containerd logged the plugin NAME (index-name) connected and
# synchronized, in every containerd log of this run
synced() {
	cat "$CD"/containerd-*.log | grep -c "plugin .*\"$1.\" connected and synchronized" || true
}
# synced_more NAME N: containerd has logged NAME synchronized more than N times
synced_more() { [ "$(synced "$1")" -gt "$2" ]; }
PLUGIN_RUN=0
# start_plugin: `oci-rdma-hook nri` on the socket (its stderr in $WORK/plugin-N.log), and
# wait until containerd has it synchronized
start_plugin() {
	local n
	n=$(synced 50-oci-rdma-hook)
	PLUGIN_RUN=$((PLUGIN_RUN + 1))
	PLUGIN_LOG=$WORK/plugin-$PLUGIN_RUN.log
	"$HOOK" nri --socket "$NRI_SOCK" --config "$WORK/node.conf" --sysroot "$WORK/node" \
		2>"$PLUGIN_LOG" &
	PLUGIN_PID=$!
	check "plugin start $PLUGIN_RUN: containerd has it connected and synchronized" \
		wait_for 20 synced_more 50-oci-rdma-hook "$n"
}
start_plugin

# ---- pods -----------------------------------------------------------------------------------
MARK_RAN=orh-nri-ran
MARK_END=orh-nri-end
# what the workload is (uid, capabilities), its IPv4 addresses, whether /etc/nccl.conf is
# there, and an open of each RDMA node and of the second plugin's device
SHOW='echo "uid $(id -u) caps $(sed -n "s/^CapEff:[[:space:]]*//p" /proc/self/status)"
ip -4 -o addr show 2>/dev/null | sed -n "s/^[0-9]*: \([^ ]*\) *inet \([0-9.]*\).*/addr \1 \2/p"
[ -e /etc/nccl.conf ] && echo "nccl.conf there"
for f in /dev/infiniband/* /dev/orh-extra; do [ -e "$f" ] && probe "$f"; done'
NODE_NET=2 POD_NET=0
CASE=""
# run_pod NAME NETWORK [POD-JQ] [CTR-JQ]: a pod (crictl's JSON, network NODE or POD) through
# the default runc runtime, with one container that prints its marker, $INSIDE and $SHOW,
# then sleeps; its log in $OUT, the ids in $POD and $CTR, the seconds RunPodSandbox to
# StartContainer took in $TOOK. The JQ edits are applied to the pod's and the container's
# config. A step that fails is a failed check, and the case's own checks fail on what is
# missing.
run_pod() {
	local name=$1 net=$2 d=$WORK/pods/$1 t0
	CASE=$name OUT="" POD="" CTR="" TOOK=""
	mkdir -p "$d/logs"
	cri_pod_json "$d/pod.json" "$name" "$net" "$d/logs" "${3:-.}"
	cri_ctr_json "$d/ctr.json" "$net" \
		"echo $MARK_RAN; $INSIDE; $SHOW; echo $MARK_END; exec sleep 600" "${4:-.}"
	t0=$(date +%s%N)
	cri_start_pod "$CD" "$d" "" || not_ok "$name: $CRI_ERR"
	TOOK=$((($(date +%s%N) - t0) / 1000000))
	POD=$CRI_POD CTR=$CRI_CTR
	[ -n "$POD" ] && PODS+=("$POD")
	echo "$POD $CTR" >>"$WORK/ids"
	wait_for 20 grep -q "$MARK_END" "$d/logs/work.log" || true
	OUT=$(cri logs "$CTR" 2>&1)
	check "$name: the container ran (marker line, then its output)" \
		bash -c 'head -1 <<<"$1" | grep -qx "$2" && grep -qx "$3" <<<"$1"' _ \
		"$OUT" "$MARK_RAN" "$MARK_END"
	check_ran "$name"
}
# end_pod: stop and remove the pod (its container with it)
end_pod() {
	[ -n "$POD" ] || return 0
	cri rmp -f "$POD" >"$WORK/rmp.err" 2>&1 || not_ok "$CASE: rmp -f: $(cat "$WORK/rmp.err")"
	PODS=("${PODS[@]/$POD/}")
}
jq_true() { jq -e "$@" >/dev/null; }
bundle_of() { echo "$CD/state/io.containerd.runtime.v2.task/k8s.io/$1"; }
# stored_spec ID: the spec containerd wrote for that container, as its metadata keeps it
stored_spec() { ctr -a "$CD/containerd.sock" -n k8s.io containers info "$1" | jq -S .Spec; }
# uverbs_of NODE DEV: the uverbs node of that device in a sample node's sysfs
uverbs_of() {
	grep -lx "$2" "$WORK/nodes/$1"/sys/class/infiniband_verbs/uverbs*/ibdev | xargs dirname |
		xargs basename
}
# ib_nodes: the /dev/infiniband entries the container opened ($SHOW's probe lines), sorted
ib_nodes() {
	sed -En 's#^/dev/infiniband/([^ ]*) (OK|E[A-Z]+)$#\1#p' <<<"$OUT" | sort | tr '\n' ' '
}
# seen KEY: the lines of $OUT starting with KEY (memlock, conf:NCCL_IB_HCA, ...)
seen() { grep "^$1" <<<"$OUT" | tr '\n' ' '; }
# plugin_said TEXT: the plugin's log line for container $CTR (its id in the line) holds TEXT
plugin_said() { grep -F "$CTR" "$PLUGIN_LOG" | grep -qF "$1"; }
# check_left_alone LABEL: $OUT shows a container as without oci-rdma-hook: no NCCL setting,
# no /etc/nccl.conf, no RDMA node, and exactly the memlock containerd gives
check_left_alone() {
	check "$1: no NCCL setting, no RDMA device ($(seen conf:NCCL_) $(ib_nodes))" \
		out_lacks -e 'NCCL_' -e infiniband
	check "$1: no /etc/nccl.conf" out_lacks -x 'nccl.conf there'
	check "$1: containerd's memlock $DEFAULT_MEMLOCK ($(seen memlock))" \
		grep -qx "memlock $DEFAULT_MEMLOCK" <<<"$OUT"
	check "$1: its bundle's config.json has no hook, no RDMA device, no memlock rlimit" \
		jq_true '(.hooks // {} | length) == 0
		and ([.process.rlimits[]? | select(.type == "RLIMIT_MEMLOCK")] | length) == 0
		and ([.linux.devices[]? | select(.path | startswith("/dev/infiniband"))] | length) == 0' \
		"$(bundle_of "$CTR")/config.json"
}
# check_served LABEL: the plan's uverbs1 allowed, the node's memlock, the plan's
# NCCL_IB_GID_INDEX in /etc/nccl.conf (the seed node)
check_plan_served() {
	check "$1: uverbs1 is allowed by the device cgroup (open: ENXIO, not EPERM)" \
		grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT"
	check "$1: memlock raised to the node's 4 MiB ($(seen memlock))" \
		grep -qx 'memlock 4096' <<<"$OUT"
	check "$1: /etc/nccl.conf has the plan's NCCL_IB_GID_INDEX" \
		grep -qx "conf:$(grep '^NCCL_IB_GID_INDEX=' <<<"$PLAN")" <<<"$OUT"
}
OPT_IN='.annotations["oci-rdma-hook/enable"] = "true"'
DEV_UVERBS2=".devices = [{container_path: \"/dev/infiniband/uverbs2\",
	host_path: \"$WORK/devplugin/uverbs2\", permissions: \"rwm\"}]"

# ---- activation = annotation, on the 9-NIC RoCE node -----------------------------------
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)
run_pod annotated $NODE_NET "$OPT_IN"
check_conf_has_plan "annotated: /etc/nccl.conf has every plan setting"
check "annotated: no plan variable in PID 1's environment ($(seen env:))" out_lacks '^env:'
check "annotated: memlock raised to the node's 4 MiB ($(seen memlock))" \
	grep -qx 'memlock 4096' <<<"$OUT"
want="rdma_cm uverbs1 uverbs2 uverbs3 uverbs4 uverbs5 uverbs6 uverbs7 uverbs8 "
check "annotated: the plan's device nodes, no other (saw: $(ib_nodes))" [ "$(ib_nodes)" = "$want" ]
want=$(stat -c '%t:%T' "$WORK/nodes/seed/dev/infiniband/uverbs1")
check "annotated: uverbs1 has the node's numbers ($want)" \
	grep -qx "/dev/infiniband/uverbs1 character special file $want" <<<"$OUT"
# the device cgroup allows them: no driver behind 231:* here, so an allowed open gives ENXIO
check "annotated: uverbs1 and uverbs8 are allowed by the device cgroup (open: ENXIO, not EPERM)" \
	eval 'grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT" &&
		grep -qx "/dev/infiniband/uverbs8 ENXIO" <<<"$OUT"'
# ExecSync: a process started later reads the same file; containerd builds it from the spec
# it keeps, which NRI adjusted: the same RLIMIT_MEMLOCK too
EXEC_RC=0
EXEC_OUT=$(cri exec "$CTR" /bin/sh -c "$INSIDE" 2>&1) || EXEC_RC=$?
check "ExecSync: runs (exit $EXEC_RC)" [ "$EXEC_RC" = 0 ]
OUT=$EXEC_OUT check_conf_has_plan "ExecSync: the process sees every plan setting in /etc/nccl.conf"
check "ExecSync: the process has the container's 4 MiB memlock ($(grep '^memlock' <<<"$EXEC_OUT"))" \
	grep -qx 'memlock 4096' <<<"$EXEC_OUT"
# the record of what was done, and `inspect`
INSPECT=$("$HOOK" inspect "$CTR" --json 2>&1) || true
check "annotated: inspect shows the container's record, alive, /etc/nccl.conf written" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["alive"] is True, r
assert r["nccl_conf"]["result"] in ("written", "merged"), r
' "$INSPECT"
# the node the plugin read, handed to the stage (bound to the token of its mark), the stage run
# by the plugin at StartContainer
check "annotated: no hook in the container's config.json (the plugin ran the stage)" \
	jq_true '[.hooks // {} | .[][]?] | length == 0' "$(bundle_of "$CTR")/config.json"
check "annotated: the nccl-conf stage decided from the node the plugin read (node.json), its record names the plugin's edit" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["node_read"] == "by the NRI plugin", r.get("node_read")
assert r["edited_by"] == "the NRI plugin\x27s adjustment, its stage run by the plugin at StartContainer", r.get("edited_by")
assert r["node_from"].endswith("/node.json"), r.get("node_from")
assert not [w for w in r["warnings"] if "handed over" in w], r["warnings"]
' "$INSPECT"
check "annotated: the plugin logged what it gave the container" plugin_said "9 device(s)"
# the spec containerd keeps is the one runc got (no shim between them), and it holds the
# plugin's adjustment; the sandbox is left as containerd made it
check "annotated: bundle config.json is the spec containerd keeps (NRI's adjustment in it)" \
	eval 'diff <(jq -S . "$(bundle_of "$CTR")/config.json") <(stored_spec "$CTR") >/dev/null &&
		jq_true "[.linux.devices[]? | select(.path == \"/dev/infiniband/uverbs1\")] | length == 1" \
			"$(bundle_of "$CTR")/config.json"'
check "annotated: the container's runtime is containerd's runc" \
	eval '[ "$(ctr -a "$CD/containerd.sock" -n k8s.io containers info "$CTR" |
		jq -r .Runtime.Name)" = io.containerd.runc.v2 ]'
check "sandbox: no hook, no rlimit, no RDMA device, no NCCL variable in its config.json" \
	jq_true '(.hooks // {} | length) == 0
		and ([.process.rlimits[]? | select(.type == "RLIMIT_MEMLOCK")] | length) == 0
		and ([.linux.devices[]? | select(.path | startswith("/dev/infiniband"))] | length) == 0
		and ([.process.env[]? | select(startswith("NCCL_"))] | length) == 0' \
	"$(bundle_of "$POD")/config.json"
end_pod

# the image's own /etc/nccl.conf: the nccl-conf stage merges the plan into it
run_pod image-conf $NODE_NET "$OPT_IN" '.image.image = "localhost/orh-e2e-conf:1"'
check_image_conf_kept image-conf
check "image-conf: memlock raised to the node's 4 MiB ($(seen memlock))" \
	grep -qx 'memlock 4096' <<<"$OUT"
end_pod

# the same image, its root read-only: runc has made it read-only by StartContainer, and the
# stage gives the merged file as a read-only bind mount in the container's mount namespace
run_pod image-conf-ro $NODE_NET "$OPT_IN" \
	'.image.image = "localhost/orh-e2e-conf:1" | .linux.security_context.readonly_rootfs = true'
check_image_conf_kept image-conf-ro
check "image-conf-ro: the spec's root is read-only" \
	jq_true '.root.readonly == true' "$(bundle_of "$CTR")/config.json"
check "image-conf-ro: the image's own file, in the root on the host, is left as it was" \
	eval '! grep -q "^NCCL_IB_GID_INDEX" "$(bundle_of "$CTR")/rootfs/etc/nccl.conf" &&
		grep -qx "NCCL_IB_HCA=image_hca" "$(bundle_of "$CTR")/rootfs/etc/nccl.conf"'
end_pod

# CRI devices, as the kubelet passes a device plugin's DeviceSpec
run_pod device-uverbs2 $NODE_NET "$OPT_IN" "$DEV_UVERBS2"
check "the node's uverbs2 is mlx5_2's" [ "$(uverbs_of seed mlx5_2)" = uverbs2 ]
check "device-uverbs2: only uverbs2 and rdma_cm (saw: $(ib_nodes))" \
	[ "$(ib_nodes)" = "rdma_cm uverbs2 " ]
check "device-uverbs2: uverbs2 is 231:194 (e7:c2), allowed (open: ENXIO)" \
	eval 'grep -qx "/dev/infiniband/uverbs2 character special file e7:c2" <<<"$OUT" &&
		grep -qx "/dev/infiniband/uverbs2 ENXIO" <<<"$OUT"'
check "device-uverbs2: the spec grants 231:194 and no other uverbs" \
	jq_true '[.linux.resources.devices[] | select(.allow and .major == 231 and .minor != 255)]
		| map("\(.minor)") | unique == ["194"]' "$(bundle_of "$CTR")/config.json"
check "device-uverbs2: NCCL_IB_HCA names mlx5_2 only ($(seen conf:NCCL_IB_HCA))" \
	grep -qx 'conf:NCCL_IB_HCA==mlx5_2:1' <<<"$OUT"
check "device-uverbs2: memlock 4 MiB ($(seen memlock))" grep -qx 'memlock 4096' <<<"$OUT"
end_pod

run_pod nothing $NODE_NET
check_left_alone nothing
check "nothing: the plugin logged why it gave nothing" plugin_said "nothing given: "
end_pod

# ---- the DGX-like node: GPUs named by the device plugin's env, and the pod network ------------
use_node dgx
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)
run_pod gpus-2-3 $NODE_NET "$OPT_IN" '.envs = [{key: "NVIDIA_VISIBLE_DEVICES", value: "2,3"}]'
# rule 9 on this node (tests/cli.sh): GPUs 2 and 3 share a PCIe switch with mlx5_2 and mlx5_3
check "gpus-2-3: /etc/nccl.conf has rule 9's NICs ($(seen conf:NCCL_IB_HCA))" \
	grep -qx "conf:NCCL_IB_HCA==mlx5_2:1,mlx5_3:1" <<<"$OUT"
want="rdma_cm $(uverbs_of dgx mlx5_2) $(uverbs_of dgx mlx5_3) "
check "gpus-2-3: only those NICs' nodes (saw: $(ib_nodes); want: $want)" [ "$(ib_nodes)" = "$want" ]
end_pod

run_pod nonroot-podnet $POD_NET "$OPT_IN" \
	'.linux.security_context.run_as_user = {value: 1000}
	| .linux.security_context.capabilities = {drop_capabilities: ["ALL"]}'
POD_IP=$(cri inspectp "$POD" | jq -r .status.network.ip)
check "nonroot-podnet: uid 1000, no capability" grep -qx 'uid 1000 caps 0000000000000000' <<<"$OUT"
check "nonroot-podnet: in the pod network: eth0 holds the pod's address $POD_IP" \
	grep -qx "addr eth0 $POD_IP" <<<"$OUT"
check "nonroot-podnet: memlock raised to 4 MiB ($(seen memlock))" grep -qx 'memlock 4096' <<<"$OUT"
check "nonroot-podnet: NCCL_SOCKET_IFNAME is the pod's eth0 (node: $(grep SOCKET <<<"$PLAN"))" \
	grep -qx 'conf:NCCL_SOCKET_IFNAME==eth0' <<<"$OUT"
check_conf_has_plan "nonroot-podnet: /etc/nccl.conf has the plan's other settings"
end_pod
use_node seed
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)

# ---- two plugins at once ----------------------------------------------------------------------
n=$(synced 60-orh-nri-adddev)
orh-nri-adddev -socket "$NRI_SOCK" -idx 60 -path /dev/orh-extra -major 240 -minor 7 \
	2>"$WORK/adddev.log" &
ADDDEV_PID=$!
check "the second plugin: containerd has it connected and synchronized" \
	wait_for 20 synced_more 60-orh-nri-adddev "$n"
run_pod two-plugins $NODE_NET "$OPT_IN"' | .annotations["orh-e2e/add-device"] = "true"'
check "two-plugins: the second plugin's /dev/orh-extra (240:7) is there and allowed (ENXIO)" \
	grep -qx '/dev/orh-extra ENXIO' <<<"$OUT"
check_plan_served two-plugins
check "two-plugins: the second plugin logged the device added" \
	grep -q '"work": added /dev/orh-extra' "$WORK/adddev.log"
end_pod
stop_pid "$ADDDEV_PID"
ADDDEV_PID=""

# ---- the plugin killed while containerd waits on it ---------------------------------------
# stopped, it answers nothing; once containerd's request waits unread on its socket (a
# Recv-Q above 0 in ss), SIGKILL: containerd sees the connection close and starts the pod
# without it
# pending PID: a unix socket of PID holds bytes it has not read
pending() {
	ss -xpn 2>/dev/null | awk -v p="pid=$1," 'index($0, p) && $3 > 0 { f = 1 } END { exit !f }'
}
kill -STOP "$PLUGIN_PID"
(
	wait_for 15 pending "$PLUGIN_PID" && echo pending >"$WORK/killed-while"
	kill -9 "$PLUGIN_PID"
) &
killer=$!
run_pod killed $NODE_NET "$OPT_IN"
wait "$killer" 2>/dev/null || true
wait "$PLUGIN_PID" 2>/dev/null || true
PLUGIN_PID=""
check "killed plugin: it was killed with containerd's request unread on its socket" \
	grep -qx pending "$WORK/killed-while"
check_left_alone "killed plugin"
check "killed plugin: the pod started within 10 s (${TOOK:-?} ms)" [ "${TOOK:-99999}" -lt 10000 ]
check "killed plugin: containerd logged its connection closed" \
	grep -q 'connection to plugin .*50-oci-rdma-hook.* closed' "$CD_LOG"
end_pod
start_plugin
run_pod after-restart $NODE_NET "$OPT_IN"
check_plan_served "the plugin started again"
end_pod

# ---- containerd restarted: the running plugin reconnects ---------------------------------------
n=$(synced 50-oci-rdma-hook)
stop_daemons
start_cd
check "containerd restarted: the running plugin reconnected and synchronized" \
	wait_for 20 synced_more 50-oci-rdma-hook "$n"
check "containerd restarted: the plugin that was running is the one connected" \
	kill -0 "$PLUGIN_PID"
wait_for 20 cri_ready || not_ok "the CRI is not ready after the restart"
run_pod after-cd-restart $NODE_NET "$OPT_IN"
check_plan_served "containerd restarted"
end_pod

# ---- SIGTERM ends the plugin with status 0 ----------------------------------------------------
stop_pid "$PLUGIN_PID"
PLUGIN_PID=""
check "SIGTERM: the plugin ends with status 0 (got $STOP_RC)" [ "$STOP_RC" = 0 ]

# ---- the DaemonSet's container ------------------------------------------------------------------
# deploy/kubernetes/overlays/nri/nri-plugin.yaml's container as a container of this
# containerd: the nri image's root (FLAVOUR=nri deploy/installer/build-image.sh, its context
# kept instead of built), its command, every capability dropped (this machine has no
# CAP_SYS_RESOURCE to keep), the host's network, and its host paths at their own paths:
# /opt/oci-rdma-hook (made here, removed after), /run/oci-rdma-hook, /var/run/nri (here
# containerd's NRI directory) and the ConfigMap's node config (this test's, with the sample
# node as its sysroot, mounted at the same path). The hooks it answers with run on the host
# from /opt/oci-rdma-hook.
daemonset_case() {
	local ctx=$WORK/nri-image script conf=$WORK/cm/oci-rdma-hook.conf d
	if [ -e /opt/oci-rdma-hook ]; then
		echo "# the DaemonSet's container: /opt/oci-rdma-hook exists here: not run"
		return 0
	fi
	if [ -z "${ORH_BUILDDIR:-}" ]; then
		echo "# the DaemonSet's container: no ORH_BUILDDIR to build the image from: not run"
		return 0
	fi
	if ! file -L "$ORH_BUILDDIR/src/oci-rdma-hook" | grep -q 'statically linked'; then
		echo "# the DaemonSet's container: the build's binary is not static (the image" \
			"needs it): not run"
		return 0
	fi
	printf '#!/bin/sh\nfor last; do :; done\ncp -a "$last" "%s"\n' "$ctx" >"$WORK/keep-context"
	chmod 755 "$WORK/keep-context"
	FLAVOUR=nri DOCKER=$WORK/keep-context \
		sh "$CRI_SRC/deploy/installer/build-image.sh" "$ORH_BUILDDIR" >"$WORK/image.log" 2>&1 ||
		{ not_ok "the nri image's root: $(cat "$WORK/image.log")"; return 0; }
	script=$(python3 -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
print(d["spec"]["template"]["spec"]["containers"][0]["command"][2])' \
		"$CRI_SRC/deploy/kubernetes/overlays/nri/nri-plugin.yaml")
	mkdir -p "$WORK/cm" /opt/oci-rdma-hook /run/oci-rdma-hook
	for d in /etc/oci-rdma-hook-nri /var/run/nri /opt/oci-rdma-hook /run/oci-rdma-hook \
		"$WORK/nodes"; do
		mkdir -p "$ctx/rootfs$d"
	done
	OPT_MADE=1
	printf '[node]\nmemlock = 4M\nsysroot = %s\n[containers]\nactivation = annotation\n' \
		"$WORK/nodes/seed" >"$conf"
	local n
	n=$(synced 50-oci-rdma-hook)
	# (ctr has no "ALL": each capability of its default set dropped)
	local c drop=()
	for c in CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP SETPCAP \
		NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE; do
		drop+=(--cap-drop "CAP_$c")
	done
	ctr -a "$CD/containerd.sock" run -d --rootfs --net-host "${drop[@]}" \
		--mount "type=bind,src=$CD/state/nri,dst=/var/run/nri,options=rbind:rw" \
		--mount "type=bind,src=/opt/oci-rdma-hook,dst=/opt/oci-rdma-hook,options=rbind:rw" \
		--mount "type=bind,src=/run/oci-rdma-hook,dst=/run/oci-rdma-hook,options=rbind:rw" \
		--mount "type=bind,src=$WORK/cm,dst=/etc/oci-rdma-hook-nri,options=rbind:ro" \
		--mount "type=bind,src=$WORK/nodes,dst=$WORK/nodes,options=rbind:ro" \
		"$ctx/rootfs" orh-nri-daemonset /bin/sh -c "$script" >"$WORK/ds-run.log" 2>&1 ||
		{
			not_ok "the DaemonSet's container: ctr run:" \
				"$(grep -v DEPRECATION "$WORK/ds-run.log" | tr '\n' ' ')"
			return 0
		}
	DS_RUNNING=1
	check "the DaemonSet's container: containerd has its plugin connected and synchronized" \
		wait_for 20 synced_more 50-oci-rdma-hook "$n"
	check "the DaemonSet's container: it copied the binary and the node config to the host" \
		eval 'cmp -s /opt/oci-rdma-hook/bin/oci-rdma-hook "$ctx/rootfs/oci-rdma-hook" &&
			cmp -s /opt/oci-rdma-hook/etc/oci-rdma-hook.conf "$conf"'
	run_pod daemonset $NODE_NET "$OPT_IN"
	check_plan_served "the DaemonSet's plugin"
	check "the DaemonSet's plugin: the hooks run the host's /opt/oci-rdma-hook binary" \
		jq_true '[.hooks.createRuntime[]?.path] == ["/opt/oci-rdma-hook/bin/oci-rdma-hook"]' \
		"$(bundle_of "$CTR")/config.json"
	end_pod
	ctr -a "$CD/containerd.sock" task kill orh-nri-daemonset >/dev/null 2>&1 || true
	local st=""
	for _ in $(seq 100); do
		st=$(ctr -a "$CD/containerd.sock" task ls 2>/dev/null |
			awk '$1 == "orh-nri-daemonset" { print $3 }')
		[ "$st" = STOPPED ] && break
		sleep 0.1
	done
	# (ctr task rm exits with the task's exit status)
	check "the DaemonSet's container: SIGTERM ends it with status 0 ($st)" eval \
		'[ "$st" = STOPPED ] && ctr -a "$CD/containerd.sock" task rm orh-nri-daemonset >/dev/null'
	stop_daemonset
}
# stop_daemonset: the DaemonSet's container and what it put on the host
OPT_MADE="" DS_RUNNING=""
stop_daemonset() {
	if [ -n "$DS_RUNNING" ]; then
		ctr -a "$CD/containerd.sock" task kill -s KILL orh-nri-daemonset >/dev/null 2>&1 || true
		ctr -a "$CD/containerd.sock" task rm -f orh-nri-daemonset >/dev/null 2>&1 || true
		ctr -a "$CD/containerd.sock" containers rm orh-nri-daemonset >/dev/null 2>&1 || true
		DS_RUNNING=""
	fi
	[ -z "$OPT_MADE" ] || rm -rf /opt/oci-rdma-hook
	OPT_MADE=""
}
daemonset_case

if [ "$FAILS" != 0 ]; then
	echo "# the plugin's logs:"
	tail -n 20 "$WORK"/plugin-*.log | sed 's/^/#   /'
	echo "# containerd's NRI lines:"
	grep -ih 'nri\|plugin "' "$CD"/containerd-*.log | tail -n 20 | sed 's/^/#   /'
fi
finish
