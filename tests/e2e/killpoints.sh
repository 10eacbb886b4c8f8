#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Nothing half-done: the hook and the runtime shim are killed (SIGKILL) at every point
# where they change something, and then the container's files and the host are checked.
#
# The disk changes only at system calls, so killing a process on entry to each of its
# state-changing system calls in turn (strace -e inject=NAME:signal=KILL:when=K, the
# list taken from a complete run's trace) reaches every intermediate state it can leave.
# Afterwards:
#   - /etc/nccl.conf and config.json are the original or the complete result, never
#     partial; every device node present has the right numbers;
#   - outside the container rootfs nothing is left but by design: config.json of the
#     bundle, and under /run/oci-rdma-hook/<id> only what poststop removes;
#   - a complete run after the kill gives the result of one run (twice is harmless).
# Then runc containers whose hook is killed after a random delay.
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v strace >/dev/null 2>&1 || cant_run "strace not installed"
# LeakSanitizer (sanitizer builds) cannot stop the world under ptrace: no leak check here
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
strace -qq -o /dev/null -e inject=getpid:signal=KILL:when=1 /bin/true 2>/dev/null ||
	cant_run "strace cannot inject signals here"
setup_work

make_node seed001-roce.json "$WORK/node"
write_conf "$WORK/hook.conf" "[containers]
activation = always"
write_conf "$WORK/shim.conf" "[containers]
activation = always
runtime = /bin/true"
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
ln -sf "$HOOK" "$WORK/oci-rdma-runtime"

# no_sweep: every run the same, whatever other state directories this machine holds: the
# sweep of a new state directory (at most once a minute) is marked as just run
no_sweep() {
	mkdir -p /run/oci-rdma-hook
	touch /run/oci-rdma-hook/.swept
}
# a minimal rootfs (the hook needs only /etc and /dev) and a new stand-in container for
# it (fake_ctr): what the hook bind-mounts is in that container's mount namespace, and
# goes with it
fresh_rootfs() {
	stop_fake_ctr
	no_sweep
	rm -rf "$WORK/r" "$STATE_DIR"
	mkdir -p "$WORK/r/etc" "$WORK/r/dev"
	printf 'NCCL_DEBUG=WARN\n' >"$WORK/r/etc/nccl.conf"
	fake_ctr "$WORK/r"
}
ID="orh-kill-$$"
STATE_DIR="/run/oci-rdma-hook/$ID"
# state_left: STATE_DIR holds something but the record (record.json, its temporary
# .record.json.orh-*), which poststop removes with the directory
state_left() {
	[ -e "$STATE_DIR" ] && ls -A "$STATE_DIR" | grep -qv '^\(record\.json\|\.record\.json\.orh-.*\)$'
}

# hook STAGE [STRACE-OPTS...]: the live hook on bundle $WORK/b for the stand-in; KRC
hook() {
	local stage=$1
	shift
	KRC=0
	# (in a subshell: the shell's "Killed" notice goes to /dev/null)
	(printf '{"ociVersion":"1.0.2","id":"%s","status":"creating","pid":%s,"bundle":"%s"}' \
		"$ID" "$SLEEPER" "$WORK/b" |
		strace -qq -o "$WORK/trace" "$@" "$HOOK" --sysroot "$WORK/node" \
			--config "$WORK/hook.conf" "$stage") 2>/dev/null || KRC=$?
}
# kill_points TRACE: "NAME K" for every state-changing call of a complete run
kill_points() {
	python3 - "$1" <<'EOF'
import re, sys
mut = {"openat2", "mknodat", "fchownat", "fchown", "renameat", "renameat2", "unlinkat",
       "write", "pwrite64", "fchmod", "fchmodat", "mkdirat", "fsync", "fdatasync",
       "prlimit64", "bpf", "mount", "ftruncate", "linkat", "symlinkat", "clone", "clone3",
       "fork", "setns", "umount2"}
seen = {}
for line in open(sys.argv[1]):
    m = re.match(r"(?:\d+ +)?([a-z0-9_]+)\(", line)
    if not m:
        continue
    name = m.group(1)
    seen[name] = seen.get(name, 0) + 1
    creates = name == "openat" and re.search(r"O_CREAT|O_WRONLY|O_RDWR|O_TRUNC", line)
    if name in mut or creates:
        print(name, seen[name])
EOF
}
devs_ok() { # every node in ROOTFS/dev/infiniband that is not a temporary one is right
	local f n
	for f in "$WORK/r/dev/infiniband/"*; do
		[ -e "$f" ] || continue
		n=$(basename "$f")
		case $n in .*.orh-*) continue ;; esac
		[ "$(stat -c '%F %t:%T %a' "$f")" = "character special file $(stat -c '%t:%T' "$WORK/node/dev/infiniband/$n") 666" ] || return 1
	done
}
temps_in_rootfs() { find "$WORK/r" -name '.*orh*' | wc -l; }

