#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Faults, each with its defined outcome (see docs/security.md):
#   - no sysfs at all (no InfiniBand module, no /sys): nothing to do, exit 0;
#   - garbage in, or the loss of, every sysfs file the scan reads (one at a time; the
#     list is taken from strace of a clean run): never a crash or a hang, every output
#     line a well-formed NAME=VALUE (warnings on stderr name the file they skip);
#   - a container pid that has already exited;
#   - a missing cgroup (the container's devices cgroup directory is not there) and a
#     missing devices controller;
#   - a full /run (the state directory of a read-only rootfs cannot be written).
# A failed step follows on_error: warn exits 0 with the step and the reason logged, fail
# exits 1 for a container that asked (oci-rdma-hook/enable=true).
# The read-only rootfs case is in hook.sh; a device vanishing during the scan and
# garbage in a scan's values in tests/test_discover.c.
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v strace >/dev/null 2>&1 || cant_run "strace not installed"
# LeakSanitizer (sanitizer builds) cannot stop the world under ptrace: no leak check here
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
command -v unshare >/dev/null 2>&1 || cant_run "unshare (util-linux) not installed"
setup_work

make_rootfs "$WORK/base"
make_node seed001-roce.json "$WORK/node"
write_conf "$WORK/warn.conf" "[containers]
activation = always"
write_conf "$WORK/fail.conf" "[containers]
activation = annotation
on_error = fail
image_check = warn"
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
ASK="c['annotations'] = {'oci-rdma-hook/enable': 'true'}"

CG=""
cleanup_faults() {
	stop_fake_ctr
	[ -n "$CG" ] && rmdir "$CG" 2>/dev/null || true
}
trap 'rc=$?; cleanup_faults; cleanup_work $rc' EXIT
fresh() { rm -rf "$WORK/$1"; cp -a "$WORK/base" "$WORK/$1"; }
# said PATTERN COMMAND...: the hook's stderr ($HLOG) holds PATTERN, and COMMAND succeeds:
# what a run left unchanged is checked beside the reason that run gave
said() {
	local pat=$1
	shift
	grep -q -- "$pat" <<<"$HLOG" && "$@"
}

# hook_pid BUNDLE CONF PID [SYSROOT] [PREFIX...]: createRuntime for PID (a stand-in
# container, fake_ctr, or a pid that is gone); HRC, HLOG
hook_pid() {
	local b=$1 conf=$2 pid=$3 sysroot=${4:-$WORK/node}
	shift 4 || shift $#
	HRC=0
	printf '{"ociVersion":"1.0.2","id":"orh-fault-%s-%s","status":"creating","pid":%s,"bundle":"%s"}' \
		"$$" "$(basename "$b")" "$pid" "$b" |
		timeout 60 "$@" "$HOOK" --sysroot "$sysroot" --config "$conf" createRuntime \
		2>"$b/direct.log" || HRC=$?
	HLOG=$(cat "$b/direct.log")
}

# ---- 1. no sysfs at all -------------------------------------------------------------------
fresh r1
mkdir -p "$WORK/empty"
make_bundle "$WORK/b1" "$WORK/r1" "$WORK/empty" "$WORK/warn.conf" true "$HOSTNET"
fake_ctr "$WORK/r1"
hook_pid "$WORK/b1" "$WORK/warn.conf" "$SLEEPER" "$WORK/empty"
stop_fake_ctr
check "no /sys at all: exit 0" [ "$HRC" = 0 ]
check "no /sys at all: 'no usable RDMA device' logged" grep -q "no usable RDMA device on this node; left unchanged" <<<"$HLOG"
check "no /sys at all: container unchanged" \
	said "no usable RDMA device" [ ! -e "$WORK/r1/etc/nccl.conf" -a ! -e "$WORK/r1/dev/infiniband" ]
