#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The RPM package (rpm/oci-rdma-hook.spec): built with rpmbuild from a clean copy of the
# source (what git tracks or would track), linted with rpmlint, installed into a scratch
# root with `rpm --root`, checked where everything lands, upgraded twice over an edited
# config and erased. Nothing is installed on this machine.
#   bash tests/package-rpm.sh      (root: rpm --root chroots; meson test --suite package)
# On Debian, rpmbuild's database knows none of the spec's BuildRequires (RHEL names): the
# package is built with --nodeps from Debian's development packages (tests/setup-debian.sh),
# and installed with --nodeps (the scratch root holds no other package).
# Environment:
#   ORH_SRCDIR   the source tree (default: this script's)
#   KEEP=1       keep the work directory (the .rpms, the logs, the scratch root)
# A test that cannot run exits 77 (skip), or 1 when CI=true.
set -uo pipefail

SRC=$(cd "${ORH_SRCDIR:-$(dirname "$0")/..}" && pwd)
PKG=oci-rdma-hook
SPEC=$SRC/rpm/$PKG.spec
BIN=/usr/bin/oci-rdma-hook
CONF=/etc/oci-rdma-hook/oci-rdma-hook.conf
HOOKS_D=/usr/share/containers/oci/hooks.d
PRECREATE=/usr/share/oci-rdma-hook/hooks.d/oci-rdma-hook-precreate.json
PASSES=0 FAILS=0 WORK=""

. "$(dirname "$0")/tap.sh"
fatal() { # a step the rest depends on failed: show its log, stop
	not_ok "$1"
	[ -n "${2:-}" ] && [ -f "$2" ] && tail -n 40 "$2" | sed 's/^/#   /'
	exit 1
}
cleanup() {
	local rc=$?
	if [ -n "$WORK" ] && [ -z "${KEEP:-}" ]; then
		rm -rf --one-file-system "$WORK"
	elif [ -n "$WORK" ]; then
		echo "# kept $WORK"
	fi
	exit $rc
}

[ "$(id -u)" = 0 ] || cant_run "needs root (rpm --root chroots into the scratch root)"
for t in rpmbuild rpmlint rpm meson ninja cc python3; do
	command -v $t >/dev/null 2>&1 ||
		cant_run "$t not installed (tests/setup-debian.sh installs what the package needs)"