# ---- 1. the live hook, writable rootfs -------------------------------------------------
mkdir -p "$WORK/b"
(cd "$WORK/b" && runc spec)
python3 - "$WORK/b/config.json" "$WORK/r" <<EOF
import json, sys
c = json.load(open(sys.argv[1]))
c["root"] = {"path": sys.argv[2], "readonly": False}
$HOSTNET
json.dump(c, open(sys.argv[1], "w"), indent=1)
EOF
cp "$WORK/b/config.json" "$WORK/config.orig"
fresh_rootfs
hook createRuntime
check "live hook: a complete run succeeds" [ "$KRC" = 0 ]
cp "$WORK/r/etc/nccl.conf" "$WORK/nccl.full"
check "live hook: the complete nccl.conf has the image line and the plan" \
	bash -c 'grep -qx NCCL_DEBUG=WARN "$1" && grep -q "^NCCL_IB_HCA=" "$1"' _ "$WORK/nccl.full"
# what the kills are judged against: a complete run that did the work (else the kill
# points and the counts below would be those of a run that did nothing)
complete=no
[ "$KRC" = 0 ] && grep -q "^NCCL_IB_HCA=" "$WORK/nccl.full" && complete=yes
kill_points "$WORK/trace" >"$WORK/points"
npoints=$(wc -l <"$WORK/points")
check "live hook: $npoints kill points found (mknodat, renameat, write, ...)" \
	bash -c '[ "$1" -ge 20 ] && grep -q "^renameat " "$2" && grep -q "^mknodat " "$2"' _ "$npoints" "$WORK/points"
bad_conf=0 bad_dev=0 bad_out=0 bad_rerun=0 killed=0 temps=0
while read -r name k; do
	fresh_rootfs
	hook createRuntime -e inject="$name":signal=KILL:when="$k"
	[ "$KRC" = 137 ] && killed=$((killed + 1))
	if ! cmp -s "$WORK/r/etc/nccl.conf" "$WORK/nccl.full" &&
		[ "$(cat "$WORK/r/etc/nccl.conf")" != NCCL_DEBUG=WARN ]; then
		bad_conf=$((bad_conf + 1)); echo "# $name#$k: nccl.conf is neither original nor complete"
	fi
	devs_ok || { bad_dev=$((bad_dev + 1)); echo "# $name#$k: a wrong device node"; }
	if ! cmp -s "$WORK/b/config.json" "$WORK/config.orig" || state_left ||
		[ "$(ls -A "$WORK/b")" != config.json ]; then
		bad_out=$((bad_out + 1)); echo "# $name#$k: something left outside the rootfs"
	fi
	temps=$((temps + $(temps_in_rootfs)))
	hook createRuntime
	if [ "$KRC" != 0 ] || ! cmp -s "$WORK/r/etc/nccl.conf" "$WORK/nccl.full" || ! devs_ok ||
		[ "$(ls "$WORK/r/dev/infiniband" | wc -l)" != 9 ]; then
		bad_rerun=$((bad_rerun + 1)); echo "# $name#$k: the run after the kill did not complete the work"
	fi