# a container that asked for RDMA on that node: on_error = fail refuses it with the reason,
# on_error = warn starts it with a warning; one that did not ask (above) starts as it is
fresh r1f
make_bundle "$WORK/b1f" "$WORK/r1f" "$WORK/empty" "$WORK/fail.conf" true "$HOSTNET; $ASK"
fake_ctr "$WORK/r1f"
hook_pid "$WORK/b1f" "$WORK/fail.conf" "$SLEEPER" "$WORK/empty"
stop_fake_ctr
check "no /sys at all, asked, on_error=fail: exit 1, the reason in the hook's error" \
	bash -c '[ "$1" = 1 ] && grep -q "the plan: no usable RDMA device on this node; failing the container (on_error=fail)" <<<"$2"' \
	_ "$HRC" "$HLOG"
write_conf "$WORK/askwarn.conf" "[containers]
activation = annotation"
make_bundle "$WORK/b1w" "$WORK/r1f" "$WORK/empty" "$WORK/askwarn.conf" true "$HOSTNET; $ASK"
fake_ctr "$WORK/r1f"
hook_pid "$WORK/b1w" "$WORK/askwarn.conf" "$SLEEPER" "$WORK/empty"
stop_fake_ctr
check "no /sys at all, asked, on_error=warn: exit 0, a warning, container unchanged" \
	bash -c '[ "$1" = 0 ] && grep -q "warning: .*no usable RDMA device on this node; the container starts unchanged" <<<"$2" &&
		 [ ! -e "$3/etc/nccl.conf" ]' _ "$HRC" "$HLOG" "$WORK/r1f"
RC1=0
"$HOOK" --sysroot "$WORK/empty" --config "$WORK/warn.conf" env >"$WORK/empty.env" 2>&1 || RC1=$?
check "no /sys at all: env prints nothing, exit 0" [ "$RC1" = 0 -a ! -s "$WORK/empty.env" ]

# ---- 2. garbage in, or loss of, every sysfs file the scan reads -----------------------------
"$HOOK" --sysroot "$WORK/node" --config "$WORK/warn.conf" env >"$WORK/base.env"
strace -y -qq -e trace=openat -o "$WORK/scan.trace" \
	"$HOOK" --sysroot "$WORK/node" --config "$WORK/warn.conf" env >/dev/null
# the regular files the scan opened, as resolved paths inside the node
python3 - "$WORK/scan.trace" "$WORK/node/sys/" "$WORK/node/proc/" <<'EOF' | sort -u >"$WORK/scan.files"
import re, sys
for line in open(sys.argv[1]):
    if "O_DIRECTORY" in line:
        continue
    m = re.search(r"= \d+<([^>]*)>$", line.strip())
    if m and m.group(1).startswith(tuple(sys.argv[2:])):
        print(m.group(1))
EOF
nfiles=$(wc -l <"$WORK/scan.files")
check "the scan reads $nfiles sysfs/procfs files (taken from strace)" [ "$nfiles" -ge 50 ]
crash=0 badline=0 silent=0 runs=0
garbage_variants() { # FILE VARIANT: write a garbage variant into FILE
	case $2 in
	junk) printf '\377\376 garbage: 4: ACTIVE ::ffff:1.2.3.4 \n\n%%s%%n\n' >"$1" ;;
	long) head -c 5000 /dev/zero | tr '\0' 9 >"$1" ;;
	empty) : >"$1" ;;
	nul) printf '4: ACT\0IVE\n' >"$1" ;;
	gone) rm -f "$1" ;;
	esac
}
while IFS= read -r f; do
	cp -a "$f" "$WORK/saved"
	for v in junk long empty nul gone; do
		garbage_variants "$f" $v
		runs=$((runs + 1))
		rc=0
		timeout 20 "$HOOK" --sysroot "$WORK/node" --config "$WORK/warn.conf" env --explain \
			>"$WORK/g.out" 2>"$WORK/g.err" || rc=$?
		if [ "$rc" != 0 ]; then
			crash=$((crash + 1)); echo "# $v in ${f#$WORK/node/}: exit $rc"
		fi
		if grep -av '^#' "$WORK/g.out" | grep -aEvq '^NCCL_[A-Z0-9_]+=[^[:cntrl:]]*$'; then
			badline=$((badline + 1)); echo "# $v in ${f#$WORK/node/}: a malformed output line"
		fi
		# a changed plan with no warning naming the file: GID entries (an unused one
		# fails to read on a real kernel, so they are skipped quietly), a vendor id or
		# a uverbs ibdev (--explain then says why a port is left out) -- counted
		if ! diff -q <(grep -a '^NCCL_' "$WORK/g.out") "$WORK/base.env" >/dev/null &&
			! grep -aq "$(basename "$(dirname "$f")")/$(basename "$f")'" "$WORK/g.err"; then
			silent=$((silent + 1))
		fi
		rm -f "$f"
		cp -a "$WORK/saved" "$f"
	done
