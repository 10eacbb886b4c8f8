#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: the installer DaemonSet and the Helm chart on a real Kubernetes node (the
# cluster of tests/k8s/lib.sh: kubelet v1.34.4 on containerd 2.3.4, brought up once). The
# installer image is deploy/installer/build-image.sh's (its Dockerfile built into an image
# archive by a builder of a few lines here, in place of docker: FROM scratch, the static
# binary), imported with `ctr -n k8s.io images import` under the name the DaemonSet names.
# The node is the sample node seed001-roce (tests/mknode.py); the node config, the
# ConfigMap's, names it as the sysroot, with activation = annotation and memlock = 4M
# (containerd's environment names no config or sysroot: the shim reads the installed one).
#
# Nothing reaches the host's files or engines: in the cluster's private mount namespace
# (lib.sh) overlays whose upper layers are under $WORK cover /etc and /usr (the binary, the
# shim link, the node config, the hooks.d files, the feature file of
# node-feature-discovery), /var/lib is a tmpfs (the install manifest), the directory of the
# cluster's containerd config is bound over /etc/containerd and its state directory over
# /run/containerd: the DaemonSet's hostPath / is that namespace's, where the installer
# finds containerd where its packages put it (config and socket), and signals it (hostPID);
# containerd is started again each time it exits, as its service manager would. A loop of
# a few lines plays node-feature-discovery's local source: the node's labels follow the
# feature file. The host's own files under those paths are checked unchanged at the end.
# Every pod is made with kubectl and checked Ready first, then from inside with
# `kubectl exec`:
#   - the kustomize base (a copy of deploy/kubernetes/base, its node config replaced by an
#     overlay written here), `kubectl apply -k`: the rollout completes, the installer pod is
#     Ready only once containerd's CRI reports the handler rdma; an annotated pod of the
#     RuntimeClass rdma gets the uverbs nodes, memlock and /etc/nccl.conf, one that asks
#     for nothing gets nothing;
#   - a rolling update to a second tag of the image: the old pod's undo keeps the handler
#     for the pod started before, which runs through it, and the new pod is Ready with the
#     handler in the CRI throughout; the pod started before is still served (exec), one
#     started after is served;
#   - the DaemonSet deleted while that pod runs: the undo keeps the handler for it, the
#     label goes; the pod is exec'd into, still served, and deleted; the runtime shim's
#     delete of its containers then finishes the undo (install --uninstall --after-pid the
#     pod's containerd shim): the handler out of the CRI, containerd's config back byte for
#     byte, with no one running anything on the node;
#   - `helm install` of deploy/helm/oci-rdma-hook (handler mode, the same node config) rolls
#     out the same and serves the same pods; `helm uninstall`, no pod running through the
#     handler, reverts the node the same.
# ORH_K8S_UNSERVED=1: the handler's shim (the installer's --shim, by the overlay and a helm
# post-renderer) is one that serves nothing (it is runc): every served case must then fail,
# and the unserved ones pass.
. "$(dirname "$0")/../e2e/lib.sh"
. "$(dirname "$0")/../e2e/e2e-containerd-lib.sh"
K8S_SRC=${ORH_SRCDIR:-$HERE/../..}
. "$K8S_SRC/tests/k8s/lib.sh"
need_root_runc
k8s_need
[ -n "${ORH_BUILDDIR:-}" ] || cant_run "ORH_BUILDDIR not set"
file_is_static "$HOOK" || cant_run "the installer image needs the static binary (-Dstatic=true)"
[ -d /run/containerd ] || cant_run "no /run/containerd to bind the cluster's containerd's over"
HELM=$K8S_BIN/helm
T_START=$SECONDS

setup_work
trap 'rc=$?; k8s_down; cleanup_work $rc' EXIT

define() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$ORH_BUILDDIR/orh-config.h"; }
BINDIR=$(define ORH_BINDIR)
CONF=$(define ORH_DEFAULT_CONFIG)
FEATURE=/etc/kubernetes/node-feature-discovery/features.d/oci-rdma-hook
SEL=app.kubernetes.io/name=oci-rdma-hook-installer
NS=(-n kube-system)

