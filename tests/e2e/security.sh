#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Attacks by a hostile image on the hook, each of which must fail with the host file or
# directory untouched. Every attack runs twice: with openat2, and with openat2 forced to
# ENOSYS by a seccomp filter (tests/e2e/no_openat2.c) so that the component-walk
# fallback is what resolves paths.
#
# Most attacks call the hook directly with an OCI state whose pid is a stand-in for the
# container (fake_ctr in lib.sh: its own mount namespace with the rootfs bind-mounted onto
# itself, as runc leaves it before pivot_root; the hook works on the rootfs path): that is
# faster than runc, lets the race run hundreds of times, and reaches image paths that runc
# hides (its /dev tmpfs). Two attacks also run through runc.
#
# Then which process: a pid that is a host process, another container, or a number reused
# while the hook runs gets nothing.
. "$(dirname "$0")/lib.sh"

: "${NO_OPENAT2:?NO_OPENAT2 not set}"
need_root_runc
setup_work

make_rootfs "$WORK/base"
make_node seed001-roce.json "$WORK/node"
write_conf "$WORK/hook.conf" "[containers]
activation = always"
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'

# host-side targets an escape would hit
mkdir -p "$WORK/host/etc" "$WORK/host/dev"
echo "host secret" >"$WORK/host/file"
echo "host etc" >"$WORK/host/etc/keep"
host_state() {
	(cd "$WORK/host" && find . -printf '%p %y %s\n' | sort && sha256sum file etc/keep)
}
HOST0=$(host_state)
host_untouched() { [ "$(host_state)" = "$HOST0" ]; }
# relative link text that climbs out of ROOTFS/etc (or /dev) to the host path
up() { printf '../../../../../../../../../../..%s' "$1"; }

# hook_direct ROOTFS MODE: run the createRuntime hook on ROOTFS; MODE native|fallback.
# Sets HRC (exit status) and HLOG (its stderr).
N=0
hook_direct() {
	local rootfs=$1 mode=$2 b
	N=$((N + 1))
	b="$WORK/direct-$N"
	make_bundle "$b" "$rootfs" "$WORK/node" "$WORK/hook.conf" true "$HOSTNET"
	fake_ctr "$rootfs"
	local prefix=()
	[ "$mode" = fallback ] && prefix=("$NO_OPENAT2")
	HRC=0
	printf '{"ociVersion":"1.0.2","id":"orh-sec-%s-%s","status":"creating","pid":%s,"bundle":"%s"}' \
		"$$" "$N" "$SLEEPER" "$b" |
		timeout 60 "${prefix[@]}" "$HOOK" --sysroot "$WORK/node" --config "$WORK/hook.conf" \
			createRuntime 2>"$b/direct.log" || HRC=$?
	HLOG=$(cat "$b/direct.log")
	stop_fake_ctr
}

# fresh_rootfs: $WORK/r, a new copy of the clean rootfs
fresh_rootfs() {
	rm -rf "$WORK/r"
	cp -a "$WORK/base" "$WORK/r"
}

# plant_link abs|rel TARGET PATH: a fresh rootfs where PATH (under $WORK/r, replaced if
# there) is a symlink to TARGET on the host, absolute or relative
plant_link() {
	fresh_rootfs
	rm -rf "$WORK/r/$3"
	if [ "$1" = abs ]; then ln -s "$2" "$WORK/r/$3"; else ln -s "$(up "$2")" "$WORK/r/$3"; fi
}

fallback_used() {
	[ "$1" != fallback ] || grep -q "without openat2" <<<"$HLOG"
}