done <"$WORK/scan.files"
check "garbage/loss, $runs runs over $nfiles files: no crash, no hang, always exit 0" [ "$crash" = 0 ]
check "garbage/loss: every output line is NAME=VALUE" [ "$badline" = 0 ]
echo "# garbage/loss: $silent of $runs runs changed the plan without a warning naming the file"
# (the plan before the damage is not empty: two empty plans would compare equal)
check "garbage/loss: the node is back as it was" \
	bash -c 'grep -q "^NCCL_IB_HCA=" "$4" && cmp -s <("$1" --sysroot "$2" --config "$3" env) "$4"' _ \
	"$HOOK" "$WORK/node" "$WORK/warn.conf" "$WORK/base.env"

# ---- 3. a container pid that has already exited ------------------------------------------
fresh r3
make_bundle "$WORK/b3" "$WORK/r3" "$WORK/node" "$WORK/warn.conf" true "$HOSTNET"
sh -c 'exit 0' &
gone=$!
wait $gone
hook_pid "$WORK/b3" "$WORK/warn.conf" "$gone"
check "exited pid, on_error=warn: exit 0" [ "$HRC" = 0 ]
check "exited pid: the failed step and the reason are logged" \
	grep -q "container process: pid $gone: no such process; the container starts unchanged (on_error=warn)" <<<"$HLOG"
check "exited pid: nothing written" \
	said "pid $gone: no such process" [ ! -e "$WORK/r3/etc/nccl.conf" -a ! -e "$WORK/r3/dev/infiniband" ]
make_bundle "$WORK/b3f" "$WORK/r3" "$WORK/node" "$WORK/fail.conf" true "$HOSTNET; $ASK"
hook_pid "$WORK/b3f" "$WORK/fail.conf" "$gone"
check "exited pid, on_error=fail, asked: exit 1, logged" \
	bash -c '[ "$1" = 1 ] && grep -q "failing the container (on_error=fail)" <<<"$2"' _ "$HRC" "$HLOG"

