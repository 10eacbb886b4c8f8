#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `oci-rdma-hook configure`, checked by the engines themselves where this machine has them:
#   containerd 1.6: `containerd config dump` of the changed config (the main file's block,
#     or the drop-in it imports) shows the handler, and every other setting as before; configure
#     writes the 2.x form (version = 3) too, checked against containerd 2.x's documented
#     schema (e2e-fleet.sh runs containerd 2.x itself);
#   podman: its debug log reads hooks from the package's own directory (the drop-in);
#   CRI-O (not packaged here): the drop-in parses as TOML, with the packaging's paths and
#     hooks_dir added to rather than replaced;
#   docker: tests/e2e/e2e-docker-shim.sh registers its runtime with configure and reloads.
# Each engine: --dry-run writes nothing, a second run changes nothing, --undo gives back
# the files byte for byte (docker: key for key). Runs on a root take turns through a lock
# file nobody else may open (nobody locking the root directory stalls nothing; a holder is
# named after a few seconds); --engine-config goes clean into containerd's imports ('..'
# refused); a link to nothing is named as such; renames racing openat2 fail no run. Then the hooks.d files a `meson install`
# puts where CRI-O, buildah or NRI look name no stage outside the OCI ones; buildah shows
# why (a precreate file there stops its RUN).
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v containerd >/dev/null 2>&1 || cant_run "containerd not installed"
command -v podman >/dev/null 2>&1 || cant_run "podman not installed"
setup_work
PODMAN_DROPIN=/etc/containers/containers.conf.d/99-oci-rdma-hook.conf
# podman here: no default ulimits (raising RLIMIT_NOFILE needs CAP_SYS_RESOURCE)
PODMAN_ULIMITS=/etc/containers/containers.conf.d/00-orh-e2e-$$.conf
undo_podman() {
	[ -f "$WORK/podman-configured" ] && "$HOOK" configure --engine podman --undo >/dev/null 2>&1
	rm -f "$PODMAN_ULIMITS"
}
trap 'rc=$?; undo_podman; cleanup_work $rc' EXIT