for mode in native fallback; do
	# -- sanity: the hook does work on a clean rootfs in this mode
	fresh_rootfs
	hook_direct "$WORK/r" $mode
	check "[$mode] clean rootfs: hook succeeds" [ "$HRC" = 0 ]
	check "[$mode] clean rootfs: nccl.conf written" grep -q "^NCCL_IB_HCA=" "$WORK/r/etc/nccl.conf"
	check "[$mode] clean rootfs: uverbs1 created" [ -c "$WORK/r/dev/infiniband/uverbs1" ]
	check "[$mode] the fallback was used when forced" fallback_used $mode

	# -- /etc is a symlink to a host directory (absolute, then relative)
	for how in abs rel; do
		plant_link $how "$WORK/host/etc" etc
		hook_direct "$WORK/r" $mode
		check "[$mode] /etc -> host dir ($how): host untouched" host_untouched
		check "[$mode] /etc -> host dir ($how): the write stayed in the rootfs" \
			[ -f "$WORK/r$WORK/host/etc/nccl.conf" ]
	done

	# -- /etc/nccl.conf is a symlink to a host file
	for how in abs rel; do
		plant_link $how "$WORK/host/file" etc/nccl.conf
		hook_direct "$WORK/r" $mode
		check "[$mode] /etc/nccl.conf -> host file ($how): host untouched" host_untouched
		check "[$mode] /etc/nccl.conf -> host file ($how): refused as a symlink" \
			grep -q "a symlink" <<<"$HLOG"
		check "[$mode] /etc/nccl.conf -> host file ($how): the link is left as it was" \
			[ -L "$WORK/r/etc/nccl.conf" ]
	done

	# -- /dev/infiniband is a symlink out of the rootfs
	for how in abs rel; do
		plant_link $how "$WORK/host/dev" dev/infiniband
		hook_direct "$WORK/r" $mode
		check "[$mode] /dev/infiniband -> host dir ($how): host untouched" host_untouched
		check "[$mode] /dev/infiniband -> host dir ($how): nodes stayed in the rootfs" \
			[ -c "$WORK/r$WORK/host/dev/uverbs1" ]
	done

	# -- a FIFO or a directory at /etc/nccl.conf
	fresh_rootfs; mkfifo "$WORK/r/etc/nccl.conf"
	hook_direct "$WORK/r" $mode
	check "[$mode] FIFO at /etc/nccl.conf: the hook returns (no hang)" [ "$HRC" != 124 ]
	check "[$mode] FIFO at /etc/nccl.conf: refused" grep -q "a FIFO" <<<"$HLOG"
	check "[$mode] FIFO at /etc/nccl.conf: still a FIFO" [ -p "$WORK/r/etc/nccl.conf" ]
	fresh_rootfs; mkdir "$WORK/r/etc/nccl.conf"
	hook_direct "$WORK/r" $mode
	check "[$mode] directory at /etc/nccl.conf: refused" grep -q "a directory" <<<"$HLOG"
	check "[$mode] directory at /etc/nccl.conf: left empty" \
		[ -d "$WORK/r/etc/nccl.conf" -a -z "$(ls -A "$WORK/r/etc/nccl.conf")" ]

	# -- symlinks swapped in a loop while the hook runs
	fresh_rootfs
	mkdir -p "$WORK/r/swap"
	echo "NCCL_DEBUG=INFO" >"$WORK/r/swap/conf"
	ln -s "$WORK/host/file" "$WORK/r/swap/conflink"
	mkdir "$WORK/r/swap/ibdir"
	ln -s "$WORK/host/dev" "$WORK/r/swap/iblink"
	ln -s "$WORK/host/etc" "$WORK/r/swap/etclink"
	cp "$WORK/r/swap/conf" "$WORK/r/etc/nccl.conf"
	mkdir "$WORK/r/dev/infiniband"
	python3 - "$WORK/r" "$WORK/host/file" "$WORK/host/dev" >"$WORK/swapper.log" 2>&1 <<'EOF' &
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
r = sys.argv[1]
links = sys.argv[2:4]
pairs = [(r + "/etc/nccl.conf", r + "/swap/conflink"),
         (r + "/dev/infiniband", r + "/swap/iblink")]
n = 0
while True:
    for a, b in pairs:
        if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
    n += 1
    # a hook run that renames its file over the link destroys it: plant it again
    for (a, b), target in zip(pairs[:1], links[:1]):
        if not os.path.islink(a) and not os.path.islink(b):
            os.symlink(target, r + "/swap/tmplink")
            os.rename(r + "/swap/tmplink", b)
    if n == 1:
        open(r + "/swap/started", "w").close()