done <"$WORK/points"
check "live hook: killed at each of the $npoints points ($killed by SIGKILL)" [ "$complete" = yes -a "$npoints" -gt 0 -a "$killed" = "$npoints" ]
check "live hook: nccl.conf always the original or the complete file" [ "$complete" = yes -a "$bad_conf" = 0 ]
check "live hook: every device node present has the right numbers and mode" [ "$complete" = yes -a "$bad_dev" = 0 ]
check "live hook: nothing left outside the rootfs (bundle, $STATE_DIR)" [ "$complete" = yes -a "$bad_out" = 0 ]
check "live hook: a run after each kill completes the work, once" [ "$complete" = yes -a "$bad_rerun" = 0 ]
echo "# live hook: $temps temporary names (.nccl.conf.orh-*, .NODE.orh-*) left inside the rootfs by kills"

# ---- 2. the live hook, read-only rootfs: file generated under /run, bind-mounted -------
python3 - "$WORK/b/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["root"]["readonly"] = True
json.dump(c, open(sys.argv[1], "w"), indent=1)
EOF
cp "$WORK/b/config.json" "$WORK/config.orig"
mounted_ok() { # a mount over the image file (in the container) shows the complete file
	! grep -q " $WORK/r/etc/nccl.conf " "/proc/$SLEEPER/mountinfo" ||
		cmp -s "/proc/$SLEEPER/root$WORK/r/etc/nccl.conf" "$WORK/nccl.full"
}
fresh_rootfs
hook createRuntime
check "read-only rootfs: a complete run bind-mounts the complete file" \
	bash -c '[ "$1" = 0 ] && grep -q " $2/etc/nccl.conf " "/proc/$4/mountinfo" && cmp -s "/proc/$4/root$2/etc/nccl.conf" "$3"' \
	_ "$KRC" "$WORK/r" "$WORK/nccl.full" "$SLEEPER"
complete=no
[ "$KRC" = 0 ] && grep -q " $WORK/r/etc/nccl.conf " "/proc/$SLEEPER/mountinfo" && complete=yes
kill_points "$WORK/trace" >"$WORK/points"
hook poststop
check "read-only rootfs: poststop removes $STATE_DIR" [ ! -e "$STATE_DIR" ]
npoints=$(wc -l <"$WORK/points")
bad_mount=0 bad_image=0 bad_post=0 killed=0 partial=0
while read -r name k; do
	fresh_rootfs
	hook createRuntime -e inject="$name":signal=KILL:when="$k"
	[ "$KRC" = 137 ] && killed=$((killed + 1))
	mounted_ok || { bad_mount=$((bad_mount + 1)); echo "# $name#$k: a partial file is mounted"; }
	if [ -f "$STATE_DIR/nccl.conf" ] && ! cmp -s "$STATE_DIR/nccl.conf" "$WORK/nccl.full"; then
		partial=$((partial + 1))
	fi
	[ "$(cat "$WORK/r/etc/nccl.conf")" = NCCL_DEBUG=WARN ] ||
		{ bad_image=$((bad_image + 1)); echo "# $name#$k: the image file changed"; }
	hook poststop
	if [ -e "$STATE_DIR" ] || [ "$(ls -A "$WORK/b")" != config.json ] ||
		! cmp -s "$WORK/b/config.json" "$WORK/config.orig"; then
		bad_post=$((bad_post + 1)); echo "# $name#$k: left outside the rootfs after poststop"
	fi
done <"$WORK/points"
check "read-only rootfs: killed at each of the $npoints points ($killed by SIGKILL)" [ "$complete" = yes -a "$npoints" -gt 0 -a "$killed" = "$npoints" ]
check "read-only rootfs: a mounted nccl.conf is always complete" [ "$complete" = yes -a "$bad_mount" = 0 ]
check "read-only rootfs: the image's file never changes" [ "$complete" = yes -a "$bad_image" = 0 ]
check "read-only rootfs: after poststop nothing is left under /run/oci-rdma-hook or in the bundle" [ "$complete" = yes -a "$bad_post" = 0 ]
echo "# read-only rootfs: $partial kills left a partial $STATE_DIR/nccl.conf (never mounted; poststop removes it)"
stop_fake_ctr

