#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The VM lane: a real RDMA stack under the kernel users run (docs/vm-lane.md).
#   bash tests/vm/run.sh [BUILDDIR]      (root; BUILDDIR defaults to build-test)
# It downloads Debian 12's kernel package (not installed: unpacked into a cache), makes an
# initramfs with busybox and the modules the lane needs, and boots the kernel under
# qemu (TCG) twice, once with pure cgroup v2 and once with cgroup v1. The guest mounts
# this machine's root read-only over 9p under a tmpfs overlay and runs tests/vm/guest.sh:
# soft-RoCE devices, the hook in real containers, verbs and traffic. Exit 0 only when
# every check in both boots passed; it never skips: what it cannot run is a failure.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:-${ORH_BUILDDIR:-$SRC/build-test}}" && pwd)
CACHE=${ORH_VM_CACHE:-/var/cache/oci-rdma-hook-vm}
MODES=${ORH_VM_MODES:-v2 v1}
# a boot: about 20 s to a shell under TCG; the checks take the rest, 2 to 4 minutes on an idle
# machine, 6 and more on a loaded one. The watchdog ends a stuck guest long before this.
BOOT_TIMEOUT=${ORH_VM_TIMEOUT:-900}
# The watchdog (watch_guest): the guest's console goes to a file, which it reads every second.
# A line the kernel writes when it locks up or hangs ends the boot LOCKUP_GRACE seconds later
# (time for the stack traces that follow it to reach the console); so does a console with no
# new line for SILENT_LIMIT seconds (the guest's init writes a heartbeat every 5 s while the
# kernel runs its processes) and test output (guest.log, result.tap) that has not grown for
# STALL_LIMIT seconds. docs/vm-lane.md gives the measurements these limits come from.
LOCKUP_RE='soft lockup|hard LOCKUP|detected.* stall|blocked for more than|Kernel panic|BUG: |Oops|workqueue lockup'
LOCKUP_GRACE=${ORH_VM_LOCKUP_GRACE:-3}
SILENT_LIMIT=${ORH_VM_SILENT_LIMIT:-60}
STALL_LIMIT=${ORH_VM_STALL_LIMIT:-240}

