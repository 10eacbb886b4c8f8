#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian package (debian/): built with `dpkg-buildpackage -b -us -uc` from a clean copy
# of the source (the files git tracks or would track: no build directory, no ignored
# output), linted, installed, checked where everything lands, upgraded twice over an
# edited conffile, removed and purged.
#   bash tests/package.sh          (root; `meson test --suite package` sets the environment)
# While it runs the package is installed on this machine (/usr/bin/oci-rdma-hook, the
# hooks.d files in /usr/share/containers/oci/hooks.d that podman and CRI-O read, podman's
# precreate file in /usr/share/oci-rdma-hook/hooks.d, which no engine reads by default); it is
# purged at the end, also on failure. It does not run where oci-rdma-hook is installed
# already (as a package or by meson install): it would replace and then remove that.
#
# Environment:
#   ORH_SRCDIR        the source tree (default: this script's)
#   ORH_PACKAGE_E2E   end-to-end tests (tests/e2e/NAME.sh) run against the installed
#                     package, HOOK=/usr/bin/oci-rdma-hook: a list of NAMEs, "all" (every
#                     script of meson's e2e suite; needs ORH_BUILDDIR) or "none".
#                     Default: hook (runc only).
#   PROBE, NO_OPENAT2 the e2e helpers (tests/e2e/meson.build); built here when unset
#   KEEP=1            keep the work directory (the .debs, the build log)
# A test that cannot run exits 77 (skip), or 1 when CI=true.
set -uo pipefail

SRC=$(cd "${ORH_SRCDIR:-$(dirname "$0")/..}" && pwd)
PKG=oci-rdma-hook
E2E=${ORH_PACKAGE_E2E:-hook}
BIN=/usr/bin/oci-rdma-hook
CONF=/etc/oci-rdma-hook/oci-rdma-hook.conf
HOOKS_D=/usr/share/containers/oci/hooks.d
PRECREATE=/usr/share/oci-rdma-hook/hooks.d/oci-rdma-hook-precreate.json
PASSES=0 FAILS=0 WORK="" INSTALLED=0 LINTIAN_PID="" T0=$SECONDS

