#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end through a real Kubernetes node: kube-apiserver, the scheduler, the
# controller-manager and a kubelet v1.34.4 on containerd 2.3.4, etcd 3.7.3 as the store
# (tests/k8s/lib.sh brings it up once, in a private mount namespace, and tears it down).
# The node's RDMA is the sample node seed001-gpu (tests/mknode.py), handed to the hook as
# its sysroot and config (OCI_RDMA_HOOK_SYSROOT / OCI_RDMA_HOOK_CONFIG in containerd's
# environment for the shim, --sysroot / --config for the NRI plugin), under
# activation = annotation and memlock = 4M. Every pod is made with kubectl, checked Ready
# first, then from inside with `kubectl exec`:
#   - the NRI way: `oci-rdma-hook nri` on the cluster's containerd NRI socket, pods with no
#     RuntimeClass: a pod annotated oci-rdma-hook/enable gets the uverbs nodes (allowed by
#     the device cgroup), PID 1's memlock raised (and the exec'd process's), the plan in
#     /etc/nccl.conf written by the stage the plugin runs at its StartContainer (no hook);
#     a pod that asks for nothing gets nothing;
#   - the handler way: the handler rdma that `oci-rdma-hook configure --engine containerd`
#     writes into this containerd's config, the RuntimeClass of deploy/kubernetes/base, the
#     node labelled by hand as its nodeSelector asks: an annotated pod of runtimeClassName
#     rdma is served the same, one that asks for nothing gets nothing;
#   - allocated HCAs (orh-rdmadev, tests/k8s/rdmadev: a device plugin of rdma/hca and a DRA
#     driver that prepares CDI devices in containerd's cdi_spec_dirs): through the NRI
#     plugin under request_scope = allocated and activation = devices, a pod of
#     rdma/hca: 1 and a pod of a ResourceClaim for one NIC get that HCA's uverbs node alone,
#     /etc/nccl.conf for that HCA alone and the 4 MiB memlock; one that asks with nothing
#     allocated gets nothing; a pod of a ResourceClaim for a GPU and two NICs on two PCIe
#     roots gets, from the claim's KEP-5304 metadata, the NIC on its GPU's root alone in
#     /etc/nccl.conf, and inspect names the claim; through the handler, annotated pods of
#     each are kept to their HCA the same way;
#   - the teardown: the pods removed through the CRI, no process of the cluster or of its
#     pods left, the kubelet's cgroup removed.
# ORH_K8S_UNSERVED=1: the lane with the hook's binary replaced, where it serves, by one that
# serves nothing (as the NRI plugin it never connects; as the runtime it is runc): every
# served case must then fail, and the unserved ones pass.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/../e2e/e2e-containerd-lib.sh"
K8S_SRC=${ORH_SRCDIR:-$HERE/../..}
. "$K8S_SRC/tests/k8s/lib.sh"
need_root_runc
k8s_need
"$HOOK" nri --help >/dev/null 2>&1 || cant_run "this oci-rdma-hook has no nri command"
T_START=$SECONDS

setup_work
PLUGIN_PID=""
trap 'rc=$?; k8s_stop "$PLUGIN_PID"; k8s_down; cleanup_work $rc' EXIT