# ---- 4. a missing cgroup; a missing devices controller ------------------------------------
DEVCG=/sys/fs/cgroup/devices
if grep -q " $DEVCG cgroup .*devices" /proc/self/mountinfo 2>/dev/null ||
	grep -q " $DEVCG .* - cgroup .*devices" /proc/self/mountinfo; then
	CG="$DEVCG/orh-fault-$$"
	mkdir "$CG"
	fresh r4
	make_bundle "$WORK/b4" "$WORK/r4" "$WORK/node" "$WORK/warn.conf" true "$HOSTNET"
	fake_ctr "$WORK/r4" "$CG"
	# the hook's view: an empty tmpfs where the devices hierarchy is
	hook_pid "$WORK/b4" "$WORK/warn.conf" "$SLEEPER" "$WORK/node" \
		unshare -m --propagation private sh -c "mount -t tmpfs none $DEVCG && exec \"\$0\" \"\$@\""
	check "missing cgroup, on_error=warn: exit 0" [ "$HRC" = 0 ]
	check "missing cgroup: the cgroup step and the directory are named in the log" \
		grep -q "device cgroup: opening devices cgroup '/orh-fault-$$' under '$DEVCG': No such file or directory; the container starts without this step, the others still run" <<<"$HLOG"
	# the steps do not depend on each other: the failed one alone is skipped
	check "missing cgroup: the device nodes, the memlock step and /etc/nccl.conf are still done" \
		bash -c '[ -c "$1/dev/infiniband/uverbs1" ] && grep -q "^NCCL_IB_HCA=" "$1/etc/nccl.conf" &&
			 grep -q "device cgroup: v1 failed" <<<"$2" && grep -q "memlock .*raised" <<<"$2"' \
		_ "$WORK/r4" "$HLOG"
	make_bundle "$WORK/b4f" "$WORK/r4" "$WORK/node" "$WORK/fail.conf" true "$HOSTNET; $ASK"
	hook_pid "$WORK/b4f" "$WORK/fail.conf" "$SLEEPER" "$WORK/node" \
		unshare -m --propagation private sh -c "mount -t tmpfs none $DEVCG && exec \"\$0\" \"\$@\""
	check "missing cgroup, on_error=fail, asked: exit 1" [ "$HRC" = 1 ]
	stop_fake_ctr
	# the devices controller not mounted at all: cgroup v1 is not used, the rest is done
	fresh r4b
	make_bundle "$WORK/b4b" "$WORK/r4b" "$WORK/node" "$WORK/warn.conf" true "$HOSTNET"
	fake_ctr "$WORK/r4b" "$CG"
	hook_pid "$WORK/b4b" "$WORK/warn.conf" "$SLEEPER" "$WORK/node" \
		unshare -m --propagation private sh -c "umount $DEVCG && exec \"\$0\" \"\$@\""
	check "no devices controller: exit 0, v1 'not used' logged" \
		bash -c '[ "$1" = 0 ] && grep -q "device cgroup: v1 not used" <<<"$2"' _ "$HRC" "$HLOG"
	check "no devices controller: the rest of the setup is done" grep -q "^NCCL_IB_HCA=" "$WORK/r4b/etc/nccl.conf"
	stop_fake_ctr
	# with the hierarchy in place the same container is granted (the test is not vacuous)
	fresh r4c
	make_bundle "$WORK/b4c" "$WORK/r4c" "$WORK/node" "$WORK/warn.conf" true "$HOSTNET"
	fake_ctr "$WORK/r4c" "$CG"
	hook_pid "$WORK/b4c" "$WORK/warn.conf" "$SLEEPER"
	check "control: with its cgroup present the grant is written" \
		bash -c '[ "$1" = 0 ] && grep -q "device cgroup: v1 granted" <<<"$2"' _ "$HRC" "$HLOG"
	stop_fake_ctr
	rmdir "$CG" && CG=""
else
	not_ok "no cgroup v1 devices hierarchy at $DEVCG: missing-cgroup case not run"
fi

# ---- 4b. a refused device directory: the other steps still run -----------------------------
# /dev/infiniband in the image is a file (a hostile or broken image): no device node can be
# made there. Under on_error = warn the cgroup grant, the memlock step and /etc/nccl.conf
# are done all the same; under on_error = fail a container that asked fails.
fresh r4d
rm -rf "$WORK/r4d/dev/infiniband"
printf 'not a directory\n' >"$WORK/r4d/dev/infiniband"
make_bundle "$WORK/b4d" "$WORK/r4d" "$WORK/node" "$WORK/warn.conf" true "$HOSTNET"
fake_ctr "$WORK/r4d"
hook_pid "$WORK/b4d" "$WORK/warn.conf" "$SLEEPER"
check "refused device directory, on_error=warn: exit 0, the step and its reason logged" \
	bash -c '[ "$1" = 0 ] && grep -q "device nodes: .*the container starts without this step, the others still run" <<<"$2"' \
	_ "$HRC" "$HLOG"
