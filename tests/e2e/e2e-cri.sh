#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end through the CRI: containerd's CRI plugin driven as the kubelet drives it
# (tests/cri/cri.py: RunPodSandbox, CreateContainer, StartContainer, ExecSync, ...), with
# the runtime handler "rdma" that `oci-rdma-hook configure` writes into containerd's
# config, the pause image built here (tests/cri/pause.c) and the bridge CNI. One private
# containerd serves every case; each case is a pod through the handler, and checks first
# that its container ran, then what the workload sees from inside:
#   - activation = annotation: the pod annotation oci-rdma-hook/enable reaches the hook
#     (the plan's settings in /etc/nccl.conf, the uverbs nodes, memlock raised), and a
#     process started with ExecSync sees /etc/nccl.conf;
#   - the pod sandbox's config.json is the spec containerd wrote;
#   - CRI devices carrying uverbs2 (a device plugin's DeviceSpec): only mlx5_2's node,
#     grant and HCA;
#   - a pod that asks for nothing gets nothing;
#   - NVIDIA_VISIBLE_DEVICES=2,3 on the DGX-like node: the NICs near those GPUs (rule 9);
#   - uid 1000 with every capability dropped, in the pod network: memlock raised and
#     NCCL_SOCKET_IFNAME naming the pod's own eth0;
#   - the Kubernetes example node config (deploy/kubernetes/oci-rdma-hook.conf): a pod that
#     annotates itself but was allocated no device gets nothing, a pod given uverbs2 gets
#     mlx5_2 only.
# The shim reads the node ($WORK/node, a link switched between sample nodes) and its
# config ($WORK/node.conf, rewritten between cases) at every container start.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"
CRI_SRC=${ORH_SRCDIR:-$HERE/../..}
. "$CRI_SRC/tests/cri/lib.sh"
need_root_runc
command -v ctr >/dev/null 2>&1 || cant_run "ctr (containerd) not installed"
command -v jq >/dev/null 2>&1 || cant_run "jq not installed"
command -v ip >/dev/null 2>&1 || cant_run "iproute2 (ip) not installed"
for p in bridge host-local loopback; do
	[ -x "/usr/lib/cni/$p" ] || cant_run "/usr/lib/cni/$p missing (containernetworking-plugins)"
done
[ -x "${PAUSE:-}" ] || cant_run "PAUSE (the static tests/cri/pause.c) not built"
CRI_PY=$(cri_py) ||
	cant_run "no python3 with grpc and grpc_tools (python3-grpcio, python3-grpc-tools)"

setup_work
NET=orh-cri-$$
BRIDGE=orhcri$$
PODS=()
# what this test may create outside $WORK, and whether it was there before
PRE_EXISTING=""
for d in /var/lib/cni /run/containerd; do [ -e "$d" ] && PRE_EXISTING="$PRE_EXISTING $d"; done