SHIM=/usr/bin/oci-rdma-runtime # as written into the files; not executed here
cfg() { "$HOOK" --config /etc/oci-rdma-hook/oci-rdma-hook.conf configure --shim "$SHIM" "$@"; }
cfg_cmd() { cfg "$@"; }
export -f cfg cfg_cmd
export HOOK SHIM
# snapshot DIR: every file under DIR with its content, for comparing trees byte for byte;
# it starts with the number of files, so that it is never empty (a DIR that cannot be
# read gives a line naming it: two snapshots of nothing are not alike)
snapshot() {
	(cd "$1" && echo "$(find . -type f | wc -l) files" && find . -type f | sort | xargs -r sha256sum) ||
		echo "no directory $1"
}
# toml FILE PYTHON: run PYTHON with t = the parsed file (tomllib; tomli before Python 3.11)
tomlimport='try: import tomllib
except ImportError: import tomli as tomllib'
toml() { python3 -c "import sys
$tomlimport
t = tomllib.load(open(sys.argv[1], 'rb')); $2" "$1"; }

# idempotent LABEL ROOT ARGS...: --dry-run prints a change and writes nothing; the run
# changes the tree; a second run and its --dry-run change nothing
idempotent() {
	local what=$1 root=$2 before out
	shift 2
	before=$(snapshot "$root")
	out=$(cfg --root "$root" "$@" --dry-run 2>/dev/null)
	check "$what: --dry-run prints what would change" grep -q '^# /.*: \(append\|create\)' <<<"$out"
	check "$what: --dry-run writes nothing" [ "$before" = "$(snapshot "$root")" ]
	check "$what: configure succeeds" bash -c '"$@" >/dev/null 2>&1' _ cfg_cmd --root "$root" "$@"
	check "$what: configure changed files" [ "$before" != "$(snapshot "$root")" ]
	before=$(snapshot "$root")
	out=$(cfg --root "$root" "$@" 2>&1)
	check "$what: a second run changes nothing ($out)" \
		bash -c '[ "$1" = "$(snapshot "$2")" ] && grep -q "nothing to change" <<<"$3"' _ \
		"$before" "$root" "$out"
	check "$what: and its --dry-run prints nothing (and exits 0)" \
		bash -c 'out=$("$@" 2>/dev/null) && [ -z "$out" ]' _ cfg_cmd --root "$root" "$@" --dry-run
}
export -f snapshot

# ---- containerd 1.6: its own default config, with the systemd cgroup driver ----
R=$WORK/cd
mkdir -p "$R/etc/containerd"
containerd config default >"$R/etc/containerd/config.toml"
grep -q '^version = 2' "$R/etc/containerd/config.toml" || cant_run "containerd config default is not version 2"
sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' "$R/etc/containerd/config.toml"
printf '# the operator'"'"'s comment\n' >>"$R/etc/containerd/config.toml"
cp -a "$R" "$WORK/cd.orig"
# dump ROOT: containerd's merged config of ROOT's /etc/containerd (a private mount namespace
# where it is /etc/containerd, so that its imports resolve as on the node)
dump() {
	unshare -m bash -c 'mount --make-rprivate / && mount --bind "$0/etc/containerd" /etc/containerd &&
		exec containerd --config /etc/containerd/config.toml config dump' "$1" 2>"$WORK/dump.err"
}
export -f dump
export WORK
mkdir -p /etc/containerd
dump "$R" >"$WORK/dump.before" || cant_run "containerd config dump: $(cat "$WORK/dump.err")"
idempotent "containerd" "$R" --engine containerd
dump "$R" >"$WORK/dump.after"
check "containerd config dump accepts the changed config ($(cat "$WORK/dump.err"))" [ -s "$WORK/dump.after" ]
check "containerd's dump has handler rdma: runc shim, the pod annotations, BinaryName = the shim, SystemdCgroup as runc's" \
	toml "$WORK/dump.after" '
r = t["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
assert r["rdma"]["runtime_type"] == "io.containerd.runc.v2", r["rdma"]
assert r["rdma"]["pod_annotations"] == ["oci-rdma-hook/*"], r["rdma"]
assert r["rdma"]["options"]["BinaryName"] == "/usr/bin/oci-rdma-runtime", r["rdma"]
assert r["rdma"]["options"]["SystemdCgroup"] is True and r["runc"]["options"]["SystemdCgroup"] is True'
check "containerd's dump: every other setting as before" python3 -c '
import sys
try:
    import tomllib
except ImportError:  # Python 3.10: tomli, the same parser
    import tomli as tomllib
a, b = (tomllib.load(open(f, "rb")) for f in sys.argv[1:3])
del b["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["rdma"]
a.pop("imports", None), b.pop("imports", None)  # the files read, which now include ours
sys.exit(a != b)' "$WORK/dump.before" "$WORK/dump.after"
# containerd 1.x (config version 2), nothing imported: the handler in configure's block at
# the end of the operator's file, which is otherwise as it was; no drop-in
check "containerd: the operator's file gained configure's block with the handler alone" \
	bash -c 'n=$(stat -c %s "$1") && cmp -n "$n" "$1" "$2" && [ ! -e "$3" ] &&
		[ "$(tail -c +$((n + 1)) "$2" | grep -c "^# [<>]\{3\} oci-rdma-hook configure --engine containerd --handler rdma$\|^\[.*runtimes\.rdma\(\.options\)\?\]$")" = 4 ]' _ \
	"$WORK/cd.orig/etc/containerd/config.toml" "$R/etc/containerd/config.toml" \
	"$R/etc/containerd/conf.d"
check "containerd: runc's handler is the default: no runtime block in the node config" \
	[ ! -e "$R/etc/oci-rdma-hook/oci-rdma-hook.conf" ]
check "containerd: --undo succeeds" cfg --root "$R" --engine containerd --undo
check "containerd: --undo gives back the tree byte for byte" [ "$(snapshot "$WORK/cd.orig")" = "$(snapshot "$R")" ]

# a handler of that name already there: refused, naming the file and the line
cfg --root "$R" --engine containerd --handler runc >/dev/null 2>"$WORK/err" && rc=0 || rc=$?
check "containerd: an existing handler is refused with the file and line ($(cat "$WORK/err"))" \
	bash -c '[ "$1" = 2 ] && grep -q "/etc/containerd/config.toml:[0-9]*: runtime handler .runc. is defined already" "$2"' _ "$rc" "$WORK/err"
check "containerd: the refused run wrote nothing" [ "$(snapshot "$WORK/cd.orig")" = "$(snapshot "$R")" ]

# no config.toml at all: a version 2 file, read by 1.x and migrated by 2.x; --undo removes it
R=$WORK/cd-none
mkdir -p "$R"
idempotent "containerd without a config" "$R" --engine containerd
check "containerd config dump reads the new files" bash -c 'dump "$1" | grep -q "runtimes.rdma\]"' _ "$R"
check "the new file is version = 2, then configure's block saying it made the file" \
	bash -c '[ "$(head -n 1 "$1")" = "version = 2" ] && sed -n 3p "$1" | grep -qx "# >>> oci-rdma-hook configure --engine containerd --handler rdma (new file)"' _ "$R/etc/containerd/config.toml"
cfg --root "$R" --engine containerd --undo >/dev/null 2>&1
check "containerd without a config: --undo removes the file it made" \
	bash -c '[ -d "$1" ] && [ -z "$(find "$1" -type f)" ]' _ "$R"

# the GPU Operator's node: the default handler runs the NVIDIA runtime, which the shim
# must then execute (a block of the node config); containerd 2.x's config version 3
R=$WORK/cd-gpu
mkdir -p "$R/etc/containerd" "$R/etc/oci-rdma-hook"
cat >"$R/etc/containerd/config.toml" <<'EOF'
version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'nvidia'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]
  runtime_type = 'io.containerd.runc.v2'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
  BinaryName = '/usr/local/nvidia/toolkit/nvidia-container-runtime'
  SystemdCgroup = true
EOF
printf '[containers]\nactivation = devices\n' >"$R/etc/oci-rdma-hook/oci-rdma-hook.conf"
cp -a "$R" "$WORK/cd-gpu.orig"
idempotent "containerd 2.x with the NVIDIA runtime" "$R" --engine containerd
check "containerd 2.x: the handler in the version 3 table of the drop-in, as its documented schema has it" \
	toml "$R/etc/containerd/conf.d/99-oci-rdma-hook.toml" '
r = t["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
assert t["version"] == 3 and "io.containerd.grpc.v1.cri" not in t["plugins"], t
assert r["rdma"] == {"runtime_type": "io.containerd.runc.v2", "pod_annotations": ["oci-rdma-hook/*"],
    "options": {"BinaryName": "/usr/bin/oci-rdma-runtime", "SystemdCgroup": True}}, r["rdma"]'
mkdir -p "$WORK/empty"
check "the node config with the block still loads" bash -c '"$1" --config "$2" --sysroot "$3" detect >/dev/null 2>&1' \
	_ "$HOOK" "$R/etc/oci-rdma-hook/oci-rdma-hook.conf" "$WORK/empty"
check "the node config's runtime is the GPU Operator's" bash -c \
	'grep -qx "runtime = /usr/local/nvidia/toolkit/nvidia-container-runtime" "$1" && grep -qx "activation = devices" "$1"' \
	_ "$R/etc/oci-rdma-hook/oci-rdma-hook.conf"
cfg --root "$R" --engine containerd --undo >/dev/null 2>&1
check "containerd 2.x: --undo gives back both files byte for byte" [ "$(snapshot "$WORK/cd-gpu.orig")" = "$(snapshot "$R")" ]

# ---- CRI-O (not packaged for Debian 12): its packaging's paths, hooks_dir added to ----
R=$WORK/crio
mkdir -p "$R/usr/libexec/crio" "$R/etc/crio/crio.conf.d"
for b in crun runc conmon; do
	printf '#!/bin/sh\n' >"$R/usr/libexec/crio/$b"
	chmod 755 "$R/usr/libexec/crio/$b"
done
printf '[crio.runtime]\nhooks_dir = ["/etc/site/hooks.d"]\n' >"$R/etc/crio/crio.conf.d/10-site.conf"
cp -a "$R" "$WORK/crio.orig"
idempotent "CRI-O" "$R" --engine crio
check "CRI-O: the drop-in parses; handler rdma runs the shim on crun's root; conmon from the packaging; hooks_dir keeps the node's list" \
	toml "$R/etc/crio/crio.conf.d/99-oci-rdma-hook.conf" '
h = t["crio"]["runtime"]["runtimes"]["rdma"]
assert h == {"runtime_path": "/usr/bin/oci-rdma-runtime", "runtime_type": "oci",
             "runtime_root": "/run/crun", "monitor_path": "/usr/libexec/crio/conmon"}, h
d = t["crio"]["runtime"]["hooks_dir"]
assert d[0] == "/etc/site/hooks.d" and len(d) == 2 and d[1].endswith("/containers/oci/hooks.d"), d'
check "CRI-O: the shim executes the packaging's crun" \
	grep -qx "runtime = /usr/libexec/crio/crun" "$R/etc/oci-rdma-hook/oci-rdma-hook.conf"
cfg --root "$R" --engine crio --undo >/dev/null 2>&1
check "CRI-O: --undo gives back the tree byte for byte" [ "$(snapshot "$WORK/crio.orig")" = "$(snapshot "$R")" ]

# ---- one run at a time on a root, which no other user can stall ----
R=$WORK/lock
mkdir -p "$R/run" "$R/etc/containerd"
chmod 755 "$WORK" "$R"
LOCKF=$R/run/.oci-rdma-hook-configure.lock
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
# (a holder takes the lock, then becomes the sleep: one process, which a kill ends)
"${NOBODY[@]}" bash -c 'exec 9<"$1" && flock 9 && exec sleep 30' _ "$R" &
NP=$!
sleep 0.5
timeout 20 bash -c '"$@" >/dev/null 2>&1' _ cfg_cmd --root "$R" --engine containerd && rc=0 || rc=$?
kill "$NP" 2>/dev/null || true
wait "$NP" 2>/dev/null || true
check "a lock on the root directory taken by nobody stalls no configure (rc $rc; 124: stalled)" [ "$rc" = 0 ]
check "a run leaves no lock file behind" [ ! -e "$LOCKF" ]
"${NOBODY[@]}" flock -n "$LOCKF" true 2>"$WORK/err" && rc=0 || rc=$?
check "nobody cannot make the lock file to lock it ($(cat "$WORK/err"))" \
	bash -c '[ "$1" != 0 ] && grep -q "Permission denied" "$2" && [ ! -e "$3" ]' _ "$rc" "$WORK/err" "$LOCKF"
# another run holds it: root's file, mode 0600, as configure makes it
install -m 600 /dev/null "$LOCKF"
python3 -c 'import fcntl, os, sys, time
fcntl.flock(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX)
time.sleep(10)' "$LOCKF" &
FP=$!
sleep 0.5
"${NOBODY[@]}" flock -n "$LOCKF" true 2>"$WORK/err" && rc=0 || rc=$?
check "nobody cannot open the lock file another run holds ($(cat "$WORK/err"))" \
	bash -c '[ "$1" != 0 ] && grep -q "Permission denied" "$2"' _ "$rc" "$WORK/err"
OUT=$("${NOBODY[@]}" "$HOOK" configure --shim "$SHIM" --root "$R" --engine containerd --undo --dry-run 2>&1) && rc=0 || rc=$?
check "nobody's --dry-run reads without the lock it may not open (rc $rc: $OUT)" \
	bash -c '[ "$1" = 0 ] && grep -q "^# .*/etc/containerd/config.toml: remove" <<<"$2"' _ "$rc" "$OUT"
T0=$(date +%s%N)
cfg --root "$R" --engine containerd --undo >/dev/null 2>"$WORK/err" && rc=0 || rc=$?
T=$((($(date +%s%N) - T0) / 1000000))
kill "$FP" 2>/dev/null || true
wait "$FP" 2>/dev/null || true
check "a run holding the lock: configure waits, then gives up within the bound naming the holder's pid $FP and the lock (rc $rc after $T ms: $(cat "$WORK/err"))" \
	bash -c '[ "$1" = 1 ] && [ "$2" -ge 4000 ] && [ "$2" -lt 9000 ] && grep -qF "$3" "$4" && grep -qF "pid $5;" "$4"' \
	_ "$rc" "$T" "$LOCKF" "$WORK/err" "$FP"
check "once it is let go, the run succeeds, and removes the lock file" \
	bash -c 'l=$1; shift; "$@" >/dev/null 2>&1 && [ ! -e "$l" ]' _ "$LOCKF" cfg_cmd --root "$R" --engine containerd --undo

# ---- --engine-config as containerd reads it in its imports; links to nothing ----
# (a file the main file imports holds a CRI table, which on containerd 1.x replaces the main
# file's: the drop-in carries it, and its glob goes into the imports)
R=$WORK/cd-path
mkdir -p "$R/etc/containerd"
printf 'version = 2\nimports = ["/etc/containerd/site.toml"]\n' >"$R/etc/containerd/config.toml"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n' \
	>"$R/etc/containerd/site.toml"
cfg --root "$R" --engine containerd --engine-config /etc/containerd/../containerd/config.toml \
	>/dev/null 2>"$WORK/err" && rc=0 || rc=$?
check "an --engine-config with '..' is refused ($(cat "$WORK/err"))" \
	bash -c '[ "$1" = 2 ] && grep -q "'"'..'"' component" "$2" && [ ! -e "$3" ]' _ "$rc" "$WORK/err" \
	"$R/etc/containerd/conf.d"
check "an --engine-config with '.' and '//' is taken" \
	cfg --root "$R" --engine containerd --engine-config /etc//containerd/./config.toml
check "what goes into containerd's imports is the clean path ($(grep '^imports' "$R/etc/containerd/config.toml"))" \
	grep -qx 'imports = \["/etc/containerd/site.toml", "/etc/containerd/conf.d/\*.toml"\]' \
	"$R/etc/containerd/config.toml"
check "containerd's dump reads the handler through that import" \
	bash -c 'dump "$1" | grep -q "runtimes.rdma\]"' _ "$R"
R=$WORK/cd-dangling
mkdir -p "$R/etc"
ln -s ../nowhere "$R/etc/containerd"
cfg --root "$R" --engine containerd >/dev/null 2>"$WORK/err" && rc=0 || rc=$?
check "a link to nothing is named as such, not as a loop ($(cat "$WORK/err"))" \
	bash -c '[ "$1" = 1 ] && grep -qF "'"'/etc/containerd' is a symbolic link to '../nowhere', which does not exist"'" "$2"' \
	_ "$rc" "$WORK/err"

# ---- renames anywhere while configure resolves a relative link's "..": no run fails ----
R=$WORK/cd-race
mkdir -p "$R/srv/cd" "$R/etc" "$R/a"
ln -s ../srv/cd "$R/etc/containerd"
printf 'version = 2\n' >"$R/srv/cd/config.toml"
# (the renames on one CPU, the runs on another, where there are two)
PIN0=() PIN1=()
[ "$(nproc)" -lt 2 ] || { PIN0=(taskset -c 0); PIN1=(taskset -c 1); }
"${PIN0[@]}" python3 -c 'import os, sys
a, b = sys.argv[1] + "/a", sys.argv[1] + "/b"
while True:
    os.rename(a, b); os.rename(b, a)' "$R" &
RP=$!
FAILED=$("${PIN1[@]}" bash -c 'f=0
for i in $(seq 300); do
	cfg --root "$1" --engine containerd >/dev/null 2>"$2/race.err" || { f=$((f + 1)); cp "$2/race.err" "$2/race.last"; }
done
echo "$f"' _ "$R" "$WORK")
kill "$RP" || true
wait "$RP" 2>/dev/null || true
check "300 runs while a directory is renamed in a loop: $FAILED failed ($(cat "$WORK/race.last" 2>/dev/null))" [ "$FAILED" = 0 ]

# ---- podman: the drop-in in this machine's /etc, read by the real podman ----
[ ! -e "$PODMAN_DROPIN" ] || cant_run "$PODMAN_DROPIN exists already (an installed oci-rdma-hook?)"
OWN=$("$HOOK" configure --engine podman --dry-run 2>/dev/null | sed -n 's/^hooks_dir = \[.*"\([^"]*oci-rdma-hook\/hooks.d\)"\]$/\1/p')
check "podman: --dry-run names the package's own hooks directory ($OWN)" [ -n "$OWN" ]
check "podman: --dry-run wrote nothing" [ ! -e "$PODMAN_DROPIN" ]
touch "$WORK/podman-configured"
check "podman: configure succeeds" "$HOOK" configure --engine podman
check "podman: a second run changes nothing" bash -c '"$1" configure --engine podman 2>&1 | grep -q "nothing to change"' _ "$HOOK"
make_rootfs "$WORK/rootfs"
printf '[containers]\ndefault_ulimits = []\n' >"$PODMAN_ULIMITS"
RC=0
OUT=$(podman --runtime runc --cgroup-manager cgroupfs --root "$WORK/storage" --runroot "$WORK/runroot" \
	--storage-driver vfs --log-level=debug run --rm --network none \
	--rootfs "$WORK/rootfs" /bin/echo podman-ran 2>"$WORK/podman.log") || RC=$?
check "podman runs a container with the drop-in (rc $RC: $(grep -i error "$WORK/podman.log" | tail -2))" \
	bash -c '[ "$1" = 0 ] && grep -qx podman-ran <<<"$2"' _ "$RC" "$OUT"
check "podman's debug log reads hooks from $OWN" grep -qF "reading hooks from $OWN\"" "$WORK/podman.log"
check "podman still reads the default directory" grep -qF 'reading hooks from /usr/share/containers/oci/hooks.d"' "$WORK/podman.log"
check "podman: --undo succeeds" "$HOOK" configure --engine podman --undo
check "podman: --undo removes the drop-in" [ ! -e "$PODMAN_DROPIN" ]
rm -f "$WORK/podman-configured"

# ---- the hooks.d files an install puts where CRI-O, buildah and NRI look ----
STAGE=$WORK/stage
if meson install -C "$ORH_BUILDDIR" --destdir "$STAGE" --no-rebuild >"$WORK/install.log" 2>&1; then
	check "meson install puts the precreate registration in the package's own directory" \
		bash -c 'find "$1" -path "*/oci-rdma-hook/hooks.d/oci-rdma-hook-precreate.json" | grep -q .' _ "$STAGE"
	check "every installed hooks.d file in a containers/oci/hooks.d directory names only OCI stages" python3 -c '
import glob, json, sys
known = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"}
files = glob.glob(sys.argv[1] + "/**/containers/oci/hooks.d/*.json", recursive=True)
bad = {f: json.load(open(f))["stages"] for f in files if not set(json.load(open(f))["stages"]) <= known}
sys.exit("%s" % bad if bad or len(files) != 2 else 0)' "$STAGE"
else
	not_ok "meson install --destdir: $(tail -3 "$WORK/install.log")"
fi
if command -v buildah >/dev/null 2>&1; then
	# why: buildah loads hooks with no extension stage, as CRI-O and NRI do
	# (the shipped file, run by this build: a file whose hook binary is absent is skipped)
	mkdir -p "$WORK/ctx"
	hooks_d "$WORK/pre.d" "$HOOK" /dev/null oci-rdma-hook-precreate
	tar -C "$WORK/rootfs" -cf "$WORK/ctx/rootfs.tar" .
	printf 'FROM scratch\nADD rootfs.tar /\nRUN echo built\n' >"$WORK/ctx/Containerfile"
	B=(buildah --root "$WORK/bstorage" --runroot "$WORK/brunroot" --storage-driver vfs)
	"${B[@]}" build --isolation oci --runtime runc --hooks-dir "$WORK/pre.d" \
		-f "$WORK/ctx/Containerfile" "$WORK/ctx" >"$WORK/buildah.log" 2>&1 && rc=0 || rc=$?
	check "buildah refuses a hooks directory holding the precreate file (unknown stage)" \
		bash -c '[ "$1" != 0 ] && grep -q "unknown stage \"precreate\"" "$2"' _ "$rc" "$WORK/buildah.log"
	"${B[@]}" rm -a >/dev/null 2>&1 || true
fi

finish