# ---- 3. the runtime shim's config.json edit --------------------------------------------
mkdir -p "$WORK/s"
cp "$WORK/config.orig" "$WORK/s/config.json"
cp "$WORK/s/config.json" "$WORK/s.orig"
# the shim's container: its state directory (node.json, for its nccl-conf stage) is made
# afresh at every run, and removed at the end
SHIM_STATE="/run/oci-rdma-hook/$ID-shim"
shim() { # [STRACE-OPTS...]: the shim's create on bundle $WORK/s; SRC
	SRC=0
	no_sweep
	rm -rf "$SHIM_STATE"
	(OCI_RDMA_HOOK_CONFIG="$WORK/shim.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
		strace -qq -o "$WORK/trace" "$@" "$WORK/oci-rdma-runtime" create --bundle "$WORK/s" \
		"$ID-shim" >/dev/null) 2>/dev/null || SRC=$?
}
# the first run also writes the shim's runtime cache (tests/shim-fast.sh), which later runs
# find written: the kill points are those of the run after it
shim
cp "$WORK/s.orig" "$WORK/s/config.json"
shim
check "shim: a complete run edits config.json" \
	bash -c '[ "$1" = 0 ] && grep -q '"nccl-conf"' "$2/config.json"' _ "$SRC" "$WORK/s"
complete=no
[ "$SRC" = 0 ] && grep -q '"nccl-conf"' "$WORK/s/config.json" && complete=yes
cp "$WORK/s/config.json" "$WORK/s.full"
kill_points "$WORK/trace" >"$WORK/points"
npoints=$(wc -l <"$WORK/points")
check "shim: $npoints kill points found (the temporary file's write, fsync, rename)" \
	bash -c 'grep -q "^renameat " "$1" && grep -q "^fsync " "$1"' _ "$WORK/points"
bad_json=0 bad_rerun=0 killed=0 stray=0 stray_bad=0 stray_after=0
while read -r name k; do
	cp "$WORK/s.orig" "$WORK/s/config.json"
	shim -e inject="$name":signal=KILL:when="$k"
	[ "$SRC" = 137 ] && killed=$((killed + 1))
	if ! cmp -s "$WORK/s/config.json" "$WORK/s.orig" && ! cmp -s "$WORK/s/config.json" "$WORK/s.full"; then
		bad_json=$((bad_json + 1)); echo "# $name#$k: config.json is neither original nor complete"
	fi
	others=$(ls -A "$WORK/s" | grep -vx config.json || true)
	if [ -n "$others" ]; then
		stray=$((stray + 1))
		# the only name allowed: the temporary file of orh_write_atomic
		grep -qvE '^\.config\.json\.orh-[0-9a-f]{16}$' <<<"$others" && stray_bad=$((stray_bad + 1))
		echo "# $name#$k: left in the bundle: $others"
	fi
	shim
	cmp -s "$WORK/s/config.json" "$WORK/s.full" || { bad_rerun=$((bad_rerun + 1)); echo "# $name#$k: rerun differs"; }
	[ -z "$(ls -A "$WORK/s" | grep -vx config.json || true)" ] || stray_after=$((stray_after + 1))
done <"$WORK/points"
check "shim: killed at each of the $npoints points ($killed by SIGKILL)" [ "$complete" = yes -a "$npoints" -gt 0 -a "$killed" = "$npoints" ]
check "shim: config.json always the original or the complete edit" [ "$complete" = yes -a "$bad_json" = 0 ]
check "shim: nothing but config.json's temporary file is ever left in the bundle" [ "$complete" = yes -a "$stray_bad" = 0 ]
check "shim: a run after each kill gives the edit of one run" [ "$complete" = yes -a "$bad_rerun" = 0 ]
check "shim: the next run removes what a kill left in the bundle" [ "$complete" = yes -a "$stray_after" = 0 ]
rm -rf "$SHIM_STATE"
echo "# shim: $stray of $npoints kills left a temporary .config.json.orh-* in the bundle"