# ---- the node, its config, the binary that serves -------------------------------------------
spec_edit_node # $INSIDE
# the node: seed001-gpu, seed001-roce's NICs with 8 GPUs, two dual-port cards' NICs and two
# GPUs under each of four PCIe roots (the plan of a container without GPUs is seed001-roce's)
rm -rf "$WORK/node"
make_node seed001-gpu.json "$WORK/node"
# (nccl_record = no: the plan of a container is then what the handler's shim writes too)
write_conf "$WORK/node.conf" "[node]
memlock = 4M
[containers]
activation = annotation
nccl_record = no"
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)
# PID 1's memlock (the container's own process: an exec'd process gets the limits of the spec
# containerd keeps, which the shim of the handler way does not edit), whether the file is
# there, and an open of each RDMA node (allowed by the device cgroup: ENXIO, no driver here)
SHOW='sed -n "s/^Max locked memory *\([0-9a-z]*\).*/pid1-memlock \1/p" /proc/1/limits
[ -e /etc/nccl.conf ] && echo "nccl.conf there"
for f in /dev/infiniband/*; do [ -e "$f" ] && probe "$f"; done; true'
make_rootfs "$WORK/rootfs"
mkdir -p "$WORK/bin"
SERVE=$HOOK
if [ "${ORH_K8S_UNSERVED:-}" = 1 ]; then
	SERVE=$WORK/bin/unserving
	cat >"$SERVE" <<-'EOF'
		#!/bin/sh
		# serves nothing: as the NRI plugin it waits without connecting, as the runtime it is runc
		[ "$1" = nri ] && exec sleep 86400
		exec runc "$@"
	EOF
	chmod 755 "$SERVE"
	echo "# ORH_K8S_UNSERVED=1: $SERVE serves in place of $HOOK"
fi
# the shim of the handler way: the binary under the name it answers to as a runtime
ln -s "$SERVE" "$WORK/bin/oci-rdma-runtime"

# ---- the cluster ---------------------------------------------------------------------------
k8s_up "$WORK/node" "$WORK/node.conf"
echo "# cluster up in ${K8S_UP_S} s: $(tr '\n' ' ' <"$K8S/versions")"
check "the kubelet is v1.34.4" eval \
	'[ "$(kc get node localhost -o jsonpath={.status.nodeInfo.kubeletVersion})" = v1.34.4 ]'
# (a build from the module proxy has no git tree: its version says +unknown)
check "the node's runtime is containerd 2.3.4" eval \
	'kc get node localhost -o jsonpath={.status.nodeInfo.containerRuntimeVersion} |
		grep -Eqx "containerd://v?2\.3\.4(\+unknown)?"'

# the pods: MARK, pod, inside, logged, seen, served, left_alone, gone and end of
# tests/k8s/lib.sh
ASK='.metadata.annotations["oci-rdma-hook/enable"] = "true"'

# ---- the NRI way -----------------------------------------------------------------------------
# synced: containerd has logged our plugin connected and synchronized
synced() { grep -q 'plugin .*"50-oci-rdma-hook." connected and synchronized' "$K8S/containerd.log"; }
"$SERVE" nri --socket "$NRI_SOCK" --config "$WORK/node.conf" --sysroot "$WORK/node" \
	2>"$WORK/plugin.log" &
PLUGIN_PID=$!
check "nri: containerd has the plugin connected and synchronized" wait_for 20 synced

pod nri-asks "$ASK"
inside nri-asks
served nri-asks
check "nri-asks: the exec'd process has the 4 MiB memlock too ($(seen memlock))" \
	grep -qx 'memlock 4096' <<<"$OUT"
# the container's id as the kubelet reports it, in the plugin's line about what it gave
CID=$(kc get pod nri-asks -o jsonpath='{.status.containerStatuses[0].containerID}')
CID=${CID#containerd://}
check "nri-asks: the plugin logged the devices it gave container ${CID:0:12}" eval \
	'[ -n "$CID" ] && grep -F "$CID" "$WORK/plugin.log" | grep -qF "device(s)"'
# the plugin on the host runs the stage itself at StartContainer: the kubelet's cgroup of the
# container names it, and no hook is in its spec
check "nri-asks: the plugin ran the container's nccl-conf stage at its StartContainer" eval \
	'[ -n "$CID" ] && grep -F "container $CID: nccl-conf: /etc/nccl.conf: " "$WORK/plugin.log" |
		grep -qF "settings added" && grep -F "$CID" "$WORK/plugin.log" | grep -qF " 0 hook(s)"'
end nri-asks

pod nri-nothing
inside nri-nothing
left_alone nri-nothing
end nri-nothing

# ---- allocated HCAs: a device plugin and a DRA driver ---------------------------------------
# the plugin again, under request_scope = allocated and activation = devices: a container is
# served only with the HCAs the kubelet allocated to it. The allocators are orh-rdmadev
# (tests/k8s/rdmadev, the project's own: k8s-rdma-shared-dev-plugin reads the host's /sys,
# which has no RDMA here), limited to the node's usable HCAs (the plan's NCCL_IB_HCA):
#   - a device plugin of rdma/hca (deviceplugin v1beta1), Allocate giving the HCA's uverbs
#     node of the sample node (made with mknod);
#   - a DRA driver, rdma.orh.test (kubeletplugin, resource.k8s.io/v1): a ResourceSlice of
#     the HCAs and the GPUs with resource.kubernetes.io/pciBusID and pcieRoot, each claim
#     prepared as a CDI spec in containerd's cdi_spec_dirs (the uverbs or nvidia node, and a
#     read-only mount of each request's KEP-5304 device metadata file).
k8s_stop "$PLUGIN_PID"
write_conf "$WORK/alloc.conf" "[node]
memlock = 4M
[containers]
activation = devices
request_scope = allocated
nccl_record = no"
nsynced() {
	[ "$(grep -c 'plugin .*"50-oci-rdma-hook." connected and synchronized' "$K8S/containerd.log")" -ge "$1" ]
}
"$SERVE" nri --socket "$NRI_SOCK" --config "$WORK/alloc.conf" --sysroot "$WORK/node" \
	2>"$WORK/plugin-alloc.log" &
PLUGIN_PID=$!
check "nri (request_scope = allocated): the plugin connected and synchronized again" \
	wait_for 20 nsynced 2
USABLE=$(sed -n 's/^NCCL_IB_HCA==//p' <<<"$PLAN" | sed 's/:[0-9]*//g')
export ORH_RDMADEV_HCAS=$USABLE
k8s_start devplugin "$K8S_BIN/orh-rdmadev" deviceplugin "$WORK/node" "$K8S/kubelet"
k8s_start dradriver "$K8S_BIN/orh-rdmadev" dra "$WORK/node" "$K8S/kubelet" "$CD/cdi" \
	"$K8S/admin.kubeconfig"