fail() {
	echo "vm: FAIL: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || fail "needs root (the guest shares this machine's root read-only)"
for t in qemu-system-x86_64 cpio depmod modprobe apt-get dpkg; do
	command -v $t >/dev/null || fail "$t not installed (tests/setup-debian.sh installs it)"
done
for d in "$SRC" "$BUILD"; do
	case $d/ in /run/* | /dev/* | /proc/* | /sys/*) fail "$d: the guest mounts its own /run, /dev, /proc and /sys over the host's" ;; esac
done
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || fail "/bin/busybox is not static"
for f in src/oci-rdma-hook tests/vm/vm_regmr tests/e2e/probe tests/e2e/cri-pause; do
	[ -x "$BUILD/$f" ] || fail "$BUILD/$f not built (meson compile -C $BUILD)"
done

# --- the kernel: the package linux-image-amd64 depends on, unpacked, never installed ---
kernel_pkg() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
pkg=$(kernel_pkg)
[ -n "$pkg" ] || { apt-get update -qq && pkg=$(kernel_pkg); }
[ -n "$pkg" ] || fail "apt-cache knows no linux-image-amd64, even after apt-get update"
kver=${pkg#linux-image-}
kroot=$CACHE/$pkg
if [ ! -e "$kroot/.done" ]; then
	mkdir -p "$CACHE"
	rm -rf "$kroot" "$CACHE"/*.deb
	(cd "$CACHE" && apt-get download "$pkg" >/dev/null 2>&1) ||
		(apt-get update -qq && cd "$CACHE" && apt-get download "$pkg" >/dev/null) ||
		fail "apt-get download $pkg"
	dpkg -x "$CACHE/${pkg}_"*.deb "$kroot"
	depmod -b "$kroot" "$kver"
	rm -f "$CACHE/${pkg}_"*.deb
	touch "$kroot/.done"
fi
vmlinuz=$kroot/boot/vmlinuz-$kver

WORK=$(mktemp -d /tmp/orh-vm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# --- the initramfs: busybox, /init, the modules in load order ---
ird=$WORK/initramfs
mkdir -p "$ird/bin" "$ird/modules" "$ird/proc" "$ird/sys" "$ird/dev"
cp /bin/busybox "$ird/bin/busybox"
cp "$HERE/init" "$ird/init"
chmod 755 "$ird/init"
modules="virtio_pci virtio_net 9p 9pnet_virtio overlay crc32_generic rdma_rxe ib_uverbs rdma_ucm
	macvlan veth"
for m in $modules; do
	modprobe -d "$kroot" -S "$kver" --show-depends "$m" ||
		fail "module $m is not in $pkg"
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >"$WORK/modpaths"
while read -r p; do
	b=$(basename "$p")
	cp "$p" "$ird/modules/$b"
	echo "$b"
done <"$WORK/modpaths" >"$ird/modules.list"
(cd "$ird" && find . | cpio -o -H newc --quiet) >"$WORK/initramfs.cpio"

# --- the watchdog ---
# watch_guest PID CONSOLE OUTDIR MONITOR: wait until qemu (PID) exits, or end it when the guest
# is stuck; $verdict is empty when qemu exited by itself, else why it was ended. Sets
# $max_silent and $max_stall, the longest time the console and the test output stood still.
watch_guest() {
	local pid=$1 con=$2 o=$3 mon=$4 start=$SECONDS now=0 sz sig con_sz=-1 out_sig='' hit
	local last_con=0 last_out=0 _
	verdict="" max_silent=0 max_stall=0
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		now=$((SECONDS - start))
		hit=$(grep -m1 -aE "$LOCKUP_RE" "$con" 2>/dev/null || true)
		if [ -n "$hit" ]; then
			verdict="the kernel reported a lockup or hang (seen ${now}s after qemu started): $hit"
			sleep "$LOCKUP_GRACE"
			break
		fi
		sz=$(stat -c %s "$con" 2>/dev/null || echo 0)
		[ "$sz" != "$con_sz" ] && con_sz=$sz last_con=$now
		sig=$(stat -c %s "$o/guest.log" "$o/result.tap" 2>/dev/null | tr '\n' ' ' || true)
		[ "$sig" != "$out_sig" ] && out_sig=$sig last_out=$now
		[ $((now - last_con)) -gt "$max_silent" ] && max_silent=$((now - last_con))
		[ $((now - last_out)) -gt "$max_stall" ] && max_stall=$((now - last_out))
		if [ $((now - last_con)) -ge "$SILENT_LIMIT" ]; then
			verdict="no console line for ${SILENT_LIMIT}s, at ${now}s (the guest's heartbeat stopped)"
		elif [ $((now - last_out)) -ge "$STALL_LIMIT" ]; then
			verdict="no test output for ${STALL_LIMIT}s, at ${now}s (guest.log and result.tap stood still)"
		elif [ "$now" -ge "$BOOT_TIMEOUT" ]; then
			verdict="the VM did not power off within ${BOOT_TIMEOUT}s"
		fi
		if [ -n "$verdict" ]; then
			# ask a live kernel for the stack of every CPU and of every blocked task
			/usr/bin/python3 - "$mon" <<-'PY' 2>/dev/null || true
				import socket, sys, time
				s = socket.socket(socket.AF_UNIX)
				s.settimeout(2)
				s.connect(sys.argv[1])
				for k in ("l", "w"):
				    s.sendall(b"sendkey alt-sysrq-%s\n" % k.encode())
				    time.sleep(1)
			PY
			sleep "$LOCKUP_GRACE"
			break
		fi
	done
	if [ -n "$verdict" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in 1 2 3 4 5; do kill -0 "$pid" 2>/dev/null && sleep 1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	# a kernel that panicked powers the guest off by itself (panic=-1, -no-reboot)
	if [ -z "$verdict" ] && hit=$(grep -m1 -aE "$LOCKUP_RE" "$con"); then
		verdict="the kernel reported a lockup or hang: $hit"
	fi
	return 0
}

# show_console CONSOLE: its lines from 20 before the first lockup line (or its last 150
# lines), at most 400, without rxe's "speed is unknown" warnings
show_console() {
	awk -v re="$LOCKUP_RE" '!/speed is unknown, defaulting to/ {
		l[++n] = $0
		if (!first && $0 ~ re) first = n
	}
	END {
		from = first ? (first > 20 ? first - 20 : 1) : (n > 150 ? n - 149 : 1)
		to = first ? from + 399 : n
		for (i = from; i <= to && i <= n; i++) print "# console: " l[i]
	}' "$1"
}

# --- the boots ---
total_pass=0 total_fail=0
for mode in $MODES; do
	out=$WORK/out-$mode
	mkdir -p "$out"
	cat >"$out/env" <<-ENV
		SRC='$SRC'
		BUILD='$BUILD'
		HOOK='$BUILD/src/oci-rdma-hook'
		REGMR='$BUILD/tests/vm/vm_regmr'
		PROBE='$BUILD/tests/e2e/probe'
		PAUSE='$BUILD/tests/e2e/cri-pause'
		ORH_VM_FAKE='${ORH_VM_FAKE:-}'
	ENV
	con=$WORK/console-$mode.log
	: >"$con"
	start=$(date +%s)
	# loglevel=5: the kernel's warnings and stack traces reach the console
	qemu-system-x86_64 -accel tcg,thread=multi -smp 2 -m 2048 \
		-display none -monitor "unix:$WORK/monitor-$mode,server=on,wait=off" \
		-serial "file:$con" -no-reboot \
		-kernel "$vmlinuz" -initrd "$WORK/initramfs.cpio" \
		-append "console=ttyS0 panic=-1 loglevel=5 sysrq_always_enabled softlockup_all_cpu_backtrace=1 orh.mode=$mode orh.script=$HERE/guest.sh" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
		-virtfs "local,path=$out,mount_tag=out,security_model=passthrough" \
		-nic user,model=virtio-net-pci,ipv6=off -nic user,model=virtio-net-pci,ipv6=off \
		-nic user,model=virtio-net-pci,ipv6=off </dev/null &
	watch_guest $! "$con" "$out" "$WORK/monitor-$mode"
	secs=$(($(date +%s) - start))
	echo "# cgroup $mode: the console stood still at most ${max_silent}s, the test output ${max_stall}s"
	[ -n "$verdict" ] && echo "not ok - cgroup $mode: $verdict" >>"$out/result.tap"
	[ -s "$out/result.tap" ] || echo "not ok - cgroup $mode: the guest wrote no results" >"$out/result.tap"
	grep -qx '# guest done' "$out/result.tap" ||
		echo "not ok - cgroup $mode: the guest script did not finish" >>"$out/result.tap"
	sed "s/^\(not \)\?ok - /&[$mode] /" "$out/result.tap"
	p=$(grep -c '^ok - ' "$out/result.tap" || true)
	f=$(grep -c '^not ok - ' "$out/result.tap" || true)
	echo "# cgroup $mode: $p passed, $f failed, ${secs}s"
	# what the guest was doing, then its console, last: where a log's tail is shown
	if [ -n "$verdict" ]; then
		echo "# cgroup $mode: the watchdog ended the boot after ${secs}s: $verdict"
		echo "# the guest's log, its last lines:"
		tail -n 30 "$out/guest.log" 2>/dev/null | sed 's/^/# guest.log: /'
		show_console "$con"
	elif [ -n "${ORH_VM_SHOW_CONSOLE:-}" ]; then
		sed 's/^/# console: /' "$con"
	elif [ "$f" != 0 ]; then
		show_console "$con"
	fi
	[ -n "${ORH_VM_KEEP:-}" ] && cp -r "$out" "$WORK/console-$mode.log" "${ORH_VM_KEEP}/"
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
done
echo "# vm lane: $total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ] && [ "$total_pass" -gt 0 ]