done
[ -f "$SPEC" ] || cant_run "no $SPEC"
WORK=$(mktemp -d /tmp/orh-package-rpm.XXXXXX)
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# ---- 1. the source tarballs: as the tree is, and with a changed default config ---------
VERSION=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$SRC/meson.build" | head -1)
SPEC_VERSION=$(sed -n 's/^Version: *//p' "$SPEC")
check "the spec's version ($SPEC_VERSION) is meson.build's ($VERSION)" [ "$VERSION" = "$SPEC_VERSION" ]
TREE=$WORK/tree/$PKG-$VERSION
mkdir -p "$TREE"
if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git -C "$SRC" ls-files -z --cached --others --exclude-standard |
		(cd "$SRC" && while IFS= read -r -d '' f; do
			[ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"
		done) | tar -C "$SRC" --null -T - -cf - | tar -C "$TREE" -xf - ||
		fatal "copy the source tree"
else
	tar -C "$SRC" --exclude='./build*' --exclude=./fuzz-out -cf - . | tar -C "$TREE" -xf - ||
		fatal "copy the source tree"
fi
mkdir -p "$WORK/src1" "$WORK/src2"
tar -C "$WORK/tree" -czf "$WORK/src1/$PKG-$VERSION.tar.gz" "$PKG-$VERSION" || fatal "tar the source"
printf '\n# a line the new release adds to the default\n' >>"$TREE/conf/oci-rdma-hook.conf"
tar -C "$WORK/tree" -czf "$WORK/src2/$PKG-$VERSION.tar.gz" "$PKG-$VERSION" || fatal "tar the changed source"

# ---- 2. build (releases 1, 2 and 3) and lint ------------------------------------------
# nocheck: the unit and black-box tests run in the suite's own build
build() { # RELEASE SOURCEDIR -> the .rpm's path
	rpmbuild -bb --nodeps --nocheck --define "_topdir $WORK/top" --define "_sourcedir $2" \
		--define "orh_release $1" "$SPEC" >"$WORK/build-$1.log" 2>&1 || return 1
	ls "$WORK"/top/RPMS/*/"$PKG-$VERSION-$1".*.rpm
}
R1=$(build 1 "$WORK/src1") || fatal "rpmbuild -bb release 1" "$WORK/build-1.log"
ok "rpmbuild -bb --nodeps built $(basename "$R1")"
R2=$(build 2 "$WORK/src1") || fatal "rpmbuild -bb release 2" "$WORK/build-2.log"
R3=$(build 3 "$WORK/src2") || fatal "rpmbuild -bb release 3 (changed default config)" "$WORK/build-3.log"
ok "releases 2 and 3 built (3 with a changed default config)"

# rpmlint (configured by rpm/rpmlint.toml) fails (rc != 0) on an error;
# rpm/oci-rdma-hook.rpmlintrc filters, with its reasons, what is so on purpose. Its
# warnings are shown: unstripped binaries (rpmbuild on RHEL strips them into the debuginfo
# package), static binaries that are not PIE, libibverbs' and libnl's resolver calls linked
# into oci-rdma-hook-verbs, tags that this rpmlint's defaults expect and RHEL's do not.
rpmlint -c "$SRC/rpm/rpmlint.toml" -r "$SRC/rpm/$PKG.rpmlintrc" "$R1" "$SPEC" >"$WORK/rpmlint.log" 2>&1
lint_rc=$?
sed 's/^/# rpmlint: /' "$WORK/rpmlint.log"
check "rpmlint reports no error (rc $lint_rc)" bash -c \
	'[ "$1" = 0 ] && grep -qE "checked; 0 errors" "$2"' _ "$lint_rc" "$WORK/rpmlint.log"
check "the only config file is $CONF, %config(noreplace)" \
	[ "$(rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags}\n]' "$R1" | grep ' c')" = "$CONF cn" ]
check "no scriptlets: installing registers nothing with docker, containerd or systemd" \
	[ -z "$(rpm -qp --scripts "$R1")" ]

# ---- 3. install into a scratch root ----------------------------------------------------
ROOT=$WORK/root
mkdir -p "$ROOT"
rpm --root "$ROOT" --initdb || fatal "rpm --root --initdb"
rpm --root "$ROOT" --nodeps -i "$R1" >"$WORK/install.log" 2>&1 || fatal "rpm -i $(basename "$R1")" "$WORK/install.log"
ok "rpm --root --nodeps -i $(basename "$R1")"
rpm --root "$ROOT" -ql "$PKG" >"$WORK/files"
for f in "$BIN" /usr/bin/oci-rdma-runtime /usr/libexec/oci-rdma-hook/oci-rdma-hook-verbs "$CONF" \
	"$HOOKS_D/$PKG.json" "$HOOKS_D/$PKG-poststop.json" "$PRECREATE" \
	/usr/share/man/man8/oci-rdma-hook.8.gz /usr/share/man/man8/oci-rdma-runtime.8.gz \
	/usr/share/man/man5/oci-rdma-hook.conf.5.gz /usr/share/man/man7/oci-rdma-hook-kubernetes.7.gz \
	/usr/share/man/man7/oci-rdma-hook-security.7.gz /usr/share/man/man7/oci-rdma-hook-registration.7.gz \
	/usr/share/man/man7/oci-rdma-hook-stages.7.gz /usr/lib/systemd/system/$PKG-nri.service \
	/usr/lib/systemd/system/$PKG-reconcile.path /usr/lib/systemd/system/$PKG-reconcile.service; do
	check "rpm -ql lists $f and it is in the root" bash -c \
		'grep -qxF "$2" "$1" && { [ -e "$3$2" ] || [ -L "$3$2" ]; }' _ "$WORK/files" "$f" "$ROOT"
done
check "nothing under /usr/local" bash -c 'grep -qxF "$2" "$1" && ! grep -q "^/usr/local" "$1"' _ "$WORK/files" "$BIN"
check "rpm -V: the installed files are the package's" rpm --root "$ROOT" -V "$PKG"
check "oci-rdma-runtime is a link to oci-rdma-hook" [ "$(readlink "$ROOT/usr/bin/oci-rdma-runtime")" = oci-rdma-hook ]
check "oci-rdma-hook --version is $VERSION" [ "$("$ROOT$BIN" --version)" = "oci-rdma-hook $VERSION" ]
check "oci-rdma-hook --help names the config $CONF" bash -c '"$1" --help | grep -qF "$2"' _ "$ROOT$BIN" "$CONF"
for h in "$HOOKS_D/$PKG.json" "$HOOKS_D/$PKG-poststop.json" "$PRECREATE"; do
	check "$h runs $BIN" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["hook"]["path"] == sys.argv[2]' "$ROOT$h" "$BIN"
done
for m in man8/oci-rdma-hook.8 man7/oci-rdma-hook-registration.7 man7/oci-rdma-hook-stages.7; do
	check "the man page ${m#*/} is the source's" bash -c \
		'[ -s "$1" ] && zcat "$1" | cmp -s - "$2"' _ "$ROOT/usr/share/man/$m.gz" "$SRC/man/${m#*/}"
done

# the installed binary with the installed config: an edit shows in `env`
python3 "$SRC/tests/mknode.py" "$SRC/tests/nodes/seed001-roce.json" "$WORK/node" >/dev/null ||
	fatal "tests/mknode.py seed001-roce"
env_of() { "$ROOT$BIN" --config "$ROOT$CONF" --sysroot "$WORK/node" env 2>/dev/null; }
check "env on the sample node with the shipped config" bash -c \
	'[ "$(grep -c "^NCCL_" <<<"$1")" -ge 3 ] && grep -qx NCCL_IB_TIMEOUT=22 <<<"$1"' _ "$(env_of)"
sed -i '/^\[env\]/a NCCL_IB_TIMEOUT = 19' "$ROOT$CONF"
cp "$ROOT$CONF" "$WORK/edited.conf"
check "the edited config takes effect" bash -c 'grep -qx NCCL_IB_TIMEOUT=19 <<<"$1"' _ "$(env_of)"

# ---- 4. upgrades over the edited config ------------------------------------------------
release() { rpm --root "$ROOT" -q --qf '%{RELEASE}' "$PKG"; }
others() { ls -A "$ROOT/etc/oci-rdma-hook" | grep -vx oci-rdma-hook.conf; }
rpm --root "$ROOT" --nodeps -U "$R2" >"$WORK/upgrade2.log" 2>&1 || fatal "rpm -U $(basename "$R2")" "$WORK/upgrade2.log"
check "upgraded to release 2" [ "$(release)" = 2 ]
check "the edited config survived the upgrade unchanged" cmp -s "$ROOT$CONF" "$WORK/edited.conf"
check "and no .rpmnew beside it (the default did not change)" [ -z "$(others)" ]
rpm --root "$ROOT" --nodeps -U "$R3" >"$WORK/upgrade3.log" 2>&1 || fatal "rpm -U $(basename "$R3")" "$WORK/upgrade3.log"
check "upgraded to release 3" [ "$(release)" = 3 ]
check "the edited config survived an upgrade that changed the default" cmp -s "$ROOT$CONF" "$WORK/edited.conf"
check "the new default is beside it as .rpmnew" grep -q "a line the new release adds" "$ROOT$CONF.rpmnew"

# ---- 5. erase --------------------------------------------------------------------------
rm -f "$ROOT$CONF.rpmnew" # rpm leaves it to the operator
rpm --root "$ROOT" --nodeps -e "$PKG" >"$WORK/erase.log" 2>&1 || fatal "rpm -e $PKG" "$WORK/erase.log"
check "after rpm -e rpm does not know the package" bash -c '! rpm --root "$1" -q "$2" >/dev/null 2>&1' _ "$ROOT" "$PKG"
check "after rpm -e the binary is gone (it was there)" bash -c \
	'grep -qxF "$2" "$1" && [ ! -e "$3$2" ]' _ "$WORK/files" "$BIN" "$ROOT"
check "after rpm -e none of the package's files is left" bash -c \
	'grep -qxF "$2" "$1" || exit 1
	 while read -r f; do [ -d "$3$f" ] && continue; [ -e "$3$f" ] || [ -L "$3$f" ] && exit 1; done <"$1"; exit 0' \
	_ "$WORK/files" "$BIN" "$ROOT"
check "the edited config is kept as $CONF.rpmsave" cmp -s "$ROOT$CONF.rpmsave" "$WORK/edited.conf"

echo "# $PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]