. "$(dirname "$0")/tap.sh"
stage() { echo "# [$((SECONDS - T0))s] $*"; }
fatal() { # a step the rest depends on failed: show its log, stop
	not_ok "$1"
	[ -n "${2:-}" ] && [ -f "$2" ] && tail -n 60 "$2" | sed 's/^/#   /'
	exit 1
}
# engines_check: with the package installed, what configure and the shipped hooks.d files
# do to the engines of this machine (man oci-rdma-hook-registration, REGISTRATION):
#  - every file in a hooks.d directory that CRI-O, buildah or containerd's NRI read names
#    only OCI stages (they refuse a directory holding another: CRI-O then does not start);
#  - buildah, which reads those directories when given none, builds an image with a RUN;
#  - `configure --engine podman` makes podman read the precreate directory, --undo removes it;
#  - the snippets of oci-rdma-hook-registration(7) are what `configure --dry-run` prints.
engines_check() {
	local d rc
	check "every hooks.d file where CRI-O, buildah or NRI look names only OCI stages" python3 -c '
import glob, json, sys
known = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"}
files = glob.glob("/usr/share/containers/oci/hooks.d/*.json") + glob.glob("/etc/containers/oci/hooks.d/*.json")
bad = {f: json.load(open(f)).get("stages") for f in files}
bad = {f: st for f, st in bad.items() if not st or not set(st) <= known}
sys.exit("%s" % bad if bad else 0)'
	d=$WORK/engines
	mkdir -p "$d/ctx/bin"
	cp /bin/busybox "$d/ctx/bin/busybox"
	ln -s busybox "$d/ctx/bin/sh"
	tar -C "$d/ctx" -cf "$d/rootfs.tar" bin
	printf 'FROM scratch\nADD rootfs.tar /\nRUN echo built-with-the-package\n' >"$d/Containerfile"
	if command -v buildah >/dev/null 2>&1; then
		buildah --root "$d/bstorage" --runroot "$d/brunroot" --storage-driver vfs build \
			--isolation oci --runtime runc -f "$d/Containerfile" "$d" >"$d/buildah.log" 2>&1 &&
			rc=0 || rc=$?
		check "buildah's RUN works with the package installed (rc $rc: $(grep -i error "$d/buildah.log" | tail -1))" \
			bash -c '[ "$1" = 0 ] && grep -q "^built-with-the-package" "$2"' _ "$rc" "$d/buildah.log"
		buildah --root "$d/bstorage" --runroot "$d/brunroot" --storage-driver vfs rm -a >/dev/null 2>&1
		buildah --root "$d/bstorage" --runroot "$d/brunroot" --storage-driver vfs rmi -a -f >/dev/null 2>&1
	fi
	if command -v podman >/dev/null 2>&1; then
		"$BIN" configure --engine podman >"$d/configure.log" 2>&1 && rc=0 || rc=$?
		check "configure --engine podman (rc $rc: $(tail -1 "$d/configure.log"))" [ "$rc" = 0 ]
		printf '[containers]\ndefault_ulimits = []\n' >/etc/containers/containers.conf.d/00-orh-package.conf
		mkdir -p "$d/rootfs"
		tar -C "$d/rootfs" -xf "$d/rootfs.tar"
		podman --root "$d/storage" --runroot "$d/runroot" --storage-driver vfs --runtime runc \
			--cgroup-manager cgroupfs --log-level=debug run --rm --network none \
			--rootfs "$d/rootfs" /bin/sh -c 'echo podman-ran' >"$d/podman.out" 2>"$d/podman.log" &&
			rc=0 || rc=$?
		check "podman runs a container with every hook of the package (rc $rc)" \
			bash -c '[ "$1" = 0 ] && grep -qx podman-ran "$2"' _ "$rc" "$d/podman.out"
		check "podman reads hooks from /usr/share/oci-rdma-hook/hooks.d" \
			grep -qF 'reading hooks from /usr/share/oci-rdma-hook/hooks.d"' "$d/podman.log"
		rm -f /etc/containers/containers.conf.d/00-orh-package.conf
		"$BIN" configure --engine podman --undo >/dev/null 2>&1
		check "configure --engine podman --undo removes its drop-in" \
			[ ! -e /etc/containers/containers.conf.d/99-oci-rdma-hook.conf ]
	fi
	check "oci-rdma-hook-registration(7)'s engine snippets are what configure --dry-run prints" \
		python3 "$SRC/tests/man_snippets.py" "$SRC/man/oci-rdma-hook-registration.7" "$BIN" "$d/snippets"
}
installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null)" = installed ]; }
known() { dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null | grep -qv '^not-installed$'; }
cleanup() {
	local rc=$?
	if [ -n "$LINTIAN_PID" ]; then
		kill "$LINTIAN_PID" 2>/dev/null
		wait "$LINTIAN_PID" 2>/dev/null
	fi
	if [ "$INSTALLED" = 1 ] && known; then
		dpkg --purge "$PKG" >/dev/null 2>&1 || echo "# WARNING: dpkg --purge $PKG failed" >&2
	fi
	if [ -n "$WORK" ] && [ -z "${KEEP:-}" ]; then
		rm -rf --one-file-system "$WORK"
	elif [ -n "$WORK" ]; then
		echo "# kept $WORK"
	fi
	exit $rc
}

# ---- can it run here? ------------------------------------------------------------------
[ "$(id -u)" = 0 ] || cant_run "needs root (installs the package)"
for t in dpkg-buildpackage dh lintian dpkg-deb man python3 runuser cc; do
	command -v $t >/dev/null 2>&1 ||
		cant_run "$t not installed (tests/setup-debian.sh installs what the package needs)"
