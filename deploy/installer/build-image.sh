#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the installer image from a meson build directory, pulling nothing: FROM scratch,
# holding only what `oci-rdma-hook install` puts on a node (the static binary, the
# oci-rdma-runtime link, the node config, the hooks.d files) at their installed paths, and
# /oci-rdma-hook, a link to the binary at a path that does not depend on the build's prefix
# (the DaemonSet's readinessProbe runs `/oci-rdma-hook install --probe`).
# Its entrypoint is `oci-rdma-hook install --root /host` (deploy/kubernetes/base/installer.yaml).
#   deploy/installer/build-image.sh BUILDDIR [TAG]   (default TAG: oci-rdma-hook-installer:VERSION)
# Needs docker (or DOCKER=podman) and a binary built with -Dstatic=true (the default).
set -eu

build=$(cd "$1" && pwd)
docker=${DOCKER:-docker}
conf_h=$build/orh-config.h
[ -f "$conf_h" ] || { echo "build-image.sh: $1 is no meson build directory" >&2; exit 2; }
define() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$conf_h"; }
bindir=$(define ORH_BINDIR)
tag=${2:-oci-rdma-hook-installer:$(define ORH_VERSION)}
if ! file -L "$build/src/oci-rdma-hook" | grep -q 'statically linked'; then
	echo "build-image.sh: $build/src/oci-rdma-hook is not static (-Dstatic=true)" >&2
	exit 1
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
DESTDIR=$ctx/rootfs meson install -C "$build" --no-rebuild --quiet >/dev/null
# what install does not put on the node: the man pages, the dynamically linked verbs helper
rm -rf "$ctx/rootfs$(dirname "$bindir")/share/man" "$ctx/rootfs$(dirname "$bindir")/libexec"
ln -s "${bindir#/}/oci-rdma-hook" "$ctx/rootfs/oci-rdma-hook"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["$bindir/oci-rdma-hook", "install", "--root", "/host"]
DOCKERFILE
"$docker" build -q -t "$tag" "$ctx" >/dev/null
echo "$tag"
