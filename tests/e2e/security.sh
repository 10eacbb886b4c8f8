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
# Then, through runc only, what needs the container's own mounts and users: volumes that
# /etc or /dev/infiniband lead into (never written: a file there is covered by a copy), a
# root-only nccl.conf and uid 1000 (the copy is no more readable than the original), an
# image's begin marker without an end with the hook run twice, and two hooks racing on
# one read-only rootfs.
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
# ran COMMAND...: the last hook_direct run logged a line naming its container (it read the
# state and went to work), and COMMAND succeeds: an attack "left the host untouched" only
# when the hook ran against it
ran() { grep -q "container orh-sec-$$-$N: " <<<"$HLOG" && "$@"; }
# after PATTERN COMMAND...: the container's output ($OUT) has a line matching PATTERN (it
# ran that far) and COMMAND succeeds; what a container that never ran left unchanged
# proves nothing
after() {
	local pat=$1
	shift
	grep -q -- "$pat" <<<"$OUT" && "$@"
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
		check "[$mode] /etc -> host dir ($how): host untouched" ran host_untouched
		check "[$mode] /etc -> host dir ($how): the write stayed in the rootfs" \
			[ -f "$WORK/r$WORK/host/etc/nccl.conf" ]
	done

	# -- /etc/nccl.conf is a symlink to a host file
	for how in abs rel; do
		plant_link $how "$WORK/host/file" etc/nccl.conf
		hook_direct "$WORK/r" $mode
		check "[$mode] /etc/nccl.conf -> host file ($how): host untouched" ran host_untouched
		check "[$mode] /etc/nccl.conf -> host file ($how): refused as a symlink" \
			grep -q "a symlink" <<<"$HLOG"
		check "[$mode] /etc/nccl.conf -> host file ($how): the link is left as it was" \
			ran [ -L "$WORK/r/etc/nccl.conf" ]
	done

	# -- /dev/infiniband is a symlink out of the rootfs
	for how in abs rel; do
		plant_link $how "$WORK/host/dev" dev/infiniband
		hook_direct "$WORK/r" $mode
		check "[$mode] /dev/infiniband -> host dir ($how): host untouched" ran host_untouched
		check "[$mode] /dev/infiniband -> host dir ($how): nodes stayed in the rootfs" \
			[ -c "$WORK/r$WORK/host/dev/uverbs1" ]
	done

	# -- a FIFO or a directory at /etc/nccl.conf
	fresh_rootfs; mkfifo "$WORK/r/etc/nccl.conf"
	hook_direct "$WORK/r" $mode
	check "[$mode] FIFO at /etc/nccl.conf: the hook returns (no hang)" ran [ "$HRC" != 124 ]
	check "[$mode] FIFO at /etc/nccl.conf: refused" grep -q "a FIFO" <<<"$HLOG"
	check "[$mode] FIFO at /etc/nccl.conf: still a FIFO" ran [ -p "$WORK/r/etc/nccl.conf" ]
	fresh_rootfs; mkdir "$WORK/r/etc/nccl.conf"
	hook_direct "$WORK/r" $mode
	check "[$mode] directory at /etc/nccl.conf: refused" grep -q "a directory" <<<"$HLOG"
	check "[$mode] directory at /etc/nccl.conf: left empty" \
		ran [ -d "$WORK/r/etc/nccl.conf" -a -z "$(ls -A "$WORK/r/etc/nccl.conf")" ]

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
	check "[$mode] $races hook runs against swapping symlinks: host untouched" ran host_untouched
	check "[$mode] swapping symlinks: no device node leaked to the host dir" \
		ran [ -z "$(ls -A "$WORK/host/dev")" ]
	check "[$mode] the swap was live: $saw_link of $races runs met the symlink" [ "$saw_link" -gt 0 ]
done

# -- the same attacks through runc (createRuntime in the container's mount namespace)
for how in abs rel; do
	plant_link $how "$WORK/host/file" etc/nccl.conf
	make_bundle "$WORK/rb-$how" "$WORK/r" "$WORK/node" "$WORK/hook.conf" 'echo started' "$HOSTNET"
	run_ctr "$WORK/rb-$how"
	check "[runc] /etc/nccl.conf -> host file ($how): container starts (on_error=warn)" \
		grep -qx started <<<"$OUT"
	check "[runc] /etc/nccl.conf -> host file ($how): host untouched" after '^started$' host_untouched
	check "[runc] /etc/nccl.conf -> host file ($how): refusal logged" \
		grep -q "a symlink" "$WORK/rb-$how/hook.log"
done
plant_link abs "$WORK/host/etc" etc
make_bundle "$WORK/rb-etc" "$WORK/r" "$WORK/node" "$WORK/hook.conf" 'cat /etc/nccl.conf' "$HOSTNET"
run_ctr "$WORK/rb-etc"
check "[runc] /etc -> host dir: the container sees its nccl.conf" grep -q "^NCCL_IB_HCA=" <<<"$OUT"
check "[runc] /etc -> host dir: host untouched" after '^NCCL_IB_HCA=' host_untouched


# ---- through runc: a hook on its own container ----------------------------------------
M=0
# ctr MODE ROOTFS CMD EDIT: run a runc container whose hook runs with openat2 (MODE
# native) or with the component walk (fallback), under $TRACE_PREFIX if set; $OUT, the
# hook's log in $HLOG and the bundle in $B
ctr() {
	M=$((M + 1))
	B="$WORK/mb-$M"
	HOOK_PREFIX="${TRACE_PREFIX:-}"
	[ "$1" = fallback ] && HOOK_PREFIX="$HOOK_PREFIX $NO_OPENAT2"
	make_bundle "$B" "$2" "$WORK/node" "$WORK/hook.conf" "$3" "$HOSTNET; $4"
	HOOK_PREFIX=""
	run_ctr "$B"
	HLOG=$(cat "$B/hook.log" 2>/dev/null || true)
}

# a root-only file (an image's or a volume's): the container's uid 1000 must not read it
SECRET='SECRET_TOKEN=s3cret-0600'
secret_conf() {
	printf 'NCCL_DEBUG=WARN\n%s\n' "$SECRET" >"$1"
	chown 0:0 "$1"
	chmod 600 "$1"
}
# a host directory that a container gets as a volume: $VOL, and what it holds
VOL="$WORK/vol"
fresh_vol() {
	rm -rf "$VOL"
	mkdir -p "$VOL"
}
vol_state() {
	(cd "$VOL" && find . -printf '%p %y %m %U:%G %s %i\n' | sort &&
		find . -type f -exec sha256sum {} + | sort)
}
# volume DEST OPTION...: the spec edit that bind-mounts $VOL at DEST
volume() {
	local dest=$1
	shift
	printf 'c["mounts"].append({"destination": "%s", "type": "bind", "source": "%s", "options": %s})' \
		"$dest" "$VOL" "$(python3 -c 'import json, sys; print(json.dumps(["rbind"] + sys.argv[1:]))' "$@")"
}
AS1000='c["process"]["user"] = {"uid": 1000, "gid": 1000}'
SHOW='echo started; stat -c "mode %a %u:%g" /etc/nccl.conf; cat /etc/nccl.conf; echo "cat rc=$?"'
no_secret() { ! grep -q SECRET <<<"$1" && grep -qx "cat rc=1" <<<"$1"; }

NODEVTMPFS='c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/dev"]'
FILEVOL="c['mounts'].append({'destination': '/etc/nccl.conf', 'type': 'bind', 'source': '$VOL/nccl.conf', 'options': ['bind', 'rw']})"

for mode in native fallback; do
	# -- the container's mounts: /etc a symlink into a read-write volume that holds no
	# nccl.conf; nothing is created in the volume
	fresh_rootfs; rm -rf "$WORK/r/etc"; ln -s /vol "$WORK/r/etc"; mkdir "$WORK/r/vol"
	fresh_vol; V0=$(vol_state)
	ctr $mode "$WORK/r" "$SHOW" "$(volume /vol rw)"
	check "[runc $mode] /etc -> rw volume: the container starts" grep -qx started <<<"$OUT"
	check "[runc $mode] /etc -> rw volume: nothing created in the volume" \
		after '^started$' [ "$(vol_state)" = "$V0" ]
	check "[runc $mode] /etc -> rw volume: the refusal names the file and the mount" \
		grep -q "/etc/nccl.conf: .*another mount" <<<"$HLOG"
	check "[runc $mode] the walk was used when forced" \
		[ $mode = native -o -n "$(grep "without openat2" <<<"$HLOG")" ]
	# -- ... the volume holds a root-only nccl.conf: never rewritten, covered by a copy
	fresh_vol; secret_conf "$VOL/nccl.conf"; V0=$(vol_state)
	ctr $mode "$WORK/r" "$SHOW" "$(volume /vol rw)"
	check "[runc $mode] /etc -> rw volume with nccl.conf: the host file is untouched" \
		after '^started$' [ "$(vol_state)" = "$V0" ]
	check "[runc $mode] /etc -> rw volume with nccl.conf: the container sees the settings" \
		bash -c 'grep -qx "$2" <<<"$1" && grep -q "^NCCL_IB_HCA=" <<<"$1"' _ "$OUT" "$SECRET"
	check "[runc $mode] /etc -> rw volume with nccl.conf: the copy keeps mode 600, root" \
		grep -qx "mode 600 0:0" <<<"$OUT"
	# -- ... the same volume with shared propagation: a mount over its file would reach
	# the host, so the file is neither written nor covered
	ctr $mode "$WORK/r" "$SHOW" "$(volume /vol rw rshared); c['linux']['rootfsPropagation'] = 'shared'"
	check "[runc $mode] /etc -> shared volume with nccl.conf: the container starts" \
		grep -qx started <<<"$OUT"
	check "[runc $mode] /etc -> shared volume with nccl.conf: the host file is untouched" \
		after '^started$' [ "$(vol_state)" = "$V0" ]
	check "[runc $mode] /etc -> shared volume with nccl.conf: no mount reached the host" \
		after '^started$' bash -c '! grep -q " $1/" /proc/self/mountinfo' _ "$VOL"
	check "[runc $mode] /etc -> shared volume with nccl.conf: the refusal is logged" \
		grep -q "shared mount" <<<"$HLOG"

	# -- a read-write file volume at /etc/nccl.conf: the host file is never rewritten, the
	# volume stays mounted (a rename over its mount point would detach it) and a copy
	# covers it; the image's file under it is left as it was
	fresh_rootfs; : >"$WORK/r/etc/nccl.conf"
	fresh_vol; secret_conf "$VOL/nccl.conf"; V0=$(vol_state)
	ctr $mode "$WORK/r" "$SHOW; grep -c ' /etc/nccl.conf ' /proc/self/mountinfo" "$FILEVOL"
	check "[runc $mode] file volume at /etc/nccl.conf: the host file is untouched" \
		after '^started$' [ "$(vol_state)" = "$V0" ]
	check "[runc $mode] file volume at /etc/nccl.conf: the container sees the settings" \
		bash -c 'grep -qx "$2" <<<"$1" && grep -q "^NCCL_IB_HCA=" <<<"$1"' _ "$OUT" "$SECRET"
	check "[runc $mode] file volume at /etc/nccl.conf: still mounted, under the copy" \
		[ "$(tail -1 <<<"$OUT")" = 2 ]
	check "[runc $mode] file volume at /etc/nccl.conf: the image's file is left empty" \
		after '^NCCL_IB_HCA=' [ ! -s "$WORK/r/etc/nccl.conf" ]

	# -- no tmpfs on /dev, /dev/infiniband a symlink into a volume: no node in the volume
	for where in ib new/ib; do
		fresh_rootfs; mkdir "$WORK/r/vol"; ln -s "/vol/$where" "$WORK/r/dev/infiniband"
		fresh_vol; mkdir "$VOL/ib"; V0=$(vol_state)
		ctr $mode "$WORK/r" "echo started" "$NODEVTMPFS; $(volume /vol rw)"
		what="[runc $mode] no /dev tmpfs, /dev/infiniband -> /vol/$where"
		check "$what: the container starts" grep -qx started <<<"$OUT"
		check "$what: nothing created in the volume" after '^started$' [ "$(vol_state)" = "$V0" ]
		check "$what: the refusal is logged" grep -q "another mount" <<<"$HLOG"
	done
	# ... nodes that are already there, right, on another mount are kept (the host's
	# /dev/infiniband as a volume)
	fresh_rootfs; mkdir "$WORK/r/dev/infiniband"
	ctr $mode "$WORK/r" 'echo started; stat -c "%n %t:%T" /dev/infiniband/uverbs1' \
		"c['mounts'].append({'destination': '/dev/infiniband', 'type': 'bind', 'source': '$WORK/node/dev/infiniband', 'options': ['rbind', 'ro']})"
	check "[runc $mode] host /dev/infiniband as a volume: its nodes are kept" \
		grep -q "9 already there" <<<"$HLOG"
	check "[runc $mode] host /dev/infiniband as a volume: uverbs1 is the host's" \
		grep -qx "/dev/infiniband/uverbs1 $(stat -c %t:%T "$WORK/node/dev/infiniband/uverbs1")" <<<"$OUT"
	# ... and with no volume at all, the nodes are made in the rootfs's own /dev
	fresh_rootfs
	ctr $mode "$WORK/r" 'stat -c "%n %F" /dev/infiniband/uverbs1' "$NODEVTMPFS"
	check "[runc $mode] no /dev tmpfs: uverbs1 made in the rootfs's own /dev" \
		grep -qx "/dev/infiniband/uverbs1 character special file" <<<"$OUT"

	# -- a secret: on a read-only rootfs the generated copy of a root-only file covers it
	# with the same owner and mode
	fresh_rootfs; secret_conf "$WORK/r/etc/nccl.conf"
	ctr $mode "$WORK/r" "$SHOW" "c['root']['readonly'] = True; $AS1000"
	check "[runc $mode] read-only rootfs, 0600 nccl.conf: the copy was bind-mounted" \
		grep -q "bind-mounted from" <<<"$HLOG"
	check "[runc $mode] read-only rootfs, 0600 nccl.conf: the copy keeps mode 600, root" \
		grep -qx "mode 600 0:0" <<<"$OUT"
	check "[runc $mode] read-only rootfs, 0600 nccl.conf: uid 1000 cannot read it" \
		no_secret "$OUT"
	ctr $mode "$WORK/r" "$SHOW" "c['root']['readonly'] = True"
	check "[runc $mode] read-only rootfs, 0600 nccl.conf: root reads the copy" \
		bash -c 'grep -qx "$2" <<<"$1" && grep -q "^NCCL_IB_HCA=" <<<"$1"' _ "$OUT" "$SECRET"
	# -- ... and on a read-only volume at /etc
	fresh_rootfs; fresh_vol; secret_conf "$VOL/nccl.conf"; V0=$(vol_state)
	ctr $mode "$WORK/r" "$SHOW" "$AS1000; $(volume /etc ro)"
	check "[runc $mode] read-only volume at /etc, 0600 nccl.conf: the copy keeps mode 600, root" \
		grep -qx "mode 600 0:0" <<<"$OUT"
	check "[runc $mode] read-only volume at /etc, 0600 nccl.conf: uid 1000 cannot read it" \
		no_secret "$OUT"
	check "[runc $mode] read-only volume at /etc: the host file is untouched" \
		after '^started$' [ "$(vol_state)" = "$V0" ]
	check "[runc $mode] the walk was used when forced" \
		[ $mode = native -o -n "$(grep "without openat2" <<<"$HLOG")" ]
done

# -- markers: an image file with our begin marker and no end, and the hook run twice
# (createRuntime and prestart both registered): the image's own lines survive
TWICE="p = json.loads(json.dumps(c['hooks']['createRuntime'])); p[0]['args'][-1] = 'prestart'; c['hooks']['prestart'] = p"
fresh_rootfs
printf '%s\nNCCL_DEBUG=WARN\nNCCL_IB_HCA=mine\n' \
	"# oci-rdma-hook begin: generated at container start, do not edit" >"$WORK/r/etc/nccl.conf"
ctr native "$WORK/r" 'cat /etc/nccl.conf' "$TWICE"
check "[runc] begin marker without end, two runs: both stages ran" \
	[ "$(grep -c "device nodes" <<<"$HLOG")" = 2 ]
check "[runc] begin marker without end, two runs: NCCL_DEBUG=WARN kept" \
	grep -qx "NCCL_DEBUG=WARN" <<<"$OUT"
check "[runc] begin marker without end, two runs: NCCL_IB_HCA=mine kept" \
	grep -qx "NCCL_IB_HCA=mine" <<<"$OUT"
check "[runc] begin marker without end, two runs: one block of ours, the plan's" \
	bash -c '[ "$(grep -c "^# oci-rdma-hook end" <<<"$1")" = 1 ] && grep -q "^NCCL_IB_GID_INDEX=" <<<"$1"' \
	_ "$OUT"

# -- two hooks racing on one read-only rootfs without /etc/nccl.conf: the second looks
# (no file), is held 5 s by strace, and meanwhile the first makes its mount point there
if command -v strace >/dev/null 2>&1; then
	RO="c['root']['readonly'] = True"
	LOOK='"nccl.conf", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_PATH'
	HELD="$LOOK) = -1 ENOENT (No such file or directory) (DELAYED)"
	# (LeakSanitizer, in sanitizer builds, cannot stop the world under ptrace)
	STRACE="env ASAN_OPTIONS=detect_leaks=0 strace -qq -A -e trace=openat"
	# which openat call is the hook's look at /etc/nccl.conf, from a traced run
	fresh_rootfs; rm -f "$WORK/r/etc/nccl.conf"
	TRACE_PREFIX="$STRACE -o $WORK/race-dry.trace"
	ctr native "$WORK/r" true "$RO"
	K=$(grep '^openat(' "$WORK/race-dry.trace" | grep -n -F "$LOOK" | head -1 | cut -d: -f1)
	fresh_rootfs; rm -f "$WORK/r/etc/nccl.conf"
	TRACE_PREFIX="$STRACE -o $WORK/race.trace -e inject=openat:delay_exit=5000000:when=${K:-1}"
	(ctr native "$WORK/r" 'cat /etc/nccl.conf' "$RO" && printf '%s\n' "$OUT" >"$WORK/race-b.out") &
	RACER=$!
	TRACE_PREFIX=""
	M=$((M + 1)) CTR_N=$((CTR_N + 1)) # the numbers the background run took
	for i in $(seq 1 200); do
		grep -qF "$HELD" "$WORK/race.trace" 2>/dev/null && break
		sleep 0.1
	done
	check "[runc] race: the second hook is held after it found no /etc/nccl.conf" \
		grep -qF "$HELD" "$WORK/race.trace"
	ctr native "$WORK/r" 'cat /etc/nccl.conf' "$RO"
	check "[runc] race: the first container gets its nccl.conf" grep -q "^NCCL_IB_HCA=" <<<"$OUT"
	wait $RACER || true
	check "[runc] race: the second container gets its nccl.conf too" \
		grep -q "^NCCL_IB_HCA=" "$WORK/race-b.out"
else
	not_ok "strace missing: the race of two hooks on one rootfs is not tested"
fi

# -- which process: only the container the runtime is creating from the bundle ----------
# The state's pid is checked before anything is done (src/apply/target.c): a host
# process, another container, a process with a mount namespace of its own but without the
# bundle's rootfs mounted in it, and a pid whose container is gone and whose number an
# unrelated process took while the hook ran get nothing: not their devices cgroup, not
# their memlock, no file in any rootfs. The victims sit in a devices cgroup (v1) that
# allows nothing and have a 64 KiB soft memlock, so that a grant or a raise would show.
write_conf "$WORK/fail.conf" "[containers]
activation = annotation
on_error = fail
image_check = warn"
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
# ran_for BUNDLE COMMAND...: the last hook_for run on BUNDLE logged a line naming its
# container, and COMMAND succeeds (what a hook that never ran left alone proves nothing)
ran_for() {
	local b=$1
	shift
	grep -q "container orh-sec-$$-$(basename "$b"): " <<<"$HLOG" && "$@"
}

if grep -q " $DEVCG .* - cgroup .*devices" /proc/self/mountinfo; then

	# a host process
	fresh_rootfs
	make_bundle "$WORK/wh" "$WORK/r" "$WORK/node" "$WORK/hook.conf" true "$HOSTNET"
	victim ""
	before=$(facts "$VICTIM")
	hook_for "$VICTIM" "$WORK/wh" "$WORK/hook.conf"
	check "[which] a host process: exit 0 (on_error=warn)" [ "$HRC" = 0 ]
	check "[which] a host process: its devices cgroup and memlock untouched" \
		ran_for "$WORK/wh" facts_kept "$VICTIM" "$before"
	check "[which] a host process: nothing in the bundle's rootfs" \
		ran_for "$WORK/wh" rootfs_untouched "$WORK/r"
	check "[which] a host process: refused, naming the pid and what did not match" \
		grep -q "container process: pid $VICTIM is not the container of this bundle: it shares the hook's mount namespace and root" <<<"$HLOG"
	make_bundle "$WORK/whf" "$WORK/r" "$WORK/node" "$WORK/fail.conf" true "$HOSTNET; $ASK"
	hook_for "$VICTIM" "$WORK/whf" "$WORK/fail.conf"
	check "[which] a host process, on_error=fail, asked: exit 1, untouched" ran_for "$WORK/whf" \
		bash -c '[ "$1" = 1 ] && [ "$2" = "$3" ]' _ "$HRC" "$(facts "$VICTIM")" "$before"
	stop_victim

	# a process with a mount namespace of its own where the rootfs is not mounted
	victim "" unshare -m --propagation private
	before=$(facts "$VICTIM")
	hook_for "$VICTIM" "$WORK/wh" "$WORK/hook.conf"
	check "[which] a process in a mount namespace of its own: devices cgroup and memlock untouched" \
		ran_for "$WORK/wh" facts_kept "$VICTIM" "$before"
	check "[which] a process in a mount namespace of its own: nothing in the rootfs" \
		ran_for "$WORK/wh" rootfs_untouched "$WORK/r"
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
			ran_for "$WORK/wh" facts_kept "$OTHER" "$before"
		check "[which] another container: nothing in its rootfs or its /dev" ran_for "$WORK/wh" \
			bash -c '[ ! -e "$1/etc/nccl.conf" ] && [ ! -e "/proc/$2/root/dev/infiniband" ]' \
			_ "$WORK/other" "$OTHER"
		check "[which] another container: nothing in the bundle's rootfs" \
			ran_for "$WORK/wh" rootfs_untouched "$WORK/r"
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
		# (LeakSanitizer, in sanitizer builds, cannot stop the world under ptrace)
		(hook_for "$P" "$WORK/wh" "$WORK/hook.conf" env ASAN_OPTIONS=detect_leaks=0 \
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
			ran_for "$WORK/wh" facts_kept "$P" "$before"
		check "[which] reused pid: the hook saw the container go, naming the pid" \
			grep -q "pid $P exited while" <<<"$HLOG"
		check "[which] reused pid: no nccl.conf written after it" \
			ran_for "$WORK/wh" [ ! -e "$WORK/r/etc/nccl.conf" ]
		stop_victim
	else
		not_ok "[which] reused pid: needs strace and pid_at (\$PID_AT)"
	fi
else
	not_ok "[which] no cgroup v1 devices hierarchy at $DEVCG: the which-process cases are not run"
fi

finish