done
[ -f "$SRC/debian/control" ] || cant_run "no debian/ in $SRC"
exec 9>/run/lock/oci-rdma-hook-package.lock
flock -w 900 9 || cant_run "another package test holds /run/lock/oci-rdma-hook-package.lock"
known && cant_run "the $PKG package is installed on this machine; the test would replace and purge it"
for f in "$BIN" /usr/bin/oci-rdma-runtime /etc/oci-rdma-hook "$HOOKS_D/$PKG.json" "$PRECREATE"; do
	[ -e "$f" ] || [ -L "$f" ] &&
		cant_run "$f exists (installed outside dpkg?); the package would overwrite it and purge would remove it"
done
WORK=$(mktemp -d /tmp/orh-package.XXXXXX)
chmod 755 "$WORK"
trap cleanup EXIT
trap 'exit 143' TERM # meson's timeout: purge on the way out
trap 'exit 130' INT

# ---- 1. a clean copy of the source -----------------------------------------------------
VERSION=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
UPSTREAM=${VERSION%%-*}
MESON_VERSION=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$SRC/meson.build" | head -1)
check "debian/changelog's version ($VERSION) is meson.build's ($MESON_VERSION)" \
	[ "$UPSTREAM" = "$MESON_VERSION" ]
TREE=$WORK/$PKG-$UPSTREAM
mkdir "$TREE"
stage "copying the source"
if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# what a fresh clone holds, with the working tree's changes (tracked and untracked
	# files that .gitignore does not exclude; a deleted file is left out)
	git -C "$SRC" ls-files -z --cached --others --exclude-standard |
		(cd "$SRC" && while IFS= read -r -d '' f; do
			[ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"
		done) | tar -C "$SRC" --null -T - -cf - | tar -C "$TREE" -xf - ||
		fatal "copy the source tree"
else
	tar -C "$SRC" --exclude='./build*' --exclude='./obj-*' --exclude=./fuzz-out \
		--exclude=./debian/.debhelper --exclude="./debian/$PKG" -cf - . |
		tar -C "$TREE" -xf - || fatal "copy the source tree"
fi
check "the copy holds no build directory or package build output" bash -c \
	'[ -z "$(find "$1" -maxdepth 1 \( -name "build*" -o -name "obj-*" \) -print -quit)" ] &&
	 [ ! -e "$1/debian/.debhelper" ] && [ ! -e "$1/debian/'$PKG'" ]' _ "$TREE"

# ---- 2. build and lint -----------------------------------------------------------------
# nocheck: the unit and black-box tests run in the suite's own build
stage "dpkg-buildpackage -b -us -uc"
(cd "$TREE" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -b -us -uc) \
	>"$WORK/build.log" 2>&1 || fatal "dpkg-buildpackage -b -us -uc" "$WORK/build.log"
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
DEB=$WORK/${PKG}_${VERSION}_$ARCH.deb
CHANGES=$WORK/${PKG}_${VERSION}_$ARCH.changes
[ -f "$DEB" ] || fatal "dpkg-buildpackage made $DEB" "$WORK/build.log"
ok "dpkg-buildpackage -b -us -uc built $(basename "$DEB")"

# lintian reads only the .changes and the .debs: it runs while the package is tried out
# (as nobody: lintian advises against running as root)
runuser -u nobody -- lintian -I --fail-on error,warning "$CHANGES" >"$WORK/lintian.log" 2>&1 &
LINTIAN_PID=$!

dpkg-deb -c "$DEB" | awk '{ print $6 }' | sed 's|^\./|/|' >"$WORK/contents"
check "no maintainer scripts: installing registers nothing with docker, containerd or systemd" \
	[ "$(dpkg-deb --ctrl-tarfile "$DEB" | tar -t | sed 's|^\./||' | grep -v '^$' | sort | tr '\n' ' ')" = \
	"conffiles control md5sums " ]
check "no file in the engines' configuration or in systemd (configure writes those) but the NRI plugin's and the reconcile watch's units" \
	python3 -c '
import re, sys
units = ["/lib/systemd/system/oci-rdma-hook-" + u
         for u in ("nri.service", "reconcile.path", "reconcile.service")]
files = open(sys.argv[1]).read().split()
bad = [l for l in files if l not in units and l.rstrip("/") not in ("/lib/systemd/system", "/lib/systemd")
       and re.match(r"/(etc|usr/lib|lib)/(docker|containerd|crio|systemd|containers)/", l)]
sys.exit(" ".join(bad) if bad or any(u not in files for u in units) else 0)' "$WORK/contents"
check "the only conffile is $CONF" [ "$(dpkg-deb -I "$DEB" conffiles | tr '\n' ' ')" = "$CONF " ]
check "Built-Using names the C library the binary incorporates" \
	bash -c 'dpkg-deb -f "$1" Built-Using | grep -q "glibc (= "' _ "$DEB"

# ---- 3. install ------------------------------------------------------------------------
stage "dpkg -i"
INSTALLED=1
dpkg -i "$DEB" </dev/null >"$WORK/install.log" 2>&1 || fatal "dpkg -i $(basename "$DEB")" "$WORK/install.log"
ok "dpkg -i $(basename "$DEB")"
dpkg -L "$PKG" >"$WORK/files"
for f in "$BIN" /usr/bin/oci-rdma-runtime /usr/libexec/oci-rdma-hook/oci-rdma-hook-verbs "$CONF" \
	"$HOOKS_D/$PKG.json" "$HOOKS_D/$PKG-poststop.json" "$PRECREATE" \
	/usr/share/man/man8/oci-rdma-hook.8.gz /usr/share/man/man8/oci-rdma-runtime.8.gz \
	/usr/share/man/man5/oci-rdma-hook.conf.5.gz /usr/share/man/man7/oci-rdma-hook-kubernetes.7.gz \
	/usr/share/man/man7/oci-rdma-hook-security.7.gz /usr/share/man/man7/oci-rdma-hook-registration.7.gz \
	/usr/share/man/man7/oci-rdma-hook-stages.7.gz \
	/lib/systemd/system/$PKG-nri.service /lib/systemd/system/$PKG-reconcile.path \
	/lib/systemd/system/$PKG-reconcile.service \
	/usr/share/doc/$PKG/copyright; do
	check "dpkg -L lists $f" grep -qxF "$f" "$WORK/files"
done
# (of a list that holds the binary: an empty one would pass both)
check "nothing under /usr/local" bash -c 'grep -qxF "$2" "$1" && ! grep -q "^/usr/local" "$1"' _ "$WORK/files" "$BIN"
check "the package's files are on disk" bash -c \
	'grep -qxF "$2" "$1" && while read -r f; do [ -e "$f" ] || [ -L "$f" ] || exit 1; done <"$1"' _ "$WORK/files" "$BIN"
check "oci-rdma-runtime is a link to oci-rdma-hook" [ "$(readlink -f /usr/bin/oci-rdma-runtime)" = "$BIN" ]
# the NRI plugin's unit: installed, runs the binary's nri command, and is not enabled (no
# way in starts by itself; the operator enables it)
UNIT=/lib/systemd/system/$PKG-nri.service
check "$UNIT runs $BIN nri" grep -qx "ExecStart=$BIN nri" "$UNIT"
check "$UNIT is not enabled by the install" bash -c \
	'[ -f "$1" ] && ! ls /etc/systemd/system/*.wants/"$(basename "$1")" >/dev/null 2>&1' _ "$UNIT"
# (systemd's own reading of the unit: its ExecStart binary and its man pages are there)
command -v systemd-analyze >/dev/null 2>&1 &&
	check "systemd-analyze verify $UNIT" systemd-analyze verify "$UNIT"
# the reconcile watch: the path unit starts the service, which runs configure for
# containerd; neither is enabled by the install
RUNIT=/lib/systemd/system/$PKG-reconcile
check "$RUNIT.path watches containerd's config and starts $PKG-reconcile.service" bash -c \
	'grep -qx "PathChanged=/etc/containerd/conf.d" "$1.path" &&
	 grep -qx "Unit=oci-rdma-hook-reconcile.service" "$1.path"' _ "$RUNIT"
check "$RUNIT.service runs $BIN configure for the engine" \
	grep -q "^ExecStart=.*$BIN configure --engine \"\$\$ENGINE\"" "$RUNIT.service"
check "$RUNIT.path is not enabled by the install" bash -c \
	'! ls /etc/systemd/system/*.wants/"$(basename "$1")" >/dev/null 2>&1' _ "$RUNIT.path"
command -v systemd-analyze >/dev/null 2>&1 &&
	check "systemd-analyze verify $RUNIT.path $RUNIT.service" \
		systemd-analyze verify "$RUNIT.path" "$RUNIT.service"
check "$BIN is statically linked" bash -c '! ldd "$1" >/dev/null 2>&1' _ "$BIN"
check "detect --verbs is answered by libibverbs (oci-rdma-hook-verbs)" bash -c \
	'"$1" detect --json --verbs | python3 -c "import json, sys; n = json.load(sys.stdin)[\"verbs\"].get(\"note\", \"\"); sys.exit(n.startswith(\"no libibverbs in this binary\"))"' _ "$BIN"
check "oci-rdma-hook --help works and names the config $CONF" \
	bash -c '"$1" --help | grep -qF "$2"' _ "$BIN" "$CONF"
check "oci-rdma-hook --version is $UPSTREAM" [ "$("$BIN" --version)" = "oci-rdma-hook $UPSTREAM" ]
for h in "$HOOKS_D/$PKG.json" "$HOOKS_D/$PKG-poststop.json" "$PRECREATE"; do
	check "$h runs $BIN" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["hook"]["path"] == sys.argv[2]' "$h" "$BIN"
done
# CRI-O reads $HOOKS_D by default and loads hooks with no extension stage: a file there of
# another stage (podman's precreate) makes it refuse the directory and not start
check "the package's files in $HOOKS_D have only stages CRI-O knows (no precreate)" python3 -c '
import json, os, sys
known = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart",
         "poststop"}