# stop_cri: every pod through the CRI (their containers with them), then whatever a
# failure left: the runc containers of those pods, the bridge, CNI's cache, and the
# directories containerd and CNI made outside $WORK when they were not there before
stop_cri() {
	local id
	for id in "${PODS[@]}"; do
		[ -z "$id" ] || cri rmp -f "$id" >/dev/null 2>&1 || true
	done
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
trap 'rc=$?; stop_cri; cleanup_work $rc' EXIT

CD=$WORK/cd
cri() { cri_at "$CD" "$@"; }

# ---- the nodes, the images, the network ---------------------------------------------------
spec_edit_node # $WORK/node (seed001-roce), $WORK/node.conf (memlock 4M), $INSIDE
mkdir -p "$WORK/nodes"
mv "$WORK/node" "$WORK/nodes/seed"
make_node dgx-h100.json "$WORK/nodes/dgx"
use_node() { ln -sfn "nodes/$1" "$WORK/node"; }
use_node seed
ANNOTATION_CONF="[node]
memlock = 4M
[containers]
activation = annotation"
write_conf "$WORK/node.conf" "$ANNOTATION_CONF"
# a device plugin's node: uverbs2's numbers, outside the node's tree
mkdir -p "$WORK/devplugin"
mknod "$WORK/devplugin/uverbs2" c 231 194

make_rootfs "$WORK/rootfs"

# the pod network: a bridge of its own, addresses kept under $WORK, a default route, no
# masquerade (no iptables rule); containerd sets up each pod's lo with CNI's loopback itself
cri_config "$CD" \
	'# without CAP_SYS_RESOURCE runc cannot lower oom_score_adj to the sandbox'"'"'s -998' \
	'restrict_oom_score_adj = true' 'netns_mounts_under_state_dir = true'
mkdir -p "$WORK/cni-ipam"
cat >"$CD/net.d/10-$NET.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$NET",
  "plugins": [{
    "type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false,
    "ipam": {
      "type": "host-local", "dataDir": "$WORK/cni-ipam",
      "ranges": [[{"subnet": "10.213.77.0/24", "gateway": "10.213.77.1"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
EOF

# ---- containerd with its CRI plugin --------------------------------------------------------
install_shim
# the handler "rdma", as the node operator registers it
"$HOOK" --config "$WORK/node.conf" configure --engine containerd \
	--engine-config "$CD/config.toml" --handler rdma --shim "$SHIM" >"$WORK/configure.out" 2>&1 ||
	{ not_ok "configure --engine containerd: $(cat "$WORK/configure.out")"; finish || exit 1; }

# containers inherit containerd's limits: a 64 KiB soft memlock, so that a raise shows
DEFAULT_MEMLOCK=64
# the Kubernetes config's memlock (unlimited) as the shim sets it: lowered to its own hard
# limit where it lacks CAP_SYS_RESOURCE (capability 24)
K8S_MEMLOCK=unlimited
(((0x$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status) >> 24) & 1)) || K8S_MEMLOCK=$(ulimit -Hl)
(
	ulimit -S -l $DEFAULT_MEMLOCK
	export OCI_RDMA_HOOK_CONFIG=$WORK/node.conf OCI_RDMA_HOOK_SYSROOT=$WORK/node
	exec containerd --config "$CD/config.toml" >"$CD/containerd.log" 2>&1
) &
DAEMON_PIDS+=($!)
wait_for 30 ctr -a "$CD/containerd.sock" version ||
	cant_run "containerd did not start: $(tail -5 "$CD/containerd.log")"
cri_images "$CD" "$PAUSE" "$WORK/rootfs" >"$WORK/images.log" 2>&1 ||
	cant_run "the local images: $(cat "$WORK/images.log")"
wait_for 20 cri status ||
	cant_run "the CRI is not ready: $(cri status 2>&1 | tr '\n' ' ')"
check "the CRI sees the local pause image" eval 'cri img localhost/orh-pause:1 >/dev/null'

# ---- pods -----------------------------------------------------------------------------------
MARK_RAN=orh-cri-ran
MARK_END=orh-cri-end
# what the workload is (uid, capabilities), its IPv4 addresses, and an open of each RDMA node
SHOW='echo "uid $(id -u) caps $(sed -n "s/^CapEff:[[:space:]]*//p" /proc/self/status)"
ip -4 -o addr show 2>/dev/null | sed -n "s/^[0-9]*: \([^ ]*\) *inet \([0-9.]*\).*/addr \1 \2/p"
for f in /dev/infiniband/*; do [ -e "$f" ] && probe "$f"; done'
NODE_NET=2 POD_NET=0
CASE=""
# run_pod NAME NETWORK [POD-JQ] [CTR-JQ]: a pod (crictl's JSON, network NODE or POD) through
# the handler rdma, with one container that prints its marker, $INSIDE and $SHOW, then
# sleeps; its log in $OUT, the ids in $POD and $CTR. The JQ edits are applied to the pod's
# and the container's config. A step that fails is a failed check, and the case's own
# checks fail on what is missing.
run_pod() {
	local name=$1 net=$2 d=$WORK/pods/$1
	CASE=$name OUT="" POD="" CTR=""
	mkdir -p "$d/logs"
	cri_pod_json "$d/pod.json" "$name" "$net" "$d/logs" "${3:-.}"
	cri_ctr_json "$d/ctr.json" "$net" \
		"echo $MARK_RAN; $INSIDE; $SHOW; echo $MARK_END; exec sleep 600" "${4:-.}"
	cri_start_pod "$CD" "$d" rdma || not_ok "$name: $CRI_ERR"
	POD=$CRI_POD CTR=$CRI_CTR
	[ -n "$POD" ] && PODS+=("$POD")
	echo "$POD $CTR" >>"$WORK/ids"
	wait_for 20 grep -q "$MARK_END" "$d/logs/work.log" || true
	OUT=$(cri logs "$CTR" 2>&1)
	check "$name: the container ran (marker line, then its output)" \
		bash -c 'head -1 <<<"$1" | grep -qx "$2" && grep -qx "$3" <<<"$1"' _ \
		"$OUT" "$MARK_RAN" "$MARK_END"
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
# seen KEY: the line of $OUT starting with KEY (memlock, conf:NCCL_IB_HCA, ...)
seen() { grep "^$1" <<<"$OUT" | tr '\n' ' '; }
# check_left_alone LABEL: $OUT shows a container as without oci-rdma-hook: no NCCL setting,
# no RDMA node, and exactly the memlock containerd gives (a raise to any value fails it)
check_left_alone() {
	check "$1: no NCCL setting, no RDMA device ($(seen conf:NCCL_) $(ib_nodes))" \
		out_lacks -e 'NCCL_' -e infiniband
	check "$1: containerd's memlock $DEFAULT_MEMLOCK ($(seen memlock))" \
		grep -qx "memlock $DEFAULT_MEMLOCK" <<<"$OUT"
}
# check_mlx5_2_only LABEL: the pod given uverbs2 (231:194) through CRI devices has that node
# and rdma_cm, no other; the device cgroup allows uverbs2 and no other uverbs (its spec);
# NCCL_IB_HCA names mlx5_2 only
check_mlx5_2_only() {
	check "$1: only uverbs2 and rdma_cm (saw: $(ib_nodes))" [ "$(ib_nodes)" = "rdma_cm uverbs2 " ]
	check "$1: uverbs2 is 231:194 (e7:c2)" \
		grep -qx "/dev/infiniband/uverbs2 character special file e7:c2" <<<"$OUT"
	check "$1: the device cgroup allows uverbs2 (open: ENXIO)" \
		grep -qx "/dev/infiniband/uverbs2 ENXIO" <<<"$OUT"
	check "$1: the spec grants 231:194 and no other uverbs" \
		jq_true '[.linux.resources.devices[] | select(.allow and .major == 231)]
			| map("\(.minor):\(.access)") == ["194:rwm"]' "$(bundle_of "$CTR")/config.json"
	check "$1: NCCL_IB_HCA names mlx5_2 only ($(seen conf:NCCL_IB_HCA))" \
		grep -qx 'conf:NCCL_IB_HCA==mlx5_2:1' <<<"$OUT"
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
check "annotated: uverbs1 is allowed by the device cgroup (open: ENXIO, not EPERM)" \
	grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT"
# ExecSync: a process started later reads the same file, with the same limit
EXEC_RC=0
EXEC_OUT=$(cri exec "$CTR" /bin/sh -c "$INSIDE" 2>&1) || EXEC_RC=$?
check "ExecSync: runs (exit $EXEC_RC)" [ "$EXEC_RC" = 0 ]
OUT=$EXEC_OUT check_conf_has_plan "ExecSync: the process sees every plan setting in /etc/nccl.conf"
# containerd builds an exec's process from the spec it keeps, which the shim did not edit:
# the exec'd process has the limits of containerd, not the container's RLIMIT_MEMLOCK
grep -qx 'memlock 4096' <<<"$EXEC_OUT" ||
	echo "# note: ExecSync: the exec'd process has $(grep '^memlock' <<<"$EXEC_OUT") KiB," \
		"not the container's 4096 (containerd's exec spec has no RLIMIT_MEMLOCK)"

# the sandbox: offered to the shim with the pod's annotation, and left as containerd wrote it
SB_SPEC=$(stored_spec "$POD")
check "sandbox: its spec says container-type sandbox and carries the pod's annotation" \
	jq_true '.annotations["io.kubernetes.cri.container-type"] == "sandbox"
		and .annotations["oci-rdma-hook/enable"] == "true"' <<<"$SB_SPEC"
# same_spec FILE SPEC / other_spec FILE SPEC: both sides there and not empty, then the
# same (or not the same) JSON; two empty sides fail either way
both_there() { [ -s "$1" ] && [ -n "$2" ] && jq -e . "$1" >/dev/null && jq -e . <<<"$2" >/dev/null; }
same_spec() { both_there "$@" && diff <(jq -S . "$1") <(jq -S . <<<"$2"); }
other_spec() { both_there "$@" && ! diff -q <(jq -S . "$1") <(jq -S . <<<"$2") >/dev/null; }
check "sandbox: bundle config.json is the spec containerd wrote" \
	same_spec "$(bundle_of "$POD")/config.json" "$SB_SPEC"
check "sandbox: no hook, no rlimit, no device, no NCCL variable in its config.json" \
	jq_true '(.hooks // {} | length) == 0
		and ([.process.rlimits[]? | select(.type == "RLIMIT_MEMLOCK")] | length) == 0
		and ([.linux.devices[]? | select(.path | startswith("/dev/infiniband"))] | length) == 0
		and ([.process.env[]? | select(startswith("NCCL_"))] | length) == 0' \
	"$(bundle_of "$POD")/config.json"
# the same comparison sees the edit of the pod's container
check "container: its bundle config.json is the shim's edit of containerd's spec" \
	other_spec "$(bundle_of "$CTR")/config.json" "$(stored_spec "$CTR")"
end_pod

# CRI devices, as the kubelet passes a device plugin's DeviceSpec
run_pod device-uverbs2 $NODE_NET "$OPT_IN" "$DEV_UVERBS2"
check "the node's uverbs2 is mlx5_2's" [ "$(uverbs_of seed mlx5_2)" = uverbs2 ]
check_mlx5_2_only device-uverbs2
check "device-uverbs2: memlock 4 MiB ($(seen memlock))" grep -qx 'memlock 4096' <<<"$OUT"
end_pod

run_pod nothing $NODE_NET
check_left_alone nothing
end_pod

# ---- the DGX-like node: GPUs named by the device plugin's env, and the pod network ------------
use_node dgx
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)
run_pod gpus-2-3 $NODE_NET "$OPT_IN" '.envs = [{key: "NVIDIA_VISIBLE_DEVICES", value: "2,3"}]'
stored_spec "$CTR" >"$WORK/gpus-spec.json"
want=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env \
	--spec "$WORK/gpus-spec.json" | grep '^NCCL_IB_HCA=' || true)
# rule 9 on this node (tests/cli.sh): GPUs 2 and 3 share a PCIe switch with mlx5_2 and mlx5_3
check "gpus-2-3: env --spec on containerd's spec gives rule 9's NICs ($want)" \
	[ "$want" = "NCCL_IB_HCA==mlx5_2:1,mlx5_3:1" ]
check "gpus-2-3: /etc/nccl.conf has that NCCL_IB_HCA ($(seen conf:NCCL_IB_HCA))" \
	grep -qx "conf:${want:-none}" <<<"$OUT"
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
check "nonroot-podnet: NCCL_SOCKET_IFNAME is the pod's eth0 (the node's: $(grep SOCKET <<<"$PLAN"))" \
	grep -qx 'conf:NCCL_SOCKET_IFNAME==eth0' <<<"$OUT"
check_conf_has_plan "nonroot-podnet: /etc/nccl.conf has the plan's other settings"
# the shim read the pod's network namespace by its path: it wrote /etc/nccl.conf itself,
# and no nccl-conf stage ran
check "nonroot-podnet: the shim served the container alone (its record; no stage, no node.json)" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["stage"] == "runtime shim" and r["alive"] is True, r
assert r["plan"]["netns_default_if"] == "eth0" and r["nccl_conf"]["result"] == "written", r
' "$("$HOOK" inspect "$CTR" --json 2>&1)"
end_pod

# ---- the Kubernetes example node config: devices only through the allocation -------------------
use_node seed
cp "$CRI_SRC/deploy/kubernetes/oci-rdma-hook.conf" "$WORK/node.conf"
run_pod k8s-annotated-only $NODE_NET "$OPT_IN"
check_left_alone "k8s config, annotated, no device allocated"
end_pod
run_pod k8s-device $NODE_NET "" "$DEV_UVERBS2"
check_mlx5_2_only "k8s config, uverbs2 allocated"
check "k8s config, uverbs2 allocated: memlock raised to $K8S_MEMLOCK ($(seen memlock))" \
	grep -qx "memlock $K8S_MEMLOCK" <<<"$OUT"
end_pod

finish
