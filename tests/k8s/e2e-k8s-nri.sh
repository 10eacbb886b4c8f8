#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: the NRI plugin DaemonSet (deploy/kubernetes/overlays/nri) and the Helm chart's
# mode=nri on a real Kubernetes node (the cluster of tests/k8s/lib.sh: kubelet v1.34.4 on
# containerd 2.3.4, brought up once), pods with no RuntimeClass. The image is
# `FLAVOUR=nri deploy/installer/build-image.sh`'s (the installer's root and a static busybox;
# its Dockerfile built into an image archive by lib.sh's k8s_image_builder, in place of
# docker), imported with `ctr -n k8s.io images import` under the name the DaemonSet names.
# The node is the sample node seed001-roce (tests/mknode.py); the node config, the
# ConfigMap's, names it as the sysroot, with activation = annotation and memlock = 4M.
#
# Nothing reaches the host's files or engines: the cluster's containerd has its NRI socket
# at /var/run/nri/nri.sock of its private mount namespace (lib.sh's K8S_NRI_SOCK; lib.sh
# puts a tmpfs over /var/run/nri there), the DaemonSet's hostPath; in that namespace
# /opt is an overlay whose upper layer is under $WORK (the plugin's copies go to
# /opt/oci-rdma-hook) and a directory under $WORK is bound over /run/oci-rdma-hook; every
# mount there is shared, as a node's are, for the HostToContainer mount of /var/run/netns.
# The host's own files under those paths are checked unchanged at the end.
# What a node of this machine lacks is given to the DaemonSet by a patch of the test's
# overlay (each said in the output), the shipped files untouched: the sample node mounted
# at its own path (the ConfigMap's sysroot, read by the plugin in its container); where the
# host has no /dev/infiniband, the sample node's as that volume's host path; where the
# machine's bounding set has no CAP_SYS_RESOURCE (runc cannot give a capability it lacks),
# the capability not added (the plugin then gives no more than its own hard memlock: the
# served checks show the node's 4 MiB given).
# Every pod is made with kubectl and checked Ready first, then from inside with
# `kubectl exec`:
#   - `kubectl apply -k` of a copy of overlays/nri, its ConfigMap replaced by an overlay
#     written here: the rollout completes, containerd logs the plugin connected and
#     synchronized, the plugin's copies are in the namespace's /opt/oci-rdma-hook; an
#     annotated pod with no RuntimeClass gets the uverbs nodes (allowed by the device
#     cgroup), memlock 4 MiB and /etc/nccl.conf, its hooks run the copied binary and keep
#     its directory in the namespace's /run/oci-rdma-hook; a pod that asks for nothing gets
#     nothing;
#   - the DaemonSet deleted: containerd drops the plugin; an annotated pod started after
#     is not served, the pod started before is still served, exec'd into and deleted;
#   - `helm install --set mode=nri` of deploy/helm/oci-rdma-hook (the same node config and
#     patches, by a post-renderer): the same rollout and pods; `helm uninstall`: a pod
#     started after is not served.
# ORH_K8S_UNSERVED=1: the DaemonSet's container copies the files and then waits without
# connecting (a patch of its command): every served case must then fail, the unserved pass.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/../e2e/e2e-containerd-lib.sh"
K8S_SRC=${ORH_SRCDIR:-$HERE/../..}
. "$K8S_SRC/tests/k8s/lib.sh"
need_root_runc
k8s_need
[ -n "${ORH_BUILDDIR:-}" ] || cant_run "ORH_BUILDDIR not set"
file_is_static "$HOOK" || cant_run "the nri image needs the static binary (-Dstatic=true)"
file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' ||
	cant_run "the nri image needs a static /bin/busybox (busybox-static)"
[ -d /var/run/nri ] || cant_run "no /var/run/nri for the namespace's tmpfs (lib.sh) to cover"
HELM=$K8S_BIN/helm
T_START=$SECONDS

setup_work
RUN_MADE=""
trap 'rc=$?; k8s_down; [ -z "$RUN_MADE" ] || rmdir /run/oci-rdma-hook 2>/dev/null; cleanup_work $rc' EXIT

DS=oci-rdma-hook-nri
SEL=app.kubernetes.io/name=$DS
NS=(-n kube-system)
OPT=/opt/oci-rdma-hook