# ---- 3b. the runtime shim serving alone: /etc/nccl.conf, then config.json, then the record -
# A container in the runtime's network (no namespace in the spec) and no hook: the shim
# knows its network and writes the file into the root itself.
mkdir -p "$WORK/sa/rootfs/etc"
python3 - "$WORK/config.orig" "$WORK/sa/config.json" "$WORK/sa/rootfs" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("hooks", None)
c["root"] = {"path": sys.argv[3], "readonly": False}
c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
cp "$WORK/sa/config.json" "$WORK/sa.orig"
printf 'NCCL_DEBUG=WARN\n' >"$WORK/sa.conf.orig"
ALONE_STATE="/run/oci-rdma-hook/$ID-alone"
alone() { # [STRACE-OPTS...]: the shim's create on bundle $WORK/sa; SRC
	SRC=0
	no_sweep
	rm -rf "$ALONE_STATE"
	(OCI_RDMA_HOOK_CONFIG="$WORK/shim.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
		strace -qq -o "$WORK/trace" "$@" "$WORK/oci-rdma-runtime" create --bundle "$WORK/sa" \
		"$ID-alone" >/dev/null) 2>/dev/null || SRC=$?
}
alone_reset() {
	cp "$WORK/sa.orig" "$WORK/sa/config.json"
	cp "$WORK/sa.conf.orig" "$WORK/sa/rootfs/etc/nccl.conf"
}
alone_reset
alone
complete=no
[ "$SRC" = 0 ] && ! grep -q '"nccl-conf"' "$WORK/sa/config.json" &&
	grep -q '^NCCL_IB_HCA=' "$WORK/sa/rootfs/etc/nccl.conf" && [ -f "$ALONE_STATE/record.json" ] &&
	complete=yes
check "shim alone: a complete run writes /etc/nccl.conf, config.json (no stage) and the record" \
	[ "$complete" = yes ]
cp "$WORK/sa/config.json" "$WORK/sa.full"
cp "$WORK/sa/rootfs/etc/nccl.conf" "$WORK/sa.conf.full"
kill_points "$WORK/trace" >"$WORK/points"
npoints=$(wc -l <"$WORK/points")
bad_files=0 bad_rerun=0 killed=0 window=0
while read -r name k; do
	alone_reset
	alone -e inject="$name":signal=KILL:when="$k"
	[ "$SRC" = 137 ] && killed=$((killed + 1))
	conf=other json=other
	cmp -s "$WORK/sa/rootfs/etc/nccl.conf" "$WORK/sa.conf.orig" && conf=orig
	cmp -s "$WORK/sa/rootfs/etc/nccl.conf" "$WORK/sa.conf.full" && conf=full
	cmp -s "$WORK/sa/config.json" "$WORK/sa.orig" && json=orig
	cmp -s "$WORK/sa/config.json" "$WORK/sa.full" && json=full
	if [ "$conf" = other ] || [ "$json" = other ] || [ "$conf/$json" = orig/full ]; then
		bad_files=$((bad_files + 1)); echo "# $name#$k: nccl.conf $conf, config.json $json"
	fi
	[ "$conf/$json" = full/orig ] && window=$((window + 1))
	alone
	cmp -s "$WORK/sa/config.json" "$WORK/sa.full" && cmp -s "$WORK/sa/rootfs/etc/nccl.conf" "$WORK/sa.conf.full" ||
		{ bad_rerun=$((bad_rerun + 1)); echo "# $name#$k: rerun differs"; }
done <"$WORK/points"
check "shim alone: killed at each of the $npoints points ($killed by SIGKILL)" \
	[ "$complete" = yes -a "$npoints" -gt 0 -a "$killed" = "$npoints" ]
check "shim alone: nccl.conf and config.json each the original or complete, never config.json without the file" \
	[ "$complete" = yes -a "$bad_files" = 0 ]
check "shim alone: a run after each kill gives the result of one run" [ "$complete" = yes -a "$bad_rerun" = 0 ]
rm -rf "$ALONE_STATE"
# the file is written before config.json: a kill between the two leaves the file complete
# and config.json the original (the container then starts unserved, as the engine fails or
# retries the create); a failure there that the shim sees puts the file back
echo "# shim alone: $window of $npoints kills left /etc/nccl.conf complete and config.json the original"

