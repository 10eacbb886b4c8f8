#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# meson install script: installs the default node config only where none exists, so that
# a second `meson install` (an upgrade) never overwrites the operator's edited file.
# An edited file is kept; the new default goes beside it as oci-rdma-hook.conf.dist
# (the hook reads only oci-rdma-hook.conf). A symlink in its place is kept as well.
# Usage (from meson.build): install-conf.sh DEFAULT-CONF SYSCONFDIR
set -eu

src=$1
dir=${DESTDIR:-}$2/oci-rdma-hook
conf=$dir/oci-rdma-hook.conf

say() {
	[ -n "${MESON_INSTALL_QUIET:-}" ] || echo "$@"
}

if [ -n "${MESON_INSTALL_DRY_RUN:-}" ]; then
	say "Would install $src to $conf unless it exists"
	exit 0
fi
install -d -m 755 "$dir"
if [ ! -e "$conf" ] && [ ! -L "$conf" ]; then
	say "Installing $src to $dir"
	install -m 644 "$src" "$conf"
	rm -f "$conf.dist"
elif cmp -s "$src" "$conf"; then
	say "Keeping $conf: it is the default"
	rm -f "$conf.dist"
else
	say "Keeping $conf: it differs from the default, which is installed as $conf.dist"
	install -m 644 "$src" "$conf.dist"
fi