EOF
	SWAPPER=$!
	for i in $(seq 1 100); do
		[ -e "$WORK/r/swap/started" ] && break
		sleep 0.1
	done
	check "[$mode] the swapper runs" [ -e "$WORK/r/swap/started" ]
	races=0 saw_link=0
	for i in $(seq 1 60); do
		hook_direct "$WORK/r" $mode
		races=$((races + 1))
		if grep -q "a symlink" <<<"$HLOG"; then saw_link=$((saw_link + 1)); fi
	done
	kill $SWAPPER 2>/dev/null || true
	wait $SWAPPER 2>/dev/null || true
	check "[$mode] $races hook runs against swapping symlinks: host untouched" host_untouched
	check "[$mode] swapping symlinks: no device node leaked to the host dir" \
		[ -z "$(ls -A "$WORK/host/dev")" ]
	check "[$mode] the swap was live: $saw_link of $races runs met the symlink" [ "$saw_link" -gt 0 ]
done

# -- the same attacks through runc (createRuntime in the container's mount namespace)
for how in abs rel; do
	plant_link $how "$WORK/host/file" etc/nccl.conf
	make_bundle "$WORK/rb-$how" "$WORK/r" "$WORK/node" "$WORK/hook.conf" 'echo started' "$HOSTNET"
	run_ctr "$WORK/rb-$how"
	check "[runc] /etc/nccl.conf -> host file ($how): container starts (on_error=warn)" \
		grep -qx started <<<"$OUT"
	check "[runc] /etc/nccl.conf -> host file ($how): host untouched" host_untouched
	check "[runc] /etc/nccl.conf -> host file ($how): refusal logged" \
		grep -q "a symlink" "$WORK/rb-$how/hook.log"
done
plant_link abs "$WORK/host/etc" etc
make_bundle "$WORK/rb-etc" "$WORK/r" "$WORK/node" "$WORK/hook.conf" 'cat /etc/nccl.conf' "$HOSTNET"
run_ctr "$WORK/rb-etc"
check "[runc] /etc -> host dir: the container sees its nccl.conf" grep -q "^NCCL_IB_HCA=" <<<"$OUT"
check "[runc] /etc -> host dir: host untouched" host_untouched