# ---- 4. runc, the createRuntime hook killed after a random delay -------------------------
# The delays are drawn from the hook's own run time in this build on this machine (a
# sanitizer build is several times slower): first measured in complete runs, through the
# same wrapper, then the 20 delays spread from a tenth of it to twice it, so that some runs
# are cut and some finish, at any speed.
make_rootfs "$WORK/base"
cp -a "$WORK/base" "$WORK/rr"
printf 'NCCL_DEBUG=WARN\n' >"$WORK/rr/etc/nccl.conf"
make_bundle "$WORK/br" "$WORK/rr" "$WORK/node" "$WORK/hook.conf" 'cat /etc/nccl.conf' "$HOSTNET"
# hook_wrapper DELAY: the bundle's hook.sh runs createRuntime under `timeout -s KILL DELAY`
# and appends the hook's run time in microseconds to $WORK/br/took
hook_wrapper() {
	printf '#!/bin/sh\ncase "$*" in *createRuntime) t0=$(date +%%s%%N); timeout -s KILL %s "%s" "$@" 2>>"%s"; rc=$?; echo $((($(date +%%s%%N) - t0) / 1000)) >>"%s"; exit $rc ;; esac\nexec "%s" "$@" 2>>"%s"\n' \
		"$1" "$HOOK" "$WORK/br/hook.log" "$WORK/br/took" "$HOOK" "$WORK/br/hook.log" >"$WORK/br/hook.sh"
}
hook_wrapper 60
rm -f "$WORK/br/took"
measured=0
for i in 1 2 3 4 5; do
	run_ctr "$WORK/br"
	[ "$RC" = 0 ] && grep -q "^NCCL_DEBUG=WARN" <<<"$OUT" && measured=$((measured + 1))
done
# the median of the five complete runs, in microseconds
took=$(sort -n "$WORK/br/took" 2>/dev/null | sed -n 3p)
check "runc, hook timed: 5 complete runs ($measured started), median ${took:-?} us" \
	[ "$measured" = 5 -a -n "$took" ]
took=${took:-10000}
printf 'NCCL_DEBUG=WARN\n' >"$WORK/rr/etc/nccl.conf"
started=0 failed=0 bad=0
for i in $(seq 1 20); do
	# the i-th twentieth of [0, 2 x took], a random point within it; at least 1 ms
	us=$((took * (i * 100 - RANDOM % 100) / 1000))
	[ "$us" -ge 1000 ] || us=1000
	delay=$(printf '%d.%06d' $((us / 1000000)) $((us % 1000000)))
	# the createRuntime hook alone is killed: poststop, which cleans up after it, runs whole
	hook_wrapper "$delay"
	run_ctr "$WORK/br"
	if [ "$RC" = 0 ]; then started=$((started + 1)); else failed=$((failed + 1)); fi
	if ! cmp -s "$WORK/rr/etc/nccl.conf" "$WORK/nccl.full" && [ "$(cat "$WORK/rr/etc/nccl.conf")" != NCCL_DEBUG=WARN ]; then
		bad=$((bad + 1)); echo "# run $i (kill after ${delay}s): nccl.conf partial"
	fi
	[ "$RC" != 0 ] || grep -q "^NCCL_DEBUG=WARN" <<<"$OUT" || { bad=$((bad + 1)); echo "# run $i: container saw no image line"; }
done
echo "# runc with a killed hook: $started started, $failed failed to start"
# (of runs some of which started: 20 refused starts would leave every file as it was)
check "runc, hook killed at random: nccl.conf never partial ($started started)" [ "$started" -gt 0 -a "$bad" = 0 ]
check "runc, hook killed at random: no container left" [ -z "$(runc list -q | grep "^orh-e2e-$$-")" ]
check "runc, hook killed at random: nothing left under /run/oci-rdma-hook" \
	bash -c '! ls /run/oci-rdma-hook/ 2>/dev/null | grep -q "^orh-e2e-$1-"' _ "$$"

finish