unset ORH_RDMADEV_HCAS
NUSABLE=$(tr ',' '\n' <<<"$USABLE" | grep -c .)
hcas_allocatable() {
	[ "$(kc get node localhost -o jsonpath='{.status.allocatable.rdma/hca}')" = "$NUSABLE" ]
}
check "device plugin: the node offers its $NUSABLE usable HCAs as rdma/hca" \
	wait_for 30 hcas_allocatable
slice_published() {
	kc get resourceslices -o json | jq -e --argjson n "$NUSABLE" '[.items[] |
		select(.spec.driver == "rdma.orh.test" and .spec.nodeName == "localhost") |
		.spec.devices[] | select(.attributes["resource.kubernetes.io/pciBusID"].string and
			.attributes["resource.kubernetes.io/pcieRoot"].string)] |
		([.[] | select(.attributes.hca)] | length == $n) and
		([.[] | select(.attributes.gpu)] | length == 8)'
}
check "DRA: the driver published a ResourceSlice of the $NUSABLE HCAs and the 8 GPUs, with pciBusID and pcieRoot" \
	wait_for 30 slice_published
# uverbs_of HCA: its uverbs node's name on the sample node
uverbs_of() {
	grep -lx "$1" "$WORK"/node/sys/class/infiniband_verbs/uverbs*/ibdev 2>/dev/null |
		sed -n 's#.*/\(uverbs[0-9]*\)/ibdev$#\1#p'
}
# only_hca NAME HCA CONF: what a container allocated HCA alone shows: that HCA's uverbs node
# and no other uverbs, umad or issm node, allowed by the device cgroup; /etc/nccl.conf's
# NCCL_IB_HCA that HCA alone, and every setting of the plan (under the node config CONF) of
# a container that holds that node alone; PID 1's memlock the node's 4 MiB
only_hca() {
	local u want
	u=$(uverbs_of "$2")
	want=$(stat -c '%t:%T' "$WORK/node/dev/infiniband/$u" 2>/dev/null)
	check "$1: its only uverbs, umad or issm node is $2's /dev/infiniband/$u ($want) ($(seen /dev/infiniband))" eval \
		'[ -n "$u" ] && [ "$(grep -Ec "^/dev/infiniband/(uverbs|umad|issm).* character special file" <<<"$OUT")" = 1 ] &&
			grep -qx "/dev/infiniband/$u character special file $want" <<<"$OUT"'
	check "$1: $u is allowed by the device cgroup (open: ENXIO)" \
		grep -qx "/dev/infiniband/$u ENXIO" <<<"$OUT"
	check "$1: /etc/nccl.conf's NCCL_IB_HCA names $2 alone ($(seen conf:NCCL_IB_HCA))" \
		grep -qx "conf:NCCL_IB_HCA==$2:1" <<<"$OUT"
	# the plan of a container that asks and holds this uverbs node alone (env --spec)
	jq -n --arg u "$u" --argjson ma "$((0x${want%:*}))" --argjson mi "$((0x${want#*:}))" \
		'{ociVersion: "1.0.2", process: {env: []}, annotations: {"oci-rdma-hook/enable": "true"},
			linux: {devices: [{path: ("/dev/infiniband/" + $u), type: "c", major: $ma,
				minor: $mi}]}}' >"$WORK/spec-$1.json"
	PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$3" env --spec "$WORK/spec-$1.json") \
		conf_has_plan "$1: /etc/nccl.conf has every setting of the plan for $2 alone"
	check "$1: PID 1's memlock is the node's 4 MiB ($(seen pid1-memlock))" \
		grep -qx 'pid1-memlock 4194304' <<<"$OUT"
}