# -- which process: only the container the runtime is creating from the bundle ----------
# The state's pid is checked before anything is done (src/container/target.c): a host
# process, another container, a process with a mount namespace of its own but without the
# bundle's rootfs mounted in it, and a pid whose container is gone and whose number an
# unrelated process took while the hook ran get nothing: not their devices cgroup, not
# their memlock, no file in any rootfs. The victims sit in a devices cgroup (v1) that
# allows nothing and have a 64 KiB soft memlock, so that a grant or a raise would show.
write_conf "$WORK/fail.conf" "[containers]
activation = annotation
on_error = fail"
ASK="c['annotations'] = {'oci-rdma-hook/enable': 'true'}"
DEVCG=/sys/fs/cgroup/devices
VCG="$DEVCG/orh-sec-$$"
VICTIM="" VJOB=""
stop_victim() {
	if [ -n "$VJOB" ]; then
		kill "$VICTIM" 2>/dev/null || true
		wait "$VJOB" 2>/dev/null || true
	fi
	VICTIM="" VJOB=""
	if [ -d "$VCG" ]; then rmdir "$VCG" 2>/dev/null || true; fi
}
cleanup_which() {
	stop_victim
	runc delete -f "orh-e2e-$$-other" >/dev/null 2>&1 || true
}
trap 'rc=$?; cleanup_which; cleanup_work $rc' EXIT
# victim PID-OR-EMPTY [PREFIX...]: an unrelated host process (sleep) in a new devices
# cgroup $VCG that allows nothing, with a 64 KiB soft memlock, started through PREFIX
# (pid_at PID, unshare -m ...); its pid in $VICTIM
victim() {
	local want=$1 i
	shift
	for i in 1 2 3 4 5; do [ ! -d "$VCG" ] || rmdir "$VCG" 2>/dev/null || sleep 0.2; done
	mkdir "$VCG"
	echo a >"$VCG/devices.deny"
	"$@" sh -c 'echo $$ >"$1/cgroup.procs" && ulimit -Sl 64 && exec sleep 600' _ "$VCG" &
	VJOB=$!
	VICTIM=${want:-$VJOB}
	for i in $(seq 1 200); do
		[ "$(cat "/proc/$VICTIM/comm" 2>/dev/null)" = sleep ] && return 0
		sleep 0.05
	done
	return 1
}
# facts PID: its memlock (soft hard) and the devices.list of its devices cgroup
facts() {
	local cg
	cg=$(sed -n 's/^[0-9]*:devices://p' "/proc/$1/cgroup")
	awk '/^Max locked memory/ { print $4, $5 }' "/proc/$1/limits"
	echo "devices cgroup $cg:"
	cat "$DEVCG$cg/devices.list"
}
# facts_kept PID BEFORE: its facts are BEFORE; if not, the difference as comments
facts_kept() {
	local now
	now=$(facts "$1")
	[ "$now" = "$2" ] && return 0
	diff <(echo "$2") <(echo "$now") | sed -n 's/^[<>]/# &/p'
	return 1
}
# hook_for PID BUNDLE CONF [PREFIX...]: createRuntime on BUNDLE for PID; HRC, HLOG
hook_for() {
	local pid=$1 b=$2 conf=$3
	shift 3
	HRC=0
	printf '{"ociVersion":"1.0.2","id":"orh-sec-%s-%s","status":"creating","pid":%s,"bundle":"%s"}' \
		"$$" "$(basename "$b")" "$pid" "$b" |
		timeout 60 "$@" "$HOOK" --sysroot "$WORK/node" --config "$conf" createRuntime \
			2>"$b/which.log" || HRC=$?
	HLOG=$(cat "$b/which.log")
}
rootfs_untouched() { [ ! -e "$1/etc/nccl.conf" ] && [ ! -e "$1/dev/infiniband" ]; }

