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

finish