files = [f for f in open(sys.argv[1]).read().split() if os.path.dirname(f) == sys.argv[2]]
stages = {f: json.load(open(f)).get("stages") for f in files}
bad = [f for f, st in stages.items() if not st or not set(st) <= known]
sys.exit("%s" % stages if bad or len(files) != 2 else 0)' "$WORK/files" "$HOOKS_D"
check "$PRECREATE has stage precreate" python3 -c '
import json, sys
sys.exit(json.load(open(sys.argv[1]))["stages"] != ["precreate"])' "$PRECREATE"
engines_check
if grep -rqsE '^path-exclude[= ]+/usr/share/man' /etc/dpkg/dpkg.cfg /etc/dpkg/dpkg.cfg.d; then
	echo "# dpkg excludes /usr/share/man on this machine: man pages checked in the .deb only"
	check "the .deb holds oci-rdma-runtime(8)" grep -qx /usr/share/man/man8/oci-rdma-runtime.8.gz "$WORK/contents"
else
	check "man -w oci-rdma-runtime finds the shim's page" \
		[ "$(man -w oci-rdma-runtime 2>/dev/null)" = /usr/share/man/man8/oci-rdma-runtime.8.gz ]
	check "man -w oci-rdma-hook" [ "$(man -w oci-rdma-hook 2>/dev/null)" = /usr/share/man/man8/oci-rdma-hook.8.gz ]
	check "man -w 5 oci-rdma-hook.conf" \
		[ "$(man -w 5 oci-rdma-hook.conf 2>/dev/null)" = /usr/share/man/man5/oci-rdma-hook.conf.5.gz ]
	for p in oci-rdma-hook-registration oci-rdma-hook-stages; do
		check "man -w 7 $p" [ "$(man -w 7 $p 2>/dev/null)" = /usr/share/man/man7/$p.7.gz ]
	done
	check "man oci-rdma-runtime shows docker's registration" \
		bash -c 'MANPAGER=cat MANWIDTH=100 man oci-rdma-runtime 2>/dev/null | grep -q daemon.json'