if grep -q " $DEVCG .* - cgroup .*devices" /proc/self/mountinfo; then

	# a host process
	fresh_rootfs
	make_bundle "$WORK/wh" "$WORK/r" "$WORK/node" "$WORK/hook.conf" true "$HOSTNET"
	victim ""
	before=$(facts "$VICTIM")
	hook_for "$VICTIM" "$WORK/wh" "$WORK/hook.conf"
	check "[which] a host process: exit 0 (on_error=warn)" [ "$HRC" = 0 ]
	check "[which] a host process: its devices cgroup and memlock untouched" \
		facts_kept "$VICTIM" "$before"
	check "[which] a host process: nothing in the bundle's rootfs" rootfs_untouched "$WORK/r"
	check "[which] a host process: refused, naming the pid and what did not match" \
		grep -q "container process: pid $VICTIM is not the container of this bundle: it shares the hook's mount namespace and root" <<<"$HLOG"
	make_bundle "$WORK/whf" "$WORK/r" "$WORK/node" "$WORK/fail.conf" true "$HOSTNET; $ASK"
	hook_for "$VICTIM" "$WORK/whf" "$WORK/fail.conf"
	check "[which] a host process, on_error=fail, asked: exit 1, untouched" \
		bash -c '[ "$1" = 1 ] && [ "$2" = "$3" ]' _ "$HRC" "$(facts "$VICTIM")" "$before"
	stop_victim

	# a process with a mount namespace of its own where the rootfs is not mounted
	victim "" unshare -m --propagation private
	before=$(facts "$VICTIM")
	hook_for "$VICTIM" "$WORK/wh" "$WORK/hook.conf"
	check "[which] a process in a mount namespace of its own: devices cgroup and memlock untouched" \
		facts_kept "$VICTIM" "$before"
	check "[which] a process in a mount namespace of its own: nothing in the rootfs" \
		rootfs_untouched "$WORK/r"
	check "[which] a process in a mount namespace of its own: refused, the rootfs is not mounted there" \
		grep -q "pid $VICTIM is not the container of this bundle: root.path '$WORK/r' is not a mount point in its mount namespace" <<<"$HLOG"
	stop_victim

	# another container (runc, running), with a 64 KiB soft memlock of its own
	cp -a "$WORK/base" "$WORK/other"
	hard=$(ulimit -Hl)
	[ "$hard" = unlimited ] && hard=18446744073709551615 || hard=$((hard * 1024))
	make_bundle "$WORK/ob" "$WORK/other" "$WORK/node" "$WORK/hook.conf" 'exec sleep 600' \
		"$HOSTNET; c.pop('hooks'); c['process']['rlimits'] = [{'type': 'RLIMIT_MEMLOCK', 'soft': 65536, 'hard': $hard}]"
	runc run -d --bundle "$WORK/ob" "orh-e2e-$$-other" </dev/null >/dev/null 2>"$WORK/other.err" || true
	OTHER=$(runc state "orh-e2e-$$-other" 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null || true)
	if [ -n "$OTHER" ]; then
		before=$(facts "$OTHER")
		fresh_rootfs
		hook_for "$OTHER" "$WORK/wh" "$WORK/hook.conf"
		check "[which] another container: its devices cgroup and memlock untouched" \
			facts_kept "$OTHER" "$before"
		check "[which] another container: nothing in its rootfs or its /dev" \
			bash -c '[ ! -e "$1/etc/nccl.conf" ] && [ ! -e "/proc/$2/root/dev/infiniband" ]' \
			_ "$WORK/other" "$OTHER"
		check "[which] another container: nothing in the bundle's rootfs" rootfs_untouched "$WORK/r"
		check "[which] another container: refused, its root is not the bundle's root.path" \
			grep -q "pid $OTHER is not the container of this bundle: its root is not root.path '$WORK/r'" <<<"$HLOG"
	else
		not_ok "[which] another container: runc could not start it: $(cat "$WORK/other.err")"
	fi
	runc delete -f "orh-e2e-$$-other" >/dev/null 2>&1 || true

	# the container's pid taken by an unrelated process while the hook runs: the hook
	# waits 3 s on entry to its first mknodat (strace), by then it holds the pid and has
	# opened the rootfs; meanwhile the container exits, is reaped, and the victim is
	# started with its number (clone3 set_tid)
	if command -v strace >/dev/null 2>&1 && [ -x "${PID_AT:-}" ]; then
		fresh_rootfs
		fake_ctr "$WORK/r"
		P=$SLEEPER
		(hook_for "$P" "$WORK/wh" "$WORK/hook.conf" \
			strace -qq -o /dev/null -e inject=mknodat:delay_enter=3000000:when=1
		 echo "$HRC" >"$WORK/wh/which.rc") &
		HJOB=$!
		for i in $(seq 1 200); do [ -d "$WORK/r/dev/infiniband" ] && break; sleep 0.05; done
		stop_fake_ctr
		victim "$P" "$PID_AT" "$P"
		before=$(facts "$P")
		in_time=no
		kill -0 "$HJOB" 2>/dev/null && in_time=yes
		wait "$HJOB" || true
		HLOG=$(cat "$WORK/wh/which.log")
		check "[which] reused pid: the victim took the number while the hook waited" \
			[ "$in_time" = yes -a "$(cat "/proc/$P/comm" 2>/dev/null)" = sleep ]
		check "[which] reused pid: exit 0 (on_error=warn)" [ "$(cat "$WORK/wh/which.rc")" = 0 ]
		check "[which] reused pid: the victim's devices cgroup and memlock untouched" \
			facts_kept "$P" "$before"
		check "[which] reused pid: the hook saw the container go, naming the pid" \
			grep -q "pid $P exited while" <<<"$HLOG"
		check "[which] reused pid: no nccl.conf written after it" [ ! -e "$WORK/r/etc/nccl.conf" ]
		stop_victim
	else
		not_ok "[which] reused pid: needs strace and pid_at (\$PID_AT)"
	fi
else
	not_ok "[which] no cgroup v1 devices hierarchy at $DEVCG: the which-process cases are not run"
fi

finish