ONE_HCA='.spec.containers[0].resources.limits["rdma/hca"] = "1"'
pod dp-one "$ONE_HCA"
inside dp-one
DP_HCA=$(sed -n 's/.*allocated \([^:]*\): .*/\1/p' "$K8S/devplugin.log" | tail -1)
check "dp-one: the device plugin allocated one of the usable HCAs (${DP_HCA:-none})" eval \
	'[ "$(grep -c "allocated " "$K8S/devplugin.log")" = 1 ] && tr , "\n" <<<"$USABLE" | grep -qx "$DP_HCA"'
only_hca dp-one "$DP_HCA" "$WORK/alloc.conf"
end dp-one

# asked, but allocated nothing: left out under request_scope = allocated
pod alloc-asks-none "$ASK"
inside alloc-asks-none
left_alone alloc-asks-none

# DRA: a DeviceClass of the driver's devices; dra_pod NAME N [JQ]: a ResourceClaimTemplate
# NAME for the NIC of the N-th usable HCA, chosen by its PCI address (the standard
# attribute), and a pod NAME of that template (JQ edits it further), checked to hold the
# claim allocated that NIC and to see the claim's KEP-5304 metadata file; DRA_HCA that HCA
kc apply -f - >"$WORK/dra-apply.out" 2>&1 <<-EOF || not_ok "DeviceClass: $(cat "$WORK/dra-apply.out")"
	apiVersion: resource.k8s.io/v1
	kind: DeviceClass
	metadata: {name: orh-rdma-nic}
	spec:
	  selectors:
	  - cel: {expression: 'device.driver == "rdma.orh.test" && "hca" in device.attributes["rdma.orh.test"]'}
	---
	apiVersion: resource.k8s.io/v1
	kind: DeviceClass
	metadata: {name: orh-gpu}
	spec:
	  selectors:
	  - cel: {expression: 'device.driver == "rdma.orh.test" && "gpu" in device.attributes["rdma.orh.test"]'}
