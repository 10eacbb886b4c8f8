#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the installer image from a meson build directory, pulling nothing: FROM scratch,
# holding only what `oci-rdma-hook install` puts on a node (the static binary, the
# oci-rdma-runtime link, the node config, the hooks.d files) at their installed paths, and
# /oci-rdma-hook, a link to the binary at a path that does not depend on the build's prefix
# (the DaemonSet's readinessProbe runs `/oci-rdma-hook install --probe`).
# Its entrypoint is `oci-rdma-hook install --root /host` (deploy/kubernetes/base/installer.yaml).
#   deploy/installer/build-image.sh BUILDDIR [TAG]   (default TAG: oci-rdma-hook-installer:VERSION)
# FLAVOUR=nri adds a static busybox (/bin/sh, cp, mv, mkdir): the NRI plugin DaemonSet
# (deploy/kubernetes/overlays/nri) copies the binary and its node config onto the host with
# them before it runs `oci-rdma-hook nri` from there (default TAG: oci-rdma-hook-nri:VERSION).
# Needs docker (or DOCKER=podman) and a binary built with -Dstatic=true (the default); the
# nri flavour a static /bin/busybox (BUSYBOX=PATH; Debian's busybox-static).
set -eu

build=$(cd "$1" && pwd)
docker=${DOCKER:-docker}
conf_h=$build/orh-config.h
[ -f "$conf_h" ] || { echo "build-image.sh: $1 is no meson build directory" >&2; exit 2; }
define() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$conf_h"; }
bindir=$(define ORH_BINDIR)
flavour=${FLAVOUR:-installer}
case $flavour in
installer | nri) ;;
*) echo "build-image.sh: FLAVOUR is installer or nri, not '$flavour'" >&2; exit 2 ;;
esac
tag=${2:-oci-rdma-hook-$flavour:$(define ORH_VERSION)}
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
if [ "$flavour" = nri ]; then
	busybox=${BUSYBOX:-/bin/busybox}
	if ! file -L "$busybox" | grep -q 'statically linked'; then
		echo "build-image.sh: $busybox is not a static busybox (busybox-static)" >&2
		exit 1
	fi
	mkdir -p "$ctx/rootfs/bin"
	cp "$busybox" "$ctx/rootfs/bin/busybox"
	for l in sh cp mv mkdir; do ln -s busybox "$ctx/rootfs/bin/$l"; done
fi
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["$bindir/oci-rdma-hook", "install", "--root", "/host"]
DOCKERFILE
"$docker" build -q -t "$tag" "$ctx" >/dev/null
echo "$tag"