fi

# the installed binary reads the installed config: an edit shows in `env`
python3 "$SRC/tests/mknode.py" "$SRC/tests/nodes/seed001-roce.json" "$WORK/node" >/dev/null ||
	fatal "tests/mknode.py seed001-roce"
env_of() { "$BIN" --sysroot "$WORK/node" env 2>/dev/null; }
check "env on the sample node with the shipped config" bash -c \
	'[ "$(grep -c "^NCCL_" <<<"$1")" -ge 3 ] && grep -qx NCCL_IB_TIMEOUT=22 <<<"$1"' _ "$(env_of)"
sed -i '/^\[env\]/a NCCL_IB_TIMEOUT = 19' "$CONF"
cp "$CONF" "$WORK/edited.conf"
check "the edited conffile takes effect" bash -c 'grep -qx NCCL_IB_TIMEOUT=19 <<<"$1"' _ "$(env_of)"

# ---- 4. upgrades over the edited conffile ----------------------------------------------
# The same package under a higher version, then one whose default config changed too:
# repacked with dpkg-deb (what dpkg sees of an upgrade is the package, not how it was made).
repack() { # VERSION [CHANGE-THE-DEFAULT-CONFIG] -> path of the .deb
	local v=$1 dir=$WORK/repack-$1
	rm -rf "$dir"
	dpkg-deb -R "$DEB" "$dir"
	sed -i "s/^Version: .*/Version: $v/" "$dir/DEBIAN/control"
	[ -n "${2:-}" ] && printf '\n# a line the new version adds to the default\n' >>"$dir$CONF"
	dpkg-deb -b "$dir" "$WORK/${PKG}_${v}_$ARCH.deb" >/dev/null && echo "$WORK/${PKG}_${v}_$ARCH.deb"
}
stage "upgrade, same default config"
V1=$VERSION+upgrade1
D1=$(repack "$V1") || fatal "repack $V1"
dpkg -i "$D1" </dev/null >"$WORK/upgrade1.log" 2>&1 || fatal "dpkg -i $(basename "$D1") (upgrade)" "$WORK/upgrade1.log"
check "upgraded to $V1" [ "$(dpkg-query -W -f='${Version}' "$PKG")" = "$V1" ]
check "the edited conffile survived the upgrade unchanged" cmp -s "$CONF" "$WORK/edited.conf"
check "and still takes effect" bash -c 'grep -qx NCCL_IB_TIMEOUT=19 <<<"$1"' _ "$(env_of)"
check "no .dpkg-dist or .dpkg-new beside it" \
	bash -c '[ -z "$(ls /etc/oci-rdma-hook | grep -v "^oci-rdma-hook.conf$")" ]'