# ---- the node, its config, the shim ---------------------------------------------------------
k8s_sample_node # $WORK/node, $WORK/node.conf, $PLAN, $SHOW, $WORK/rootfs
SHIM=$BINDIR/oci-rdma-runtime
if [ "${ORH_K8S_UNSERVED:-}" = 1 ]; then
	SHIM=$WORK/bin/oci-rdma-runtime
	printf '#!/bin/sh\n# serves nothing: it is runc\nexec runc "$@"\n' >"$SHIM"
	chmod 755 "$SHIM"
	echo "# ORH_K8S_UNSERVED=1: the handler's shim is $SHIM, which serves nothing"
fi

# ---- the image: build-image.sh, its Dockerfile built here --------------------------------------
IMAGE=$(sed -n 's/^ *image: *//p' "$K8S_SRC/deploy/kubernetes/base/installer.yaml" | head -1)
case $IMAGE in */*) REF=$IMAGE ;; *) REF=docker.io/library/$IMAGE ;; esac
REF2=$REF-orh2
k8s_image_builder "$WORK/bin/image-build"
ORH_IMAGE_TAR=$WORK/installer.tar ORH_MKIMAGE_DIR=$K8S_SRC/tests/cri DOCKER=$WORK/bin/image-build \
	"$K8S_SRC/deploy/installer/build-image.sh" "$ORH_BUILDDIR" "$REF" >"$WORK/build.out" 2>&1 ||
	cant_run "deploy/installer/build-image.sh: $(cat "$WORK/build.out")"
ENTRY=$(tar -xOf "$WORK/installer.tar" "$(tar -xOf "$WORK/installer.tar" manifest.json |
	jq -r '.[0].Config')" | jq -c .config.Entrypoint)
check "the image: its entrypoint is install --root /host ($ENTRY)" \
	[ "$ENTRY" = "[\"$BINDIR/oci-rdma-hook\",\"install\",\"--root\",\"/host\"]" ]

# ---- the host's files, and the namespace's scratch copies of them ---------------------------
# where the installer writes (the build's paths, the engine's, node-feature-discovery's, its
# manifest's): under /etc and /usr, which the namespace covers with overlays, or /var/lib
HOOKS_DIR=$(define ORH_CONTAINERS_HOOKS_DIR)
OWN_HOOKS=$(define ORH_OWN_HOOKS_DIR)
for p in "$BINDIR" "$CONF" "$HOOKS_DIR" "$OWN_HOOKS"; do
	case $p in /usr/* | /etc/*) ;; *) cant_run "$p is outside /usr and /etc, which the lane covers" ;; esac
done
HOST_PATHS=(/etc/containerd /etc/kubernetes /etc/containers/oci /etc/oci-rdma-hook
	/usr/share/containers/oci "$BINDIR" "${CONF%/*}" "$HOOKS_DIR" "$OWN_HOOKS"
	/var/lib/oci-rdma-hook)
snap "${HOST_PATHS[@]}" >"$WORK/host.before"
S=$WORK/scratch
# ns_mounts: the overlays on /etc and /usr, containerd's config directory on
# /etc/containerd and its state directory (the sockets) on /run/containerd; then every
# mount of the namespace shared (peer groups of the namespace's own: the host's mounts are
# no peers of them), as a node's / is, for the DaemonSet's HostToContainer mount of /,
# which containerd refuses on a private mount (lib.sh's K8S_NS_SETUP, before containerd
# starts on /etc/containerd/config.toml)
ns_mounts() {
	mkdir -p "$S/etc.up" "$S/etc.work" "$S/usr.up" "$S/usr.work" "$S/cd-etc"
	mv "$CD/config.toml" "$S/cd-etc/config.toml"
	k8s_ns sh -c 'set -e
		mount -t overlay orh-etc -o "lowerdir=/etc,upperdir=$1/etc.up,workdir=$1/etc.work" /etc
		mount -t overlay orh-usr -o "lowerdir=/usr,upperdir=$1/usr.up,workdir=$1/usr.work" /usr
		mkdir -p /etc/containerd
		mount --bind "$1/cd-etc" /etc/containerd
		mount --bind "$2" /run/containerd
		mount --make-rshared /' _ "$S" "$CD" >"$WORK/ns-mounts.log" 2>&1
}
K8S_NS_SETUP=ns_mounts K8S_CD_CONFIG=/etc/containerd/config.toml K8S_CD_RESPAWN=1

# ---- the cluster ---------------------------------------------------------------------------
k8s_up "" ""
echo "# cluster up in ${K8S_UP_S} s: $(tr '\n' ' ' <"$K8S/versions")"
check "the node's runtime is containerd 2.3.4, on /etc/containerd/config.toml in the namespace" eval \
	'kc get node localhost -o jsonpath={.status.nodeInfo.containerRuntimeVersion} |
		grep -Eqx "containerd://v?2\.3\.4(\+unknown)?" &&
		k8s_ns cmp -s /etc/containerd/config.toml "$S/cd-etc/config.toml"'
snap "$S/cd-etc" | sed "s#$S/cd-etc#.#" >"$WORK/cd-etc.orig"
cd_back() { diff "$WORK/cd-etc.orig" <(snap "$S/cd-etc" | sed "s#$S/cd-etc#.#"); }
ctr -a "$CD/containerd.sock" -n k8s.io images import --snapshotter native "$WORK/installer.tar" \
	>"$WORK/import.log" 2>&1 && ctr -a "$CD/containerd.sock" -n k8s.io images tag "$REF" "$REF2" \
	>>"$WORK/import.log" 2>&1 || cant_run "importing the installer image: $(cat "$WORK/import.log")"
# exits: how many times containerd exited (the installer's SIGHUP)
FINISH_LOG=/var/lib/oci-rdma-hook/finish.log
exits() { grep -c '^orh-k8s: containerd exited' "$K8S/containerd.log" || true; }
exited_since() { [ "$(exits)" -gt "$1" ]; }
handler_in_cri() {
	k8s_crictl info 2>/dev/null | jq -e --arg s "$SHIM" \
		'.config.containerd.runtimes.rdma.options.BinaryName == $s' >/dev/null
}
no_handler_in_cri() {
	k8s_crictl info 2>/dev/null | jq -e '.config.containerd.runtimes | has("runc") and
		(has("rdma") | not)' >/dev/null
}

# node-feature-discovery's local source: the node's labels are the feature file's lines
relabel() {
	local l
	for l in $1; do kc label node localhost "${l%%=*}-" >/dev/null || return 1; done
	for l in $2; do kc label --overwrite node localhost "$l" >/dev/null || return 1; done
}
nfd_local() {
	local have="" want l
	while :; do
		want=$(k8s_ns cat "$FEATURE" 2>/dev/null | grep -E '^[^#=]+=' |
			sed -E 's#^([^/=]+=)#feature.node.kubernetes.io/\1#' | LC_ALL=C sort || true)
		if [ "$want" != "$have" ] && relabel "$have" "$want"; then
			echo "labels: ${want:-none}"
			have=$want
		fi
		sleep 0.5
	done
}
k8s_start nfd nfd_local
runtime_label() { kc get node localhost -o jsonpath='{.metadata.labels.feature\.node\.kubernetes\.io/oci-rdma-hook-runtime}'; }
labelled() { [ "$(runtime_label)" = rdma ]; }
unlabelled() { [ -z "$(runtime_label)" ]; }
check "the node labelled as node-feature-discovery would for its RDMA modules" eval \
	'kc label node localhost feature.node.kubernetes.io/rdma.available=true >/dev/null'

through_rdma() {
	k8s_crictl inspectp "$(k8s_crictl pods -q --name "$1")" |
		jq -e '(.info.runtimeHandler // .status.runtimeHandler) == "rdma"' >/dev/null
}
ASK='.metadata.annotations["oci-rdma-hook/enable"] = "true" | .spec.runtimeClassName = "rdma"'
NOASK='.spec.runtimeClassName = "rdma"'
# asks NAME / asks_nothing NAME: an annotated pod of the RuntimeClass rdma, served; one that
# asks for nothing, left alone; both through the handler; the second deleted, the first
# left running
asks() {
	pod "$1" "$ASK"
	inside "$1"
	served "$1"
	check "$1: the kubelet ran it through the handler rdma" through_rdma "$1"
}
asks_nothing() {
	pod "$1" "$NOASK"
	inside "$1"
	left_alone "$1"
	check "$1: the kubelet ran it through the handler rdma" through_rdma "$1"
	end "$1"
}

# ---- the installer's pods ------------------------------------------------------------------
inst_pods() { kc get pods "${NS[@]}" -l "$SEL" -o json 2>/dev/null; }
# inst_pod: the installer's pod not being deleted
inst_pod() {
	inst_pods | jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0].metadata.name // empty'
}
no_inst_pod() { [ "$(inst_pods | jq '.items | length')" = 0 ]; }
# watch_ready: a line every 0.2 s: the time, how many installer pods not being deleted are
# Ready (asked first), whether containerd's CRI has the handler (asked after)
watch_ready() {
	local r h
	while :; do
		r=$(inst_pods | jq '[.items[] | select(.metadata.deletionTimestamp == null) |
			.status.conditions[]? | select(.type == "Ready" and .status == "True")] | length')
		h=0
		! handler_in_cri || h=1
		echo "$(date +%s.%N) ${r:-?} $h"
		sleep 0.2
	done
}
WATCH_PID=""
watch_start() {
	watch_ready >"$WORK/watch-$1.log" 2>&1 &
	WATCH_PID=$!
}
watch_stop() { kill "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID" 2>/dev/null || true; }
INSTALLED=0
# rolled_out LABEL EXITS: the rollout complete; the installer's pod Ready, and Ready only
# once containerd's CRI had the handler (in every sample of watch-LABEL.log, and by the
# Ready condition's time against the handler's last appearance); containerd restarted
# since it had exited EXITS times (-: not asked); the handler's shim, the installed files,
# the label
rolled_out() {
	local l=$1 rc=0 p t_ready t_handler bad
	kc rollout status ds/oci-rdma-hook-installer "${NS[@]}" --timeout=90s \
		>"$WORK/rollout-$l.out" 2>&1 || rc=$?
	INSTALLED=0
	[ "$rc" != 0 ] || INSTALLED=1
	check "$l: kubectl rollout status: the rollout completes (rc $rc: $(tail -1 "$WORK/rollout-$l.out"))" \
		[ "$rc" = 0 ]
	p=$(inst_pod)
	kc logs "${NS[@]}" "$p" >"$WORK/inst-$l.log" 2>&1 || true
	sleep 1
	watch_stop
	check "$l: the installer pod ${p:-(none)} is Ready" eval \
		'[ -n "$p" ] && kc wait "${NS[@]}" --for=condition=Ready "pod/$p" --timeout=1s >/dev/null'
	if [ "$INSTALLED" = 0 ]; then
		sed -n 's/^/# installer: /p' "$WORK/inst-$l.log" | tail -8
		kc get pod "${NS[@]}" "$p" -o jsonpath='{.status.containerStatuses[0].state}' 2>&1 |
			head -c 600 | sed 's/^/# its state: /'
		echo
	fi
	check "$l: containerd's CRI lists the handler rdma, BinaryName $SHIM" handler_in_cri
	[ "$2" = - ] || check "$l: containerd was restarted by the installer (exits before: $2)" \
		wait_for 10 exited_since "$2"
	# (its ready line: the lines it printed while containerd restarted may be lost, the
	# CRI plugin copying a container's output)
	check "$l: it was ready by the config dump of /etc/containerd/config.toml by the containerd behind the socket, $K8S_PEERS/containerd ($(grep -m1 '^ready: ' "$WORK/inst-$l.log"))" \
		grep -q "^ready: containerd config dump of /etc/containerd/config.toml has handler 'rdma' with $SHIM .*$K8S_PEERS/containerd" \
		"$WORK/inst-$l.log"
	bad=$(awk '$2 > 0 && $3 == 0' "$WORK/watch-$l.log" | head -3 | tr '\n' ' ')
	check "$l: in no sample was the installer Ready while the CRI had no handler (${bad:-none})" \
		eval '[ -z "$bad" ] && grep -q " 1 1$" "$WORK/watch-$l.log"'
	t_handler=$(awk '$3 == 0 { t = "" } $3 == 1 && t == "" { t = $1 } END { print int(t) }' \
		"$WORK/watch-$l.log" || echo 0)
	t_ready=$(kc get pod "${NS[@]}" "$p" -o json 2>/dev/null | jq -r '.status.conditions[] |
		select(.type == "Ready" and .status == "True") | .lastTransitionTime' |
		xargs -r -I{} date -d {} +%s)
	t_ready=${t_ready:-0}
	check "$l: its Ready condition came after the handler appeared (Ready $t_ready, handler $t_handler)" \
		[ "$t_ready" -ge $((t_handler - 1)) -a "$t_handler" -gt 0 ]
	check "$l: the installed binary and node config are the image's and the ConfigMap's" \
		eval 'k8s_ns cmp -s "$HOOK" "$BINDIR/oci-rdma-hook" && k8s_ns cmp -s "$WORK/node.conf" "$CONF"'
	check "$l: the feature file names the RuntimeClass's label, and the node has it" \
		eval 'k8s_ns grep -sqx "feature.node.kubernetes.io/oci-rdma-hook-runtime=rdma" "$FEATURE" &&
			wait_for 10 labelled'
}
# follow LABEL: the log of the installer's pod followed to its end, into inst-LABEL.log
follow() {
	local p
	p=$(inst_pod)
	kc logs -f "${NS[@]}" "$p" >"$WORK/inst-$1.log" 2>&1 &
	LOGS_PID=$!
}
# undone LABEL: the installer's pods gone, having said it undid the installation; the
# feature file and the label gone
undone() {
	check "$1: the installer's pod is gone (its undo done)" wait_for 90 no_inst_pod
	wait "$LOGS_PID" 2>/dev/null || true
	check "$1: the installer said it undid the installation" \
		grep -q '^signal 15: undoing the installation' "$WORK/inst-$1.log"
	sed -n '/^signal 15: /,$s/^/# undo: /p' "$WORK/inst-$1.log"
	check "$1: the feature file is gone, and the node's label" \
		eval '! k8s_ns test -e "$FEATURE" && wait_for 10 unlabelled'
}
# reverted LABEL EXITS: the handler gone from the CRI, containerd restarted, its config
# back byte for byte
reverted() {
	check "$1: the handler is gone from containerd's CRI" wait_for 40 no_handler_in_cri
	check "$1: containerd was restarted again (exits before: $2)" wait_for 10 exited_since "$2"
	check "$1: containerd's config directory is back byte for byte ($(cd_back | grep -c '^[<>]') lines differ)" \
		cd_back
	[ "$(cd_back | grep -c '^[<>]')" = 0 ] || cd_back | sed 's/^/# config: /'
}

# ---- the kustomize base --------------------------------------------------------------------
KZ=$WORK/kz
mkdir -p "$KZ/test"
cp -r "$K8S_SRC/deploy/kubernetes/base" "$KZ/base"
cp "$WORK/node.conf" "$KZ/test/oci-rdma-hook.conf"
cat >"$KZ/test/kustomization.yaml" <<-EOF
	apiVersion: kustomize.config.k8s.io/v1beta1
	kind: Kustomization
	namespace: kube-system
	resources:
	  - ../base
	configMapGenerator:
	  - name: oci-rdma-hook-node-config
	    behavior: replace
	    files:
	      - oci-rdma-hook.conf
EOF
if [ "${ORH_K8S_UNSERVED:-}" = 1 ]; then
	cat >>"$KZ/test/kustomization.yaml" <<-EOF
		patches:
		  - target: {kind: DaemonSet, name: oci-rdma-hook-installer}
		    patch: |-
		      - {op: add, path: /spec/template/spec/containers/0/args/-, value: --shim}
		      - {op: add, path: /spec/template/spec/containers/0/args/-, value: $SHIM}
	EOF
fi
E0=$(exits)
watch_start kustomize
check "kustomize: kubectl apply -k of the base with the node config replaced" eval \
	'kc apply -k "$KZ/test" >"$WORK/apply-k.out" 2>&1 || { cat "$WORK/apply-k.out"; false; }'
rolled_out kustomize "$E0"

if [ "$INSTALLED" = 1 ]; then
	asks k-before
	asks_nothing k-nothing
	# a rolling update to the second tag: the old pod undoes, keeping the handler for
	# k-before, which runs through it; the new one installs
	watch_start update
	follow update-old
	check "update: kubectl set image to $REF2" eval 'kc set image "${NS[@]}" \
		ds/oci-rdma-hook-installer "install=${REF2#docker.io/library/}" >/dev/null'
	rolled_out update -
	wait "$LOGS_PID" 2>/dev/null || true
	check "update: the old pod's undo kept the handler for k-before, and said so" \
		grep -q "^kept the handler 'rdma' in /etc/containerd/config.toml: " "$WORK/inst-update-old.log"
	check "update: the handler stayed in containerd's CRI throughout the update" \
		eval '! grep -q " 0$" "$WORK/watch-update.log"'
	check "update: the installer pod is of the new tag" eval \
		'[ "$(kc get pod "${NS[@]}" "$(inst_pod)" -o jsonpath="{.spec.containers[0].image}")" = "${REF2#docker.io/library/}" ]'
	inside k-before
	served k-before
	asks k-after
	end k-after
else
	not_ok "kustomize: the pods, the rolling update: not run, the installer never became Ready"
fi

# the DaemonSet deleted while k-before runs through the handler: SIGTERM, the undo (its log
# followed to its end), which keeps the handler for that pod: it is exec'd into and deleted.
# Then `install --uninstall` on the node (the installed binary, in the namespace) reverts it.
follow delete
check "delete: kubectl delete the DaemonSet" \
	eval 'kc delete ds "${NS[@]}" oci-rdma-hook-installer --wait=false >/dev/null'
undone delete
if [ "$INSTALLED" = 1 ]; then
	check "delete: the undo kept the handler for the pod that runs through it, and said so" \
		grep -Eq "^kept the handler 'rdma' in /etc/containerd/config.toml: [1-9][0-9]* containers? still run" \
		"$WORK/inst-delete.log"
	check "delete: containerd's CRI still lists the handler" handler_in_cri
	inside k-before
	served k-before
	E0=$(exits)
	end k-before
fi
if [ "$INSTALLED" = 1 ] && [ "${ORH_K8S_UNSERVED:-}" != 1 ]; then
	# the runtime shim's delete of k-before's containers finished the kept undo, once the
	# pod's containerd shim exited: nobody runs --uninstall
	reverted finish "$E0"
	k8s_ns cat "$FINISH_LOG" 2>/dev/null | sed 's/^/# finish: /'
	check "finish: its log says it waited for the pod's shim, then reverted the config" \
		eval 'k8s_ns cat "$FINISH_LOG" | grep -q "^[-0-9T:]*Z: the undo kept for running containers, once pid [0-9]* exits$" &&
			k8s_ns cat "$FINISH_LOG" | grep -q "^changed /etc/containerd/config.toml$"'
	RC=0
	k8s_ns "$BINDIR/oci-rdma-hook" install --root / --uninstall >"$WORK/uninstall.log" 2>&1 || RC=$?
	check "uninstall: install --uninstall after it exits 0 (rc $RC) with nothing left to revert (it ran: the files kept, said so)" \
		eval '[ "$RC" = 0 ] && ! grep -q "^changed /etc/containerd" "$WORK/uninstall.log" &&
			grep -q "^kept the binary, the hooks.d files and the node config" "$WORK/uninstall.log"'
else
	# the handler's shim is runc (ORH_K8S_UNSERVED=1), which finishes nothing: by hand
	E0=$(exits)
	UARGS=()
	[ "${ORH_K8S_UNSERVED:-}" != 1 ] || UARGS=(--shim "$SHIM")
	RC=0
	k8s_ns "$BINDIR/oci-rdma-hook" install --root / --uninstall "${UARGS[@]}" \
		>"$WORK/uninstall.log" 2>&1 || RC=$?
	check "uninstall: install --uninstall on the node, none running through the handler, exits 0 (rc $RC: $(tail -1 "$WORK/uninstall.log"))" \
		[ "$RC" = 0 ]
	reverted uninstall "$E0"
fi
kc delete -k "$KZ/test" --ignore-not-found >/dev/null 2>&1 || true
check "kustomize: the rest of the base deleted (the RuntimeClass)" \
	wait_for 30 eval '! kc get runtimeclass rdma'

# ---- helm ----------------------------------------------------------------------------------
export HOME=$WORK/home HELM_CACHE_HOME=$WORK/home/cache HELM_CONFIG_HOME=$WORK/home/config \
	HELM_DATA_HOME=$WORK/home/data
HARGS=(--kubeconfig "$K8S/admin.kubeconfig" "${NS[@]}")
if [ -x "$HELM" ]; then
	POST=()
	if [ "${ORH_K8S_UNSERVED:-}" = 1 ]; then
		cat >"$WORK/bin/post-render" <<-EOF
			#!/bin/sh
			# the installer's args gain --shim $SHIM, indented as the chart renders them
			exec sed '/^ *- --node-config\$/{n;s#^\\( *\\)- .*\$#&\\n\\1- --shim\\n\\1- $SHIM#}'
		EOF
		chmod 755 "$WORK/bin/post-render"
		POST=(--post-renderer "$WORK/bin/post-render")
	fi
	E0=$(exits)
	watch_start helm
	check "helm: helm install of deploy/helm/oci-rdma-hook, the node config set" eval \
		'"$HELM" install orh "$K8S_SRC/deploy/helm/oci-rdma-hook" "${HARGS[@]}" "${POST[@]}" \
			--set-file nodeConfig="$WORK/node.conf" >"$WORK/helm.out" 2>&1 ||
			{ cat "$WORK/helm.out"; false; }'
	rolled_out helm "$E0"
	if [ "$INSTALLED" = 1 ]; then
		asks h-asks
		end h-asks
		asks_nothing h-nothing
	else
		not_ok "helm: the pods: not run, the installer never became Ready"
	fi
	E0=$(exits)
	follow helm-uninstall
	check "helm: helm uninstall" eval '"$HELM" uninstall orh "${HARGS[@]}" >/dev/null'
	undone helm-uninstall
	reverted helm-uninstall "$E0"
else
	ok "helm: # SKIP $HELM missing (tests/setup-debian.sh builds it)"
fi

# ---- the teardown, the host's files ---------------------------------------------------------
k8s_down
check "teardown: no process of the cluster or of its pods left, its cgroup removed" k8s_gone
snap "${HOST_PATHS[@]}" >"$WORK/host.after"
check "the host's own files under ${HOST_PATHS[*]} are unchanged" \
	diff "$WORK/host.before" "$WORK/host.after"
diff "$WORK/host.before" "$WORK/host.after" | grep '^[<>]' | head -10 | sed 's/^/# host: /' || true
echo "# the lane took $((SECONDS - T_START)) s (the cluster's bring-up ${K8S_UP_S} s)"
finish
