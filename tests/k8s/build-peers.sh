#!/usr/bin/env bash
# The Kubernetes lane's peers (tests/k8s/e2e-k8s.sh), built once from the Go module proxy
# into ORH_K8S_BIN (default /opt/oci-rdma-hook-peers/bin/k8s): kube-apiserver, kubelet,
# kube-scheduler, kube-controller-manager and kubectl v1.34.4, etcd 3.7.3 (tests/k8s/etcd,
# a module whose main is etcd's own), helm v3.22.0 and orh-rdmadev (tests/k8s/rdmadev, the
# lane's device plugin and DRA driver, deviceplugin v1beta1 and dynamic-resource-allocation
# v0.34.4). A version file in ORH_K8S_BIN says
# what is there; a build is skipped when it matches.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces the staging modules with
# ./staging/..., which the module zip leaves out. So its module is copied, vendor/ and
# go.work dropped, the replace block removed and each staging requirement pinned to the
# published v0.34.4, then tidied and built with the version in the ldflags.
set -euo pipefail
K8S_VERSION=v1.34.4
STAGING_VERSION=v0.34.4
HELM_VERSION=v3.22.0
here=$(cd "$(dirname "$0")" && pwd)
ORH_GO_BIN=${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}
ORH_K8S_BIN=${ORH_K8S_BIN:-$ORH_GO_BIN/k8s}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[ -x "$GO" ] || { echo "k8s peers: no Go toolchain at $GO" >&2; exit 1; }

# tests/k8s/rdmadev (the lane's device plugin and DRA driver, orh-rdmadev): a stamp of its
# own, .rdmadev, so that a change to it rebuilds only it (seconds with a warm build cache)
mkdir -p "$ORH_K8S_BIN"
rdmadev_sum=$(cd "$here/rdmadev" && cat go.mod go.sum ./*.go | sha256sum | cut -d' ' -f1)
if [ "$(cat "$ORH_K8S_BIN/.rdmadev" 2>/dev/null)" != "$rdmadev_sum" ]; then
	rm -f "$ORH_K8S_BIN/.rdmadev"
	(cd "$here/rdmadev" && CGO_ENABLED=0 "$GO" build -trimpath -o "$ORH_K8S_BIN/orh-rdmadev" .)
	printf '%s' "$rdmadev_sum" >"$ORH_K8S_BIN/.rdmadev"
	echo "k8s peers: orh-rdmadev (tests/k8s/rdmadev) built into $ORH_K8S_BIN"
fi

etcd_sum=$(cd "$here/etcd" && cat go.mod go.sum ./*.go | sha256sum | cut -d' ' -f1)
stamp="kubernetes $K8S_VERSION etcd-module $etcd_sum helm $HELM_VERSION"
if [ "$(cat "$ORH_K8S_BIN/.versions" 2>/dev/null)" = "$stamp" ]; then
	echo "k8s peers: up to date in $ORH_K8S_BIN"
	exit 0
fi
mkdir -p "$ORH_K8S_BIN"
rm -f "$ORH_K8S_BIN/.versions"
work=$(mktemp -d "${TMPDIR:-/tmp}/orh-k8s-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
t0=$SECONDS

echo "k8s peers: etcd (tests/k8s/etcd) into $ORH_K8S_BIN"
(cd "$here/etcd" && CGO_ENABLED=0 "$GO" build -trimpath -o "$ORH_K8S_BIN/etcd" .)
echo "k8s peers: etcd built after $((SECONDS - t0)) s"

echo "k8s peers: helm $HELM_VERSION"
GOBIN=$ORH_K8S_BIN CGO_ENABLED=0 "$GO" install -trimpath \
	-ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
	"helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
echo "k8s peers: helm built after $((SECONDS - t0)) s"

echo "k8s peers: kubernetes $K8S_VERSION"
dir=$("$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -n "$dir" ] && [ -f "$dir/go.mod" ] || { echo "k8s peers: module k8s.io/kubernetes@$K8S_VERSION not downloaded" >&2; exit 1; }
cp -r "$dir" "$work/kubernetes"
chmod -R u+w "$work/kubernetes"
cd "$work/kubernetes"
rm -rf vendor go.work go.work.sum
# Each replace that points into ./staging is dropped, and each requirement on a staging
# module becomes one on the published module (the replace block also names modules that
# nothing requires, some of which are not published: those are only dropped).
edits=()
while read -r what m; do
	case $what in
	replace) edits+=("-dropreplace=$m") ;;
	require) edits+=("-require=$m@$STAGING_VERSION") ;;
	esac
done < <("$GO" mod edit -json | python3 -c '
import json, sys
m = json.load(sys.stdin)
staging = {r["Old"]["Path"] for r in m.get("Replace") or [] if r["New"]["Path"].startswith("./staging/")}
for p in sorted(staging):
    print("replace", p)
for r in m.get("Require") or []:
    if r["Path"] in staging:
        print("require", r["Path"])')
[ "${#edits[@]}" -gt 0 ] || { echo "k8s peers: no staging replaces found in go.mod" >&2; exit 1; }
"$GO" mod edit "${edits[@]}"
"$GO" mod tidy
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean"
done
for cmd in kube-apiserver kube-scheduler kube-controller-manager kubectl kubelet; do
	CGO_ENABLED=0 "$GO" build -trimpath -ldflags "$ldflags" -o "$ORH_K8S_BIN/$cmd" "./cmd/$cmd"
	echo "k8s peers: $cmd built after $((SECONDS - t0)) s"
done
printf '%s' "$stamp" >"$ORH_K8S_BIN/.versions"
echo "k8s peers: built into $ORH_K8S_BIN in $((SECONDS - t0)) s"