# ---- the node, its config --------------------------------------------------------------------
k8s_sample_node # $WORK/node, $WORK/node.conf, $PLAN, $SHOW, $WORK/rootfs

# ---- the image: FLAVOUR=nri build-image.sh, its Dockerfile built here ---------------------------
IMAGE=$(sed -n 's/^ *image: *//p' "$K8S_SRC/deploy/kubernetes/overlays/nri/nri-plugin.yaml" | head -1)
case $IMAGE in */*) REF=$IMAGE ;; *) REF=docker.io/library/$IMAGE ;; esac
k8s_image_builder "$WORK/bin/image-build"
FLAVOUR=nri ORH_IMAGE_TAR=$WORK/nri.tar ORH_MKIMAGE_DIR=$K8S_SRC/tests/cri \
	DOCKER=$WORK/bin/image-build \
	"$K8S_SRC/deploy/installer/build-image.sh" "$ORH_BUILDDIR" "$REF" >"$WORK/build.out" 2>&1 ||
	cant_run "FLAVOUR=nri deploy/installer/build-image.sh: $(cat "$WORK/build.out")"
LAYER=$(tar -xOf "$WORK/nri.tar" manifest.json | jq -r '.[0].Layers[0]')
tar -xOf "$WORK/nri.tar" "$LAYER" | tar -tv >"$WORK/layer.list" 2>/dev/null || true
image_has() {
	local f
	for f in sh cp mv mkdir; do
		grep -Eq "(^|[ /])bin/$f -> busybox$" "$WORK/layer.list" || return 1
	done
	grep -Eq "(^|[ /])oci-rdma-hook -> " "$WORK/layer.list"
}
check "the image ($IMAGE) holds a busybox /bin/sh, cp, mv, mkdir and the /oci-rdma-hook link" \
	image_has

# ---- the host's files, and the namespace's scratch copies of them ---------------------------
HOST_PATHS=(/opt/oci-rdma-hook /var/run/nri /dev/infiniband /etc/oci-rdma-hook-nri)
snap "${HOST_PATHS[@]}" >"$WORK/host.before"
# the host's /run/oci-rdma-hook is the hook's (other runs write it): the namespace binds a
# scratch directory over it, where it exists (made empty where not, and removed after)
if [ ! -d /run/oci-rdma-hook ]; then
	mkdir -m 755 /run/oci-rdma-hook
	RUN_MADE=1
fi
S=$WORK/scratch
# ns_mounts: /opt an overlay, a scratch directory over /run/oci-rdma-hook, then every mount
# of the namespace shared (peer groups of the namespace's own), as a node's are: containerd
# refuses a HostToContainer mount (/var/run/netns) of a private mount (lib.sh's
# K8S_NS_SETUP, before containerd starts)
ns_mounts() {
	mkdir -p "$S/opt.up" "$S/opt.work" "$S/run"
	k8s_ns sh -c 'set -e
		mount -t overlay orh-opt -o "lowerdir=/opt,upperdir=$1/opt.up,workdir=$1/opt.work" /opt
		mount --bind "$1/run" /run/oci-rdma-hook
		mount --make-rshared /' _ "$S" >"$WORK/ns-mounts.log" 2>&1
}
K8S_NS_SETUP=ns_mounts K8S_NRI_SOCK=/var/run/nri/nri.sock

# ---- the cluster ---------------------------------------------------------------------------
k8s_up "" ""
echo "# cluster up in ${K8S_UP_S} s: $(tr '\n' ' ' <"$K8S/versions")"
check "the node's runtime is containerd 2.3.4, its NRI socket /var/run/nri/nri.sock in the namespace" eval \
	'kc get node localhost -o jsonpath={.status.nodeInfo.containerRuntimeVersion} |
		grep -Eqx "containerd://v?2\.3\.4(\+unknown)?" && k8s_ns test -S /var/run/nri/nri.sock'
ctr -a "$CD/containerd.sock" -n k8s.io images import --snapshotter native "$WORK/nri.tar" \
	>"$WORK/import.log" 2>&1 || cant_run "importing the nri image: $(cat "$WORK/import.log")"
check "the node labelled as node-feature-discovery would for its RDMA modules" eval \
	'kc label node localhost feature.node.kubernetes.io/rdma.available=true >/dev/null'

# ---- the test's patches of the DaemonSet (kustomize's, and helm's post-renderer) ------------
KZ=$WORK/kz
mkdir -p "$KZ/test" "$KZ/overlays" "$KZ/post"
IB_PATCH=""
if [ ! -d /dev/infiniband ]; then
	IB_PATCH="        - name: infiniband
          hostPath: {path: $WORK/node/dev/infiniband, type: Directory}"
	echo "# patch: no /dev/infiniband here: the volume infiniband is the sample node's"
fi
cat >"$KZ/sample-node.yaml" <<-EOF
	apiVersion: apps/v1
	kind: DaemonSet
	metadata: {name: $DS}
	spec:
	  template:
	    spec:
	      containers:
	        - name: nri-plugin
	          volumeMounts:
	            - {name: orh-sample-node, mountPath: $WORK/node, readOnly: true}
	      volumes:
	        - name: orh-sample-node
	          hostPath: {path: $WORK/node, type: Directory}
	$IB_PATCH
EOF
echo "# patch: the sample node (the ConfigMap's sysroot) mounted at $WORK/node"
OPS='[]'
if [ $(((0x$(awk '/^CapBnd:/ { print $2 }' /proc/self/status) >> 24) & 1)) = 0 ]; then
	OPS=$(jq -c '. + [{op: "remove", path: "/spec/template/spec/containers/0/securityContext/capabilities/add"}]' <<<"$OPS")
	echo "# patch: no CAP_SYS_RESOURCE in this machine's bounding set: the capability not added"
fi
if [ "${ORH_K8S_UNSERVED:-}" = 1 ]; then
	# the container's script up to its exec of the plugin, then a wait that connects nowhere
	UNSERVE=$(python3 -c 'import sys, yaml
s = yaml.safe_load(open(sys.argv[1]))["spec"]["template"]["spec"]["containers"][0]["command"][2]
i = s.index("exec \"$d/bin/oci-rdma-hook\" nri")
print(s[:i] + "# serves nothing: it waits without connecting\ntrap \"exit 0\" TERM\n/bin/busybox sleep 2147483647 &\nwait")' \
		"$K8S_SRC/deploy/kubernetes/overlays/nri/nri-plugin.yaml")
	OPS=$(jq -c --arg s "$UNSERVE" '. + [{op: "replace", path: "/spec/template/spec/containers/0/command/2", value: $s}]' <<<"$OPS")
	echo "# ORH_K8S_UNSERVED=1: the DaemonSet's container copies its files, then waits without connecting"
fi
echo "$OPS" >"$KZ/ops.json"
# patches_of DIR: the kustomization lines of the patches, their files copied into DIR
patches_of() {
	cp "$KZ/sample-node.yaml" "$KZ/ops.json" "$1/"
	echo "patches:"
	echo "  - path: sample-node.yaml"
	[ "$OPS" = '[]' ] || printf '  - target: {kind: DaemonSet, name: %s}\n    path: ops.json\n' "$DS"
}

# ---- checks of the plugin and of the pods -------------------------------------------------------
SYNC='plugin .*"50-oci-rdma-hook." connected and synchronized'
nsynced() { [ "$(grep -c "$SYNC" "$K8S/containerd.log")" -ge "$1" ]; }
ds_pods() { kc get pods "${NS[@]}" -l "$SEL" -o json 2>/dev/null; }
no_ds_pod() { [ "$(ds_pods | jq '.items | length')" = 0 ]; }
# rolled_out LABEL N: the rollout complete, the plugin's pod Ready, containerd's N-th
# "connected and synchronized" of the plugin logged, its copies in the namespace's
# /opt/oci-rdma-hook (the scratch's upper layer), none on the host's
rolled_out() {
	local rc=0 p
	kc rollout status ds/$DS "${NS[@]}" --timeout=90s >"$WORK/rollout-$1.out" 2>&1 || rc=$?
	check "$1: kubectl rollout status: the rollout completes (rc $rc: $(tail -1 "$WORK/rollout-$1.out"))" \
		[ "$rc" = 0 ]
	p=$(ds_pods | jq -r '.items[0].metadata.name // empty')
	check "$1: the plugin's pod ${p:-(none)} is Ready" eval \
		'[ -n "$p" ] && kc wait "${NS[@]}" --for=condition=Ready "pod/$p" --timeout=30s >/dev/null'
	if [ "$rc" != 0 ]; then
		kc get pod "${NS[@]}" "$p" -o jsonpath='{.status.containerStatuses[0].state}' 2>&1 |
			head -c 600 | sed 's/^/# its state: /'
		echo
		kc describe pod "${NS[@]}" "$p" 2>&1 | tail -8 | sed 's/^/# /'
	fi
	check "$1: containerd logged the plugin connected and synchronized ($2 times so far)" \
		wait_for 20 nsynced "$2"
	check "$1: the plugin's copies of the binary and the ConfigMap's node config are in the namespace's $OPT" \
		eval 'k8s_ns cmp -s "$HOOK" "$OPT/bin/oci-rdma-hook" &&
			k8s_ns cmp -s "$WORK/node.conf" "$OPT/etc/oci-rdma-hook.conf" &&
			cmp -s "$HOOK" "$S/opt.up/oci-rdma-hook/bin/oci-rdma-hook" && [ ! -e "$OPT" ]'
}
ASK='.metadata.annotations["oci-rdma-hook/enable"] = "true"'
CIDS=()
# no_class NAME: the pod names no RuntimeClass and its sandbox has the default handler
no_class() {
	[ "$(kc get pod "$1" -o jsonpath='{.spec.runtimeClassName}')" = "" ] &&
		k8s_crictl inspectp "$(k8s_crictl pods -q --name "$1")" |
		jq -e '(.info.runtimeHandler // .status.runtimeHandler // "") | . == "" or . == "runc"' >/dev/null
}
# asks NAME: an annotated pod with no RuntimeClass, served, its hooks the copied binary
asks() {
	local cid
	pod "$1" "$ASK"
	inside "$1"
	served "$1"
	check "$1: it names no RuntimeClass, its sandbox the default handler" no_class "$1"
	cid=$(kc get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')
	cid=${cid#containerd://}
	CIDS+=("$cid")
	check "$1: its container's hooks run the plugin's copy, $OPT/bin/oci-rdma-hook" eval \
		'[ -n "$cid" ] && k8s_crictl inspect "$cid" | jq -e --arg p "$OPT/bin/oci-rdma-hook" \
			"[.info.runtimeSpec.hooks.createRuntime[]?.path] == [\$p]" >/dev/null'
	check "$1: the hook's directory of its container is in the namespace's /run/oci-rdma-hook (the scratch)" \
		eval '[ -n "$cid" ] && [ -d "$S/run/$cid" ]'
}
# asks_nothing NAME: a pod that asks for nothing, left alone, deleted
asks_nothing() {
	pod "$1"
	inside "$1"
	left_alone "$1"
	check "$1: it names no RuntimeClass, its sandbox the default handler" no_class "$1"
	end "$1"
}
# unserved NAME: an annotated pod started with no plugin: left alone, deleted
unserved() {
	pod "$1" "$ASK"
	inside "$1"
	left_alone "$1"
	end "$1"
}
# dropped LABEL N: the plugin's pod gone, and containerd's log has the plugin's N-th exit
DROP='connection to plugin .*50-oci-rdma-hook.* closed'
ndropped() { [ "$(grep -Eic "$DROP" "$K8S/containerd.log")" -ge "$1" ]; }
dropped() {
	check "$1: the plugin's pod is gone" wait_for 60 no_ds_pod
	check "$1: containerd dropped the plugin ($(grep -Ei "$DROP" "$K8S/containerd.log" | tail -1 | head -c 200))" \
		wait_for 20 ndropped "$2"
}

# ---- the kustomize overlay ---------------------------------------------------------------------
cp -r "$K8S_SRC/deploy/kubernetes/base" "$KZ/base"
cp -r "$K8S_SRC/deploy/kubernetes/overlays/nri" "$KZ/overlays/nri"
cp "$WORK/node.conf" "$KZ/test/oci-rdma-hook.conf"
{
	cat <<-EOF
		apiVersion: kustomize.config.k8s.io/v1beta1
		kind: Kustomization
		namespace: kube-system
		resources:
		  - ../overlays/nri
		configMapGenerator:
		  - name: oci-rdma-hook-node-config
		    behavior: replace
		    files:
		      - oci-rdma-hook.conf
	EOF
	patches_of "$KZ/test"
} >"$KZ/test/kustomization.yaml"
check "kustomize: kubectl apply -k of overlays/nri with the node config replaced" eval \
	'kc apply -k "$KZ/test" >"$WORK/apply-k.out" 2>&1 || { cat "$WORK/apply-k.out"; false; }'
check "kustomize: no installer and no RuntimeClass were sent" eval \
	'! kc get ds "${NS[@]}" oci-rdma-hook-installer >/dev/null 2>&1 && ! kc get runtimeclass rdma >/dev/null 2>&1'
rolled_out kustomize 1
asks n-asks
asks_nothing n-nothing

# the DaemonSet deleted: containerd drops the plugin; the pods started after are not
# offered to it, n-asks keeps what it was given and is deleted
check "delete: kubectl delete the DaemonSet" \
	eval 'kc delete ds "${NS[@]}" $DS --wait=false >/dev/null'
dropped delete 1
unserved n-after
inside n-asks
served n-asks
end n-asks
kc delete -k "$KZ/test" --ignore-not-found >/dev/null 2>&1 || true
check "kustomize: the rest deleted (the ConfigMap)" wait_for 30 eval \
	'[ "$(kc get configmap "${NS[@]}" -o name | grep -c oci-rdma-hook-node-config)" = 0 ]'

# ---- helm, mode=nri ---------------------------------------------------------------------------
export HOME=$WORK/home HELM_CACHE_HOME=$WORK/home/cache HELM_CONFIG_HOME=$WORK/home/config \
	HELM_DATA_HOME=$WORK/home/data
HARGS=(--kubeconfig "$K8S/admin.kubeconfig" "${NS[@]}")
if [ -x "$HELM" ]; then
	{
		printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n'
		printf 'resources:\n  - chart.yaml\n'
		patches_of "$KZ/post"
	} >"$KZ/post/kustomization.yaml"
	cat >"$WORK/bin/post-render" <<-EOF
		#!/bin/sh
		# the chart's objects with the test's patches (kubectl kustomize)
		cat >"$KZ/post/chart.yaml" && exec "$K8S_BIN/kubectl" kustomize "$KZ/post"
	EOF
	chmod 755 "$WORK/bin/post-render"
	check "helm: helm install --set mode=nri of deploy/helm/oci-rdma-hook, the node config set" eval \
		'"$HELM" install orh "$K8S_SRC/deploy/helm/oci-rdma-hook" "${HARGS[@]}" --set mode=nri \
			--post-renderer "$WORK/bin/post-render" --set-file nodeConfig="$WORK/node.conf" \
			>"$WORK/helm.out" 2>&1 || { cat "$WORK/helm.out"; false; }'
	rolled_out helm 2
	asks h-asks
	end h-asks
	asks_nothing h-nothing
	check "helm: helm uninstall" eval '"$HELM" uninstall orh "${HARGS[@]}" >/dev/null'
	dropped helm-uninstall 2
	unserved h-after
else
	ok "helm: # SKIP $HELM missing (tests/setup-debian.sh builds it)"
fi

# ---- the teardown, the host's files ---------------------------------------------------------
k8s_down
check "teardown: no process of the cluster or of its pods left, its cgroup removed" k8s_gone
check "teardown: the pods were removed through the CRI, none had to be killed ($K8S_SWEPT killed)" \
	[ "$K8S_SWEPT" = 0 ]
snap "${HOST_PATHS[@]}" >"$WORK/host.after"
check "the host's own files under ${HOST_PATHS[*]} are unchanged" \
	diff "$WORK/host.before" "$WORK/host.after"
diff "$WORK/host.before" "$WORK/host.after" | grep '^[<>]' | head -10 | sed 's/^/# host: /' || true
# none_on_host: no entry of the host's /run/oci-rdma-hook names a served container
none_on_host() {
	local c run
	run=$(ls -a /run/oci-rdma-hook /run/oci-rdma-hook/.sysfs 2>/dev/null)
	for c in "${CIDS[@]}"; do
		[ -n "$c" ] && ! grep -qF "${c:0:12}" <<<"$run" || return 1
	done
}
check "the host's /run/oci-rdma-hook names none of the served containers (${#CIDS[@]})" \
	none_on_host
echo "# the lane took $((SECONDS - T_START)) s (the cluster's bring-up ${K8S_UP_S} s)"
finish