EOF
dra_pod() {
	local dra_pod_name=$1 dra_pci dra_md
	DRA_HCA=$(tr , '\n' <<<"$USABLE" | sed -n "$2p")
	dra_pci=$(basename "$(readlink -f "$WORK/node/sys/class/infiniband/$DRA_HCA/device")")
	kc apply -f - >"$WORK/dra-apply.out" 2>&1 <<-EOF || not_ok "$1: ResourceClaimTemplate: $(cat "$WORK/dra-apply.out")"
		apiVersion: resource.k8s.io/v1
		kind: ResourceClaimTemplate
		metadata: {name: $1, namespace: default}
		spec:
		  spec:
		    devices:
		      requests:
		      - name: nic
		        exactly:
		          deviceClassName: orh-rdma-nic
		          count: 1
		          selectors:
		          - cel: {expression: 'device.attributes["resource.kubernetes.io"].pciBusID == "$dra_pci"'}
	EOF
	pod "$1" ".spec.resourceClaims = [{name: \"rdma\", resourceClaimTemplateName: \"$1\"}] |
		.spec.containers[0].resources.claims = [{name: \"rdma\"}] | ${3:-.}"
	inside "$1"
	check "$1: the scheduler allocated its claim ${DRA_HCA/_/-} (PCI $dra_pci)" eval \
		'kc get resourceclaims -o json | jq -e --arg p "$dra_pod_name" --arg d "${DRA_HCA/_/-}" "[.items[] |
			select(.metadata.ownerReferences[0].name == \$p) |
			.status.allocation.devices.results[] | select(.driver == \"rdma.orh.test\")] |
			length == 1 and .[0].device == \$d" >/dev/null'
	dra_md=/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/rdma/nic/rdma.orh.test-metadata.json
	check "$1: the KEP-5304 metadata file is mounted, naming $dra_pci" eval \
		'kc exec "$dra_pod_name" -c work -- cat "$dra_md" 2>/dev/null | jq -e --arg p "$dra_pci" \
			".kind == \"DeviceMetadata\" and .requests[0].devices[0].attributes[\"resource.kubernetes.io/pciBusID\"].string == \$p" >/dev/null'
}
dra_pod dra-one 4
only_hca dra-one "$DRA_HCA" "$WORK/alloc.conf"
end dra-one
end alloc-asks-none

# A claim of one GPU and two NICs on two PCIe roots (gpu_pod NAME NEAR FAR [JQ]: a
# ResourceClaimTemplate NAME of a request gpu for the first GPU under NEAR's root and a
# request nic for the HCAs NEAR and FAR, each chosen by its PCI address; a pod NAME of it):
# the container holds both NICs' uverbs nodes, and the claims' KEP-5304 metadata, read by
# the hook, gets it NEAR alone in /etc/nccl.conf; inspect says which claim it came from
root_of() { readlink -f "$1" | sed -n 's#.*/sys/devices/\(pci[^/]*\)/.*#\1#p'; }
pci_of() { basename "$(readlink -f "$WORK/node/sys/class/infiniband/$1/device")"; }
gpu_pod() {
	local gpu_pod_name=$1 near=$2 far=$3 g np fp cid md
	np=$(pci_of "$near")
	fp=$(pci_of "$far")
	for g in "$WORK"/node/proc/driver/nvidia/gpus/*; do
		g=$(basename "$g")
		[ "$(root_of "$WORK/node/sys/bus/pci/devices/$g")" = "$(root_of "$WORK/node/sys/bus/pci/devices/$np")" ] && break
	done
	check "$1: GPU $g is under $near's PCIe root, $far under another" eval \
		'[ "$(root_of "$WORK/node/sys/bus/pci/devices/$g")" = "$(root_of "$WORK/node/sys/bus/pci/devices/$np")" ] &&
			[ "$(root_of "$WORK/node/sys/bus/pci/devices/$fp")" != "$(root_of "$WORK/node/sys/bus/pci/devices/$np")" ]'
	kc apply -f - >"$WORK/dra-apply.out" 2>&1 <<-EOF || not_ok "$1: ResourceClaimTemplate: $(cat "$WORK/dra-apply.out")"
		apiVersion: resource.k8s.io/v1
		kind: ResourceClaimTemplate
		metadata: {name: $1, namespace: default}
		spec:
		  spec:
		    devices:
		      requests:
		      - name: gpu
		        exactly:
		          deviceClassName: orh-gpu
		          selectors:
		          - cel: {expression: 'device.attributes["resource.kubernetes.io"].pciBusID == "$g"'}
		      - name: nic
		        exactly:
		          deviceClassName: orh-rdma-nic
		          count: 2
		          selectors:
		          - cel: {expression: 'device.attributes["resource.kubernetes.io"].pciBusID in ["$np", "$fp"]'}
	EOF
	pod "$1" ".spec.resourceClaims = [{name: \"rdma\", resourceClaimTemplateName: \"$1\"}] |
		.spec.containers[0].resources.claims = [{name: \"rdma\"}] | ${4:-.}"
	inside "$1"
	check "$1: the claim's NICs are both there, $near's and $far's uverbs nodes ($(seen /dev/infiniband/uverbs))" eval \
		'grep -q "^/dev/infiniband/$(uverbs_of "$near") character" <<<"$OUT" &&
			grep -q "^/dev/infiniband/$(uverbs_of "$far") character" <<<"$OUT"'
	md=/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/rdma
	check "$1: the metadata of its GPU request names $g on its PCIe root" eval \
		'kc exec "$gpu_pod_name" -c work -- cat "$md/gpu/rdma.orh.test-metadata.json" 2>/dev/null |
			jq -se --arg g "$g" ".[0].apiVersion == \"metadata.resource.k8s.io/v1beta1\" and
				.[0].requests[0].devices[0].attributes[\"resource.kubernetes.io/pciBusID\"].string == \$g" >/dev/null'
	check "$1: /etc/nccl.conf's NCCL_IB_HCA names $near alone, the NIC on its GPU's PCIe root ($(seen conf:NCCL_IB_HCA))" \
		grep -qx "conf:NCCL_IB_HCA==$near:1" <<<"$OUT"
	cid=$(kc get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')
	cid=${cid#containerd://}
	check "$1: inspect says $near:1 came from the claim rdma, request nic" eval \
		'[ -n "$cid" ] && "$HOOK" inspect "$cid" 2>/dev/null |
			grep -qx "hca $near:1: claim rdma (of a template), request nic, driver rdma.orh.test, device ${near/_/-}"'
}
gpu_pod gpu-pair mlx5_1 mlx5_3
end gpu-pair

k8s_stop "$PLUGIN_PID"
PLUGIN_PID=""

# ---- the handler way -------------------------------------------------------------------------
# the handler written into this containerd's config, which is then started again: the
# kubelet reconnects, the pods of the RuntimeClass rdma go through the shim
k8s_stop_containerd
check "configure --engine containerd registers the handler rdma" eval \
	'"$HOOK" --config "$WORK/node.conf" configure --engine containerd \
		--engine-config "$CD/config.toml" --handler rdma --shim "$WORK/bin/oci-rdma-runtime" \
		>"$WORK/configure.out" 2>&1 || { cat "$WORK/configure.out"; false; }'
mv "$K8S/containerd.log" "$K8S/containerd-1.log"
k8s_start_containerd || not_ok "containerd started again: $(tail -5 "$K8S/containerd.log")"
check "containerd's CRI lists the handler rdma" eval \
	'k8s_crictl info 2>/dev/null |
		jq -e ".config.containerd.runtimes.rdma" >/dev/null'
kc wait --for=condition=Ready node/localhost --timeout=60s >/dev/null 2>&1 || true
check "the RuntimeClass of deploy/kubernetes/base applies" eval \
	'kc apply -f "$K8S_SRC/deploy/kubernetes/base/runtimeclass.yaml" >/dev/null'
check "the node labelled by hand for the RuntimeClass's nodeSelector" eval \
	'kc label node localhost feature.node.kubernetes.io/oci-rdma-hook-runtime=rdma >/dev/null'

RC_RDMA='.spec.runtimeClassName = "rdma"'
pod handler-asks "$RC_RDMA | $ASK"
inside handler-asks
served handler-asks
check "handler-asks: the kubelet ran it through the handler rdma" eval \
	'k8s_crictl inspectp "$(k8s_crictl pods -q --name handler-asks)" |
		jq -e "(.info.runtimeHandler // .status.runtimeHandler) == \"rdma\"" >/dev/null'
end handler-asks

pod handler-nothing "$RC_RDMA"
inside handler-nothing
left_alone handler-nothing
end handler-nothing

# allocated HCAs through the handler, under containerd's node config (activation =
# annotation, request_scope = node): an annotated pod that holds an HCA, from the device
# plugin or from a DRA claim, is kept to that HCA (rule 8)
pod handler-dp "$RC_RDMA | $ASK | $ONE_HCA"
inside handler-dp
DP_HCA=$(sed -n 's/.*allocated \([^:]*\): .*/\1/p' "$K8S/devplugin.log" | tail -1)
check "handler-dp: the device plugin allocated it one more usable HCA (${DP_HCA:-none})" eval \
	'[ "$(grep -c "allocated " "$K8S/devplugin.log")" = 2 ] && tr , "\n" <<<"$USABLE" | grep -qx "$DP_HCA"'
only_hca handler-dp "$DP_HCA" "$WORK/node.conf"
end handler-dp
dra_pod handler-dra 5 "$RC_RDMA | $ASK"
only_hca handler-dra "$DRA_HCA" "$WORK/node.conf"
end handler-dra
gpu_pod handler-gpu-pair mlx5_4 mlx5_7 "$RC_RDMA | $ASK"
end handler-gpu-pair

# the teardown: every process of the cluster and of its pods ended, the cgroup removed
k8s_stop "$PLUGIN_PID"
PLUGIN_PID=""
k8s_down
check "teardown: no process of the cluster or of its pods left, its cgroup removed" k8s_gone
check "teardown: the pods were removed through the CRI, none had to be killed ($K8S_SWEPT killed)" \
	[ "$K8S_SWEPT" = 0 ]
echo "# the lane took $((SECONDS - T_START)) s (the cluster's bring-up ${K8S_UP_S} s)"
finish
