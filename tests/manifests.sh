#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks of the Kubernetes examples in deploy/kubernetes/ (oci-rdma-hook-kubernetes(7)),
# made by tests/manifests.py: every YAML file parses, and so do the kustomize base and its
# overlay as `kubectl kustomize` renders them (the installer DaemonSet's fields, its
# ConfigMap's node config accepted by the binary); the RuntimeClass, the containerd and CRI-O runtime handlers that
# `oci-rdma-hook configure` writes and the pods agree with each other and with the
# installed path of the shim;
# CRI-O's hooks_dir holds no file of a stage CRI-O does not know; the node config is one
# the binary accepts. Then the decision for the example pods: the container and sandbox
# specs that containerd's and CRI-O's CRI code would build from them (annotations passed as
# their sources do it, the device plugins' nodes in linux.devices) go through
# `oci-rdma-hook env --spec` on the DGX-like sample node, under the example node config
# (request_scope = allocated: a request never serves a pod that was allocated no HCA) and
# under the defaults. No cluster and no engine here: the engines' and the plugins' part is
# modelled on their sources, named where it is done.
# Environment: ORH_HOOK (the built binary), ORH_SRCDIR, ORH_BUILDDIR.
set -u
HOOK=${ORH_HOOK:?run through meson test}
SRC=${ORH_SRCDIR:?run through meson test}
BUILD=${ORH_BUILDDIR:?run through meson test}
work=$(mktemp -d /tmp/orh-manifests.XXXXXX)
trap 'rm -rf "$work"' EXIT

# TOML: Python's tomllib (3.11), or on 3.10 (Ubuntu 22.04) tomli, its source (python3-tomli)
python3 -c 'import yaml
try: import tomllib
except ImportError: import tomli' 2>/dev/null || {
	echo "not ok - python3 with yaml, and tomllib (3.11) or tomli (python3-yaml, python3-tomli: tests/setup-debian.sh installs them)"
	exit 1
}
python3 "$SRC/tests/mknode.py" "$SRC/tests/nodes/dgx-h100.json" "$work/node" >/dev/null ||
	exit 1
# where `meson install` puts the shim, and under which prefix
if ! meson introspect --installed "$BUILD" >"$work/installed.json" ||
	! meson introspect --buildoptions "$BUILD" >"$work/options.json"; then
	echo "not ok - meson introspect $BUILD"
	exit 1
fi

# the kustomize base, its example overlay and its NRI overlay, rendered as `kubectl apply -k`
# would send them
# Debian 12 packages no kubectl: tests/setup-debian.sh builds one (tests/k8s/build-peers.sh)
K8S_KUBECTL=${ORH_K8S_BIN:-${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}/k8s}/kubectl
if [ -z "${KUBECTL:-}" ] && ! command -v kubectl >/dev/null 2>&1 && [ -x "$K8S_KUBECTL" ]; then
	KUBECTL=$K8S_KUBECTL
fi
KUBECTL=${KUBECTL:-kubectl}
if ! command -v "$KUBECTL" >/dev/null 2>&1; then
	echo "SKIP: no kubectl (or \$KUBECTL) to run kubectl kustomize" >&2
	[ "${CI:-}" = true ] && exit 1
	exit 77
fi
for k in base:base overlays/example:overlay overlays/nri:nri; do
	out=$work/${k#*:}.yaml k=${k%%:*}
	if ! "$KUBECTL" kustomize "$SRC/deploy/kubernetes/$k" >"$out" 2>"$work/kustomize.err"; then
		echo "not ok - kubectl kustomize deploy/kubernetes/$k: $(cat "$work/kustomize.err")"
		exit 1
	fi
done

python3 "$SRC/tests/manifests.py" "$HOOK" "$SRC" "$work"
