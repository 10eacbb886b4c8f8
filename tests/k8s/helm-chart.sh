#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Helm chart deploy/helm/oci-rdma-hook (oci-rdma-hook-kubernetes(7)), with the helm and
# kubectl that tests/setup-debian.sh builds (tests/k8s/build-peers.sh): `helm lint` in both
# modes; `helm template` in both modes agrees with `kubectl kustomize` of
# deploy/kubernetes/base (mode=handler) and overlays/nri (mode=nri): the same DaemonSet pod
# template (container, args, command, env, volumes, mounts, security context, scheduling),
# the same RuntimeClass and the same node config (tests/k8s/helm_chart.py); each value
# (the mode, the node config, the image, tolerations, node selector, priority class, the
# NRI socket's directory) reaches the rendered manifests; a mode that is neither is
# refused, naming the value.
# Environment: ORH_SRCDIR; ORH_K8S_BIN (default /opt/oci-rdma-hook-peers/bin/k8s).
set -u
SRC=${ORH_SRCDIR:?run through meson test}
BIN=${ORH_K8S_BIN:-${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}/k8s}
HELM=$BIN/helm KUBECTL=$BIN/kubectl
skip() {
	echo "SKIP: $*" >&2
	[ "${CI:-}" = true ] && exit 1
	exit 77
}
[ -x "$HELM" ] || skip "$HELM missing (tests/setup-debian.sh builds it)"
[ -x "$KUBECTL" ] || skip "$KUBECTL missing (tests/setup-debian.sh builds it)"
python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed"
work=$(mktemp -d /tmp/orh-helm.XXXXXX)
trap 'rm -rf "$work"' EXIT
chart=$SRC/deploy/helm/oci-rdma-hook
# helm keeps its caches and config under HOME: a private one
export HOME=$work/home HELM_CACHE_HOME=$work/home/cache HELM_CONFIG_HOME=$work/home/config \
	HELM_DATA_HOME=$work/home/data

"$HELM" version --short >"$work/helm.version" 2>&1
echo "# $(cat "$work/helm.version")"
render() { # NAME ARG...: helm template of the chart into $work/NAME.yaml, its stderr beside it
	local name=$1
	shift
	"$HELM" template orh "$chart" --namespace kube-system "$@" >"$work/$name.yaml" \
		2>"$work/$name.err"
}
fails=0
for mode in handler nri; do
	if "$HELM" lint "$chart" --set mode=$mode >"$work/lint-$mode.out" 2>&1; then
		echo "ok - helm lint, mode=$mode"
	else
		echo "not ok - helm lint, mode=$mode: $(tail -5 "$work/lint-$mode.out")"
		fails=$((fails + 1))
	fi
done
render handler || { echo "not ok - helm template (mode=handler): $(cat "$work/handler.err")"; exit 1; }
render nri --set mode=nri || { echo "not ok - helm template --set mode=nri: $(cat "$work/nri.err")"; exit 1; }
render values --set mode=nri --set image.nri.repository=registry.example.com/orh-nri \
	--set image.nri.tag=9.9 --set priorityClassName=orh-high \
	--set-string 'nodeSelector.example\.com/rdma=yes' \
	--set 'nodeSelector.feature\.node\.kubernetes\.io/rdma\.available=null' \
	--set 'tolerations[0].key=example.com/only,tolerations[0].operator=Exists' \
	--set nri.socketDir=/run/k3s/nri --set-file nodeConfig="$SRC/deploy/kubernetes/overlays/example/oci-rdma-hook.conf" ||
	{ echo "not ok - helm template with every value set: $(cat "$work/values.err")"; exit 1; }
render handler-values --set image.installer.repository=registry.example.com/orh-inst \
	--set image.installer.tag=9.9 --set handler=rdma2 --set runtimeClass.name=rdma2 \
	--set 'installerEnv[0].name=CONTAINERD_CONFIG,installerEnv[0].value=/etc/k0s/containerd.toml' ||
	{ echo "not ok - helm template, handler mode with values set: $(cat "$work/handler-values.err")"; exit 1; }
if render bad --set mode=shim; then
	echo "not ok - helm template --set mode=shim is refused (it rendered)"
	fails=$((fails + 1))
elif grep -q 'values.yaml: mode: "shim" is neither handler nor nri' "$work/bad.err"; then
	echo "ok - helm template --set mode=shim is refused, naming the value"
else
	echo "not ok - helm template --set mode=shim: the error names the value: $(cat "$work/bad.err")"
	fails=$((fails + 1))
fi
for k in base:kbase overlays/nri:knri; do
	if ! "$KUBECTL" kustomize "$SRC/deploy/kubernetes/${k%%:*}" >"$work/${k#*:}.yaml" 2>"$work/k.err"; then
		echo "not ok - kubectl kustomize deploy/kubernetes/${k%%:*}: $(cat "$work/k.err")"
		exit 1
	fi
done
python3 "$SRC/tests/k8s/helm_chart.py" "$SRC" "$work" || fails=$((fails + 1))
[ "$fails" = 0 ]