check "refused device directory: the image's file is left as it was" \
	said "device nodes: " [ "$(cat "$WORK/r4d/dev/infiniband")" = "not a directory" ]
check "refused device directory: memlock and /etc/nccl.conf are still done" \
	bash -c 'grep -q "^NCCL_IB_HCA=" "$1/etc/nccl.conf" && grep -q "memlock .*raised" <<<"$2" &&
		 grep -q "device nodes: failed;" <<<"$2"' _ "$WORK/r4d" "$HLOG"
stop_fake_ctr
fresh r4e
rm -rf "$WORK/r4e/dev/infiniband"
printf 'not a directory\n' >"$WORK/r4e/dev/infiniband"
make_bundle "$WORK/b4e" "$WORK/r4e" "$WORK/node" "$WORK/fail.conf" true "$HOSTNET; $ASK"
fake_ctr "$WORK/r4e"
hook_pid "$WORK/b4e" "$WORK/fail.conf" "$SLEEPER"
check "refused device directory, on_error=fail, asked: exit 1, nothing after it done" \
	bash -c '[ "$1" = 1 ] && grep -q "failing the container (on_error=fail)" <<<"$2" && [ ! -e "$3/etc/nccl.conf" ]' \
	_ "$HRC" "$HLOG" "$WORK/r4e"
stop_fake_ctr

# ---- 5. a full /run: the generated file of a read-only rootfs cannot be written -------------
fresh r5
printf 'NCCL_DEBUG=WARN\n' >"$WORK/r5/etc/nccl.conf"
make_bundle "$WORK/b5" "$WORK/r5" "$WORK/node" "$WORK/warn.conf" true "$HOSTNET; c['root']['readonly'] = True"
mkdir -p /run/oci-rdma-hook
FULL="mount -t tmpfs -o size=16k none /run/oci-rdma-hook && (dd if=/dev/zero of=/run/oci-rdma-hook/fill bs=1k 2>/dev/null; true) && exec \"\$0\" \"\$@\""
fake_ctr "$WORK/r5"
hook_pid "$WORK/b5" "$WORK/warn.conf" "$SLEEPER" "$WORK/node" unshare -m --propagation private sh -c "$FULL"
check "full /run, on_error=warn: exit 0" [ "$HRC" = 0 ]
check "full /run: the file and ENOSPC are named in the log" \
	grep -q "/etc/nccl.conf: .*/run/oci-rdma-hook/orh-fault-$$-b5.*No space left on device; the container starts without this step, the others still run" <<<"$HLOG"
# (in the mount table of the stand-in container, which has its rootfs mounted)
check "full /run: nothing is mounted over the image's file" \
	said "No space left on device" \
	bash -c 'grep -q " $1 " "/proc/$2/mountinfo" && ! grep -q " $1/etc/nccl.conf " "/proc/$2/mountinfo"' \
	_ "$WORK/r5" "$SLEEPER"
check "full /run: the image's file is untouched" \
	said "No space left on device" [ "$(cat "$WORK/r5/etc/nccl.conf")" = NCCL_DEBUG=WARN ]
check "full /run: nothing left in the real /run/oci-rdma-hook" \
	said "No space left on device" [ ! -e "/run/oci-rdma-hook/orh-fault-$$-b5" ]
make_bundle "$WORK/b5f" "$WORK/r5" "$WORK/node" "$WORK/fail.conf" true \
	"$HOSTNET; c['root']['readonly'] = True; $ASK"
hook_pid "$WORK/b5f" "$WORK/fail.conf" "$SLEEPER" "$WORK/node" unshare -m --propagation private sh -c "$FULL"
check "full /run, on_error=fail, asked: exit 1" [ "$HRC" = 1 ]
stop_fake_ctr

finish
