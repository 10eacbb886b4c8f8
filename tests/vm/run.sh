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
# a boot: about 20 s to a shell under TCG; the checks take the rest
BOOT_TIMEOUT=${ORH_VM_TIMEOUT:-450}

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
	ENV
	start=$(date +%s)
	rc=0
	timeout "$BOOT_TIMEOUT" qemu-system-x86_64 -accel tcg,thread=multi -smp 2 -m 2048 \
		-display none -monitor none -serial "file:$WORK/console-$mode.log" -no-reboot \
		-kernel "$vmlinuz" -initrd "$WORK/initramfs.cpio" \
		-append "console=ttyS0 panic=-1 loglevel=4 orh.mode=$mode orh.script=$HERE/guest.sh" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
		-virtfs "local,path=$out,mount_tag=out,security_model=passthrough" \
		-nic user,model=virtio-net-pci,ipv6=off -nic user,model=virtio-net-pci,ipv6=off \
		-nic user,model=virtio-net-pci,ipv6=off </dev/null || rc=$?
	secs=$(($(date +%s) - start))
	if [ -n "${ORH_VM_SHOW_CONSOLE:-}" ] || [ ! -s "$out/result.tap" ]; then
		cat "$WORK/console-$mode.log"
	fi
	[ $rc = 124 ] && echo "not ok - cgroup $mode: the VM did not power off within ${BOOT_TIMEOUT}s" >>"$out/result.tap"
	[ -s "$out/result.tap" ] || echo "not ok - cgroup $mode: the guest wrote no results" >"$out/result.tap"
	grep -qx '# guest done' "$out/result.tap" ||
		echo "not ok - cgroup $mode: the guest script did not finish" >>"$out/result.tap"
	sed "s/^\(not \)\?ok - /&[$mode] /" "$out/result.tap"
	p=$(grep -c '^ok - ' "$out/result.tap" || true)
	f=$(grep -c '^not ok - ' "$out/result.tap" || true)
	echo "# cgroup $mode: $p passed, $f failed, ${secs}s"
	[ -n "${ORH_VM_KEEP:-}" ] && cp -r "$out" "$WORK/console-$mode.log" "${ORH_VM_KEEP}/"
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
done
echo "# vm lane: $total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ] && [ "$total_pass" -gt 0 ]