stage "upgrade, changed default config (--force-confold, as an unattended upgrade)"
V2=$VERSION+upgrade2
D2=$(repack "$V2" change) || fatal "repack $V2"
dpkg -i --force-confdef --force-confold "$D2" </dev/null >"$WORK/upgrade2.log" 2>&1 ||
	fatal "dpkg -i $(basename "$D2") (upgrade, changed default)" "$WORK/upgrade2.log"
check "upgraded to $V2" [ "$(dpkg-query -W -f='${Version}' "$PKG")" = "$V2" ]
check "the edited conffile survived an upgrade that changed the default" cmp -s "$CONF" "$WORK/edited.conf"
check "the new default is beside it as .dpkg-dist" grep -q "a line the new version adds" "$CONF.dpkg-dist"

stage "lintian"
wait "$LINTIAN_PID"
lintian_rc=$?
LINTIAN_PID=""
sed 's/^/# lintian: /' "$WORK/lintian.log"
check "lintian reports no error or warning (debian/$PKG.lintian-overrides explains the rest)" \
	[ "$lintian_rc" = 0 ]

# ---- 5. end-to-end tests against the installed package ---------------------------------
case $E2E in
none) E2E="" ;;
all)
	[ -n "${ORH_BUILDDIR:-}" ] || fatal "ORH_PACKAGE_E2E=all needs ORH_BUILDDIR (run through meson test)"
	E2E=$(meson introspect "$ORH_BUILDDIR" --tests | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if "e2e" in t["suite"] and t["cmd"][-1].endswith(".sh"):
        print(os.path.basename(t["cmd"][-1])[:-3])') || fatal "list meson's e2e suite"
	;;
esac
if [ -n "$E2E" ]; then
	if [ -z "${PROBE:-}" ]; then
		PROBE=$WORK/probe
		cc -O2 -static "$SRC/tests/e2e/probe.c" -o "$PROBE" || fatal "build tests/e2e/probe.c"
	fi
	if [ -z "${NO_OPENAT2:-}" ]; then
		NO_OPENAT2=$WORK/no_openat2
		cc -O2 "$SRC/tests/e2e/no_openat2.c" -o "$NO_OPENAT2" -lseccomp || fatal "build tests/e2e/no_openat2.c"
	fi
fi
for t in $E2E; do
	stage "tests/e2e/$t.sh against the installed package"
	[ -f "$SRC/tests/e2e/$t.sh" ] || fatal "tests/e2e/$t.sh exists"
	HOOK=$BIN PROBE=$PROBE NO_OPENAT2=$NO_OPENAT2 MKNODE=$SRC/tests/mknode.py \
		NODES=$SRC/tests/nodes ORH_SRCDIR=$SRC bash "$SRC/tests/e2e/$t.sh" >"$WORK/e2e-$t.log" 2>&1
	rc=$?
	grep -E '^# [0-9]+ passed' "$WORK/e2e-$t.log" | sed "s/^# /# e2e $t: /"
	if [ $rc = 77 ]; then
		echo "# e2e $t skipped: $(grep '^SKIP' "$WORK/e2e-$t.log")"
	else
		[ $rc = 0 ] || grep -E '^not ok|FAIL' "$WORK/e2e-$t.log" | sed 's/^/#   /'
		# (a script that checked nothing passes nothing: it must report a check that passed)
		check "tests/e2e/$t.sh passes with HOOK=$BIN (rc=$rc)" \
			bash -c '[ "$1" = 0 ] && grep -qE "^# [1-9][0-9]* passed, 0 failed" "$2"' _ "$rc" "$WORK/e2e-$t.log"
	fi
done

# ---- 6. remove, purge ------------------------------------------------------------------
stage "dpkg -r, dpkg --purge"
dpkg -r "$PKG" </dev/null >"$WORK/remove.log" 2>&1 || fatal "dpkg -r $PKG" "$WORK/remove.log"
check "after remove the binary is gone" [ ! -e "$BIN" ]
check "after remove the edited config is kept (until purge)" cmp -s "$CONF" "$WORK/edited.conf"
dpkg --purge "$PKG" </dev/null >"$WORK/purge.log" 2>&1 || fatal "dpkg --purge $PKG" "$WORK/purge.log"
check "after purge dpkg does not know the package" bash -c '! dpkg-query -W "$1" >/dev/null 2>&1 ||
	[ "$(dpkg-query -W -f="\${db:Status-Status}" "$1")" = not-installed ]' _ "$PKG"
check "after purge /etc/oci-rdma-hook is gone" [ ! -e /etc/oci-rdma-hook ]
check "after purge none of the package's files is left" bash -c \
	'grep -qxF "$2" "$1" || exit 1
	 while read -r f; do [ -d "$f" ] && continue; [ -e "$f" ] || [ -L "$f" ] && exit 1; done <"$1"; exit 0' \
	_ "$WORK/files" "$BIN"
check "after purge the hooks.d files are gone" \
	bash -c '[ -z "$(ls "$1" "$2" 2>/dev/null | grep oci-rdma)" ]' _ "$HOOKS_D" "$(dirname "$PRECREATE")"
INSTALLED=0

stage "done"
echo "# $PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]
