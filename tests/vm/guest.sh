#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The VM lane's checks, run inside the guest as root with every capability
# (tests/vm/init starts it; tests/vm/run.sh boots the guest). Usage: guest.sh v1|v2 OUTDIR.
# OUTDIR/env names the build; results go to OUTDIR/result.tap, one TAP line a check.
#
# The node: eth0 is the front-end NIC (default route, no RDMA), rxe0 is soft-RoCE on eth1
# (ACTIVE), rxe1 on eth2 (link down). Containers run from a small rootfs with this
# machine's /usr bind-mounted read-only, so ibv_devinfo, rping and perftest run inside.
set -u
mode=$1 out=$2
# shellcheck source=/dev/null
. "$out/env"
TAP=$out/result.tap
: >"$TAP"
exec >"$out/guest.log" 2>&1
W=/tmp/orh-vm
mkdir -p $W
export CONTAINERS_CONF=$W/containers.conf

ok() { echo "ok - $*" >>"$TAP"; echo "ok - $*"; }
not_ok() { echo "not ok - $*" >>"$TAP"; echo "not ok - $*"; }
check() { # check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}
has() { grep -qxF -- "$2" <<<"$1"; }        # has TEXT LINE: TEXT holds the whole LINE
lacks() { ! grep -qF -- "$2" <<<"$1"; }     # lacks TEXT STRING
# ran_lacks TEXT MARKER STRING: the container ran (a line of TEXT starts with MARKER) and
# TEXT lacks STRING; an empty TEXT fails
ran_lacks() { grep -q -- "^$2" <<<"$1" && lacks "$1" "$3"; }
section() { echo "# --- $* --- (${SECONDS}s)" | tee -a "$TAP"; }
die() { not_ok "$*"; echo "# guest done" >>"$TAP"; exit 1; }

# ---- cgroups: pure v2, or v1 with every controller in its own hierarchy ---------------
setup_cgroups() {
	if [ "$mode" = v2 ]; then
		mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup || return 1
		local c
		for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
			echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
		done
		return 0
	fi
	mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup || return 1
	local c
	for c in cpu,cpuacct cpuset memory devices freezer pids blkio net_cls,net_prio perf_event hugetlb; do
		mkdir -p "/sys/fs/cgroup/$c"
		mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" || return 1
	done
	ln -s cpu,cpuacct /sys/fs/cgroup/cpu
	ln -s cpu,cpuacct /sys/fs/cgroup/cpuacct
}

section "the kernel: $(uname -r), cgroup $mode"
setup_cgroups || die "mounting the cgroup $mode hierarchy"
if [ "$mode" = v2 ]; then
	check "pure cgroup v2: /sys/fs/cgroup is cgroup2" [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]
	# the BPF grant's own test, on this kernel: it makes a cgroup, attaches a program
	# that denies, and checks that the grant lets the granted node open
	"$BUILD/tests/e2e/test_cgroup_v2" --jobs 1 >$W/test_cgroup_v2.out 2>&1
	check "test_cgroup_v2 passes on $(uname -r): $(tail -1 $W/test_cgroup_v2.out)" \
		grep -q "Failing: 0 | Crashing: 0" $W/test_cgroup_v2.out
else
	check "cgroup v1: the devices controller is mounted" [ -e /sys/fs/cgroup/devices/devices.allow ]
fi

# ---- the node ---------------------------------------------------------------------------
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up && ip route add default via 10.0.2.2
ip addr add 10.0.3.15/24 dev eth1 && ip link set eth1 up
ip addr add 10.0.4.15/24 dev eth2 && ip link set eth2 up
rdma link add rxe0 type rxe netdev eth1 || die "rdma link add rxe0 (crc32_generic loaded?)"
rdma link add rxe1 type rxe netdev eth2 || die "rdma link add rxe1"
ip link set eth2 down
for i in $(seq 50); do
	[ "$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] &&
		[ "$(cat /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null)" = "1: DOWN" ] && break
	sleep 0.1
done
ipv4_gid() { # ipv4_gid IPV4: the GID of that address, as sysfs writes it
	local IFS=.
	# shellcheck disable=SC2086
	set -- $1
	printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"
}
# kernel_index DEV PORT IPV4 NDEV: the index where the kernel put that address's RoCE v2
# GID, read straight from sysfs
kernel_index() {
	local p=/sys/class/infiniband/$1/ports/$2 want i
	want=$(ipv4_gid "$3")
	for i in $(seq 0 $(($(ls $p/gids | wc -l) - 1))); do
		[ "$(cat $p/gids/$i 2>/dev/null)" = "$want" ] || continue
		[ "$(cat $p/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ] || continue
		[ "$(cat $p/gid_attrs/ndevs/$i 2>/dev/null)" = "$4" ] || continue
		echo "$i"
		return 0
	done
	return 1
}
RXE0_IDX=$(kernel_index rxe0 1 10.0.3.15 eth1)
section "the node: rxe0 on eth1 ACTIVE, IPv4 RoCE v2 GID at index ${RXE0_IDX:-none}; rxe1 on eth2 DOWN"
[ -n "$RXE0_IDX" ] || die "the kernel put no IPv4 RoCE v2 GID for 10.0.3.15 in rxe0's table"

# the node config at the path the build looks in, as an operator installs it
CONF=$("$HOOK" --help | sed -n 's/.*node config (default \(.*\))$/\1/p')
[ -n "$CONF" ] || die "oci-rdma-hook --help names no default config path"
mkdir -p "$(dirname "$CONF")"
MEMLOCK_KIB=1048576
cat >$CONF <<EOF
[node]
memlock = 1G
[containers]
activation = annotation
EOF
ORH=("$HOOK" --config "$CONF")

# ---- 2. discovery on the kernel's own devices --------------------------------------------
section "discovery: detect --json against sysfs, rdma link show and ibv_devinfo -v"
"${ORH[@]}" detect --json >$W/detect.json 2>$W/detect.err
check "detect --json succeeds ($(head -c 300 $W/detect.err))" [ -s $W/detect.json ]
rdma -j link show >$W/rdma-link.json
ibv_devinfo -v >$W/devinfo.txt 2>&1
python3 "$SRC/tests/vm/compare_detect.py" $W/detect.json $W/rdma-link.json $W/devinfo.txt \
	>$W/compare.out 2>&1
cat $W/compare.out
cp $W/detect.json $W/rdma-link.json $W/devinfo.txt "$out/"
grep -E '^(not )?ok - ' $W/compare.out >>"$TAP"
check "every field compared (no comparison crashed)" grep -qx '# compared' $W/compare.out

"${ORH[@]}" env >$W/env.txt 2>$W/env.err
ENV_PLAN=$(cat $W/env.txt)
check "env: NCCL_IB_HCA is rxe0's port only (got: $(grep HCA $W/env.txt))" \
	has "$ENV_PLAN" "NCCL_IB_HCA==rxe0:1"
check "env: NCCL_IB_GID_INDEX is where the kernel put the IPv4 RoCE v2 GID ($RXE0_IDX)" \
	has "$ENV_PLAN" "NCCL_IB_GID_INDEX=$RXE0_IDX"
check "env: the down port rxe1 is left out" lacks "$ENV_PLAN" rxe1
check "env: NCCL_SOCKET_IFNAME is the default route's eth0" has "$ENV_PLAN" "NCCL_SOCKET_IFNAME==eth0"

# ---- containers ---------------------------------------------------------------------------
# mk_rootfs DIR: /usr of this machine read-only, a small /etc, a user 1000
mk_rootfs() {
	local d=$1
	mkdir -p "$d"/{usr,etc,dev,proc,sys,tmp,root,home/user,run}
	mount --bind /usr "$d/usr" && mount -o remount,bind,ro "$d/usr"
	ln -s usr/bin "$d/bin"
	ln -s usr/sbin "$d/sbin"
	ln -s usr/lib "$d/lib"
	[ -L /lib64 ] && ln -s usr/lib64 "$d/lib64"
	cp -a /etc/libibverbs.d /etc/ld.so.cache "$d/etc/"
	printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' >"$d/etc/passwd"
	printf 'root:x:0:\nuser:x:1000:\n' >"$d/etc/group"
	chmod 1777 "$d/tmp"
	cp "$PROBE" "$d/probe"
}

# bundle DIR CMD [JQ-EDIT]: a runc bundle running CMD under sh, with its own rootfs, on
# the host network; JQ-EDIT edits its config.json. The live hook is not in it.
bundle() {
	local b=$1 cmd=$2 edit=${3:-.}
	rm -rf "$b"
	mkdir -p "$b"
	mk_rootfs "$b/rootfs"
	(cd "$b" && runc spec)
	jq --arg cmd "$cmd" '.root = {path: "rootfs", readonly: false}
		| .process.terminal = false | .process.args = ["/bin/sh", "-c", $cmd]
		| .linux.namespaces |= map(select(.type != "network"))
' \
		"$b/config.json" | jq "$edit" >"$b/config.json.new" && mv "$b/config.json.new" "$b/config.json"
}
# with_hook BUNDLE [CONF]: add the live hook (createRuntime and poststop) to BUNDLE, with
# the node config CONF (default: the installed one)
with_hook() {
	local b=$1 conf=${2:-$CONF}
	jq --arg hook "$HOOK" --arg conf "$conf" --arg log "$b/hook.log" '.hooks = {
		createRuntime: [{path: "/bin/sh", args: ["sh", "-c", "exec \"$0\" --config \"$1\" createRuntime 2>>\"$2\"", $hook, $conf, $log], timeout: 30}],
		poststop: [{path: "/bin/sh", args: ["sh", "-c", "exec \"$0\" --config \"$1\" poststop 2>>\"$2\"", $hook, $conf, $log]}]}' \
		"$b/config.json" >"$b/config.json.new" && mv "$b/config.json.new" "$b/config.json"
}
OPT_IN='.annotations["oci-rdma-hook/enable"] = "true"'
NONROOT='.process.user = {uid: 1000, gid: 1000} | .process.capabilities = {bounding: [], effective: [], permitted: [], inheritable: [], ambient: []} | .process.noNewPrivileges = true'
# a bind mount of this node's uverbs0: proves the device cgroup decides, not the node's absence
BIND_UVERBS='.mounts += [{destination: "/dev/uverbs-bound", type: "bind", source: "/dev/infiniband/uverbs0", options: ["bind"]}]'

# what the workload sees: devices, limits, identity, and an open of the bound node
INSIDE='echo "uid $(id -u) caps $(grep CapEff /proc/self/status | cut -f2)"
echo "memlock soft $(ulimit -Sl) hard $(ulimit -Hl)"
ibv_devinfo 2>&1 | grep -E "hca_id|state:" | tr -d "\t" | sed "s/ *(.*//"
/probe /dev/infiniband/uverbs0
[ -e /dev/uverbs-bound ] && /probe /dev/uverbs-bound
tr "\0" "\n" </proc/1/environ | grep "^NCCL_" | sed "s/^/env /"
[ -f /etc/nccl.conf ] && sed "s/^/conf /" /etc/nccl.conf
true'

# ORH_VM_FAKE (run.sh passes it in OUTDIR/env): a hang made on purpose as the third container
# starts, to show that the host's watchdog ends the boot: stall (this script waits forever,
# the guest stays up), freeze (every process stops, the heartbeat too), lockup (a soft
# lockup line as the kernel writes it, then a wait forever), panic (a real kernel panic)
fake_hang() {
	case ${ORH_VM_FAKE:-} in
	stall) sleep infinity ;;
	freeze) kill -STOP -1; kill -STOP $$ ;;
	lockup)
		echo "<0>watchdog: BUG: soft lockup - CPU#1 stuck for 23s! [runc:$$] (ORH_VM_FAKE=lockup)" >/dev/kmsg
		sleep infinity
		;;
	panic) echo c >/proc/sysrq-trigger ;;
	esac
}

run_n=0
# runc_run BUNDLE [RUNTIME...]: run to completion; stdout in $OUT, stderr in $ERR, $RC
runc_run() {
	local b=$1
	shift
	run_n=$((run_n + 1))
	[ "$run_n" = 3 ] && fake_hang
	RC=0
	OUT=$(cd "$b" && "${@:-runc}" run "orh-vm-$run_n" 2>$W/err-$run_n </dev/null) || RC=$?
	ERR=$(cat $W/err-$run_n)
	# through the same runtime, as an engine deletes: the shim's delete removes the state
	# directory of a container it served alone
	"${@:-runc}" delete -f "orh-vm-$run_n" >/dev/null 2>&1
}

# check_served WAY WHERE: what an activated container shows in $OUT; WHERE is conf (every
# way in writes /etc/nccl.conf) or env, the place that way promises the NCCL settings
check_served() {
	local way=$1 where=$2 line
	check "$way: starts (rc $RC: $(tail -c 400 <<<"$ERR"))" [ "$RC" = 0 ]
	check "$way: ibv_devinfo lists rxe0 PORT_ACTIVE" \
		bash -c 'grep -A1 -x "hca_id:rxe0" <<<"$1" | grep -qx "state:PORT_ACTIVE"' _ "$OUT"
	check "$way: /dev/infiniband/uverbs0 opens" has "$OUT" "/dev/infiniband/uverbs0 OK"
	check "$way: memlock soft and hard are the configured ${MEMLOCK_KIB} KiB" \
		has "$OUT" "memlock soft $MEMLOCK_KIB hard $MEMLOCK_KIB"
	while IFS= read -r line; do
		check "$way: $where has $line" has "$OUT" "$where $line"
	done <<<"$ENV_PLAN"
	[ "$where" = conf ] && check "$way: no NCCL setting added to PID 1's environment" \
		ran_lacks "$OUT" "memlock soft " "env NCCL_"
	true
}
check_unserved() {
	local way=$1
	check "$way (not activated): starts (rc $RC: $(tail -c 300 <<<"$ERR"))" [ "$RC" = 0 ]
	check "$way (not activated): the container ran (its uid and memlock lines)" \
		bash -c 'grep -q "^uid " <<<"$1" && grep -q "^memlock soft " <<<"$1"' _ "$OUT"
	check "$way (not activated): no RDMA device for verbs" \
		ran_lacks "$OUT" "memlock soft " "hca_id:"
	check "$way (not activated): /dev/infiniband/uverbs0 cannot be opened" \
		ran_lacks "$OUT" "memlock soft " "/dev/infiniband/uverbs0 OK"
	check "$way (not activated): no NCCL setting" ran_lacks "$OUT" "memlock soft " NCCL_
	check "$way (not activated): memlock untouched" \
		ran_lacks "$OUT" "memlock soft " "hard $MEMLOCK_KIB"
}

# ---- 3. every way in ------------------------------------------------------------------------
section "the runc live hook (createRuntime)"
bundle $W/b-hook "$INSIDE" "$OPT_IN | $BIND_UVERBS"
with_hook $W/b-hook
runc_run $W/b-hook
echo "$OUT"
sed 's/^/# hook: /' $W/b-hook/hook.log | tee -a "$TAP"
check_served "runc live hook" conf
check "runc live hook: the bound uverbs0 opens (the device cgroup allows it)" \
	has "$OUT" "/dev/uverbs-bound OK"
bundle $W/b-off "$INSIDE" "$BIND_UVERBS"
with_hook $W/b-off
runc_run $W/b-off
echo "$OUT"
check_unserved "runc live hook"
check "runc live hook (not activated): the bound uverbs0 gives EPERM (device cgroup)" \
	has "$OUT" "/dev/uverbs-bound EPERM"

# the image checks read files of the container's root, the same under either cgroup version:
# once, in the cgroup v2 boot (about 20 s under TCG)
if [ "$mode" = v2 ]; then
	section "the image's own RDMA userspace (image_check)"
	check "runc live hook: an image with its own rxe provider gets no image warning" \
		bash -c 'grep -q "device nodes:" "$1" && ! grep -q "will not use" "$1"' _ $W/b-hook/hook.log
	# ibverbs-utils and libibverbs (this machine's /usr) without the rxe provider: no driver
	# file names it, so libibverbs loads none for rxe0
	NOPROV=$W/no-provider.conf
	bundle $W/b-noprov "$INSIDE" "$OPT_IN"
	rm -f $W/b-noprov/rootfs/etc/libibverbs.d/rxe.driver
	with_hook $W/b-noprov
	runc_run $W/b-noprov
	echo "$OUT"
	sed 's/^/# hook: /' $W/b-noprov/hook.log | tee -a "$TAP"
	check "no rxe provider, image_check = warn: starts (rc $RC: $(tail -c 300 <<<"$ERR"))" [ "$RC" = 0 ]
	check "no rxe provider: ibv_devinfo in it finds no device (the image cannot use rxe0)" \
		ran_lacks "$OUT" "memlock soft " "hca_id:rxe0"
	check "no rxe provider: the hook warns that NCCL will not use rxe0, and why" \
		grep -q "NCCL in this container will not use rxe0: the image has no provider for rxe (no file of /etc/libibverbs.d names it" \
		$W/b-noprov/hook.log
	printf '[node]\nmemlock = 1G\n[containers]\nactivation = annotation\nimage_check = fail\n' >$NOPROV
	bundle $W/b-noprov-fail "$INSIDE" "$OPT_IN"
	rm -f $W/b-noprov-fail/rootfs/etc/libibverbs.d/rxe.driver
	with_hook $W/b-noprov-fail $NOPROV
	runc_run $W/b-noprov-fail
	check "no rxe provider, image_check = fail: the container that asked is refused (rc $RC)" \
		[ "$RC" != 0 ]
	check "no rxe provider, image_check = fail: the hook says why" \
		grep -q "image check: the image can use none of the RDMA devices given: NCCL in this container will not use rxe0" \
		$W/b-noprov-fail/hook.log
	bundle $W/b-prov-fail "$INSIDE" "$OPT_IN"
	with_hook $W/b-prov-fail $NOPROV
	runc_run $W/b-prov-fail
	check_served "an image with its own rxe provider, image_check = fail" conf

	# image_supply = yes: the same image without the rxe provider is given the node's
	# (its libibverbs is of the node's ABI: the provider and a driver file naming it)
	SUPPLY=$W/supply.conf
	printf 'image_supply = yes\n' | cat $NOPROV - >$SUPPLY
	bundle $W/b-supply "$INSIDE" "$OPT_IN"
	rm -f $W/b-supply/rootfs/etc/libibverbs.d/rxe.driver
	with_hook $W/b-supply $SUPPLY
	runc_run $W/b-supply
	echo "$OUT"
	sed 's/^/# hook: /' $W/b-supply/hook.log | tee -a "$TAP"
	check_served "no rxe provider, image_supply = yes (image_check = fail)" conf
	check "image_supply = yes: the hook gave the node's rxe provider and its driver file" \
		grep -q "the node's RDMA userspace given: 1 files at /run/oci-rdma-hook/lib, 1 driver file (2 mounted" \
		$W/b-supply/hook.log
	check "image_supply = yes: no image warning" \
		bash -c 'grep -q "device nodes:" "$1" && ! grep -q "will not use" "$1"' _ $W/b-supply/hook.log

	# an image of glibc, busybox and ibv_devinfo alone, without libibverbs (which
	# ibv_devinfo needs to start): given the node's libibverbs, its libnl and the rxe
	# provider, with the container's loader cache rewritten
	BARE='ibv_devinfo -d rxe0 2>&1 | grep -E "hca_id|state:|error" | tr -d "\t" | sed "s/ *(.*//"
ls /run/oci-rdma-hook/lib 2>/dev/null | sed "s/^/lib /"; echo "memlock soft $(ulimit -Sl)"'
	for v in off on; do
		bundle $W/b-bare-$v "$BARE" "$OPT_IN"
		umount $W/b-bare-$v/rootfs/usr || die "unmounting the bundle's /usr"
		rm -rf --one-file-system $W/b-bare-$v/rootfs
		mkdir -p $W/b-bare-$v/rootfs/{bin,etc,dev,proc,sys,tmp,run,lib64,usr/lib/x86_64-linux-gnu}
		cp /bin/busybox /usr/bin/ibv_devinfo $W/b-bare-$v/rootfs/bin/
		for a in sh ls grep tr sed; do ln -s busybox $W/b-bare-$v/rootfs/bin/$a; done
		cp -L /lib64/ld-linux-x86-64.so.2 $W/b-bare-$v/rootfs/lib64/
		cp -L /usr/lib/x86_64-linux-gnu/libc.so.6 $W/b-bare-$v/rootfs/usr/lib/x86_64-linux-gnu/
	done
	with_hook $W/b-bare-off
	runc_run $W/b-bare-off
	echo "$OUT"
	check "glibc and ibv_devinfo alone, image_supply not set: ibv_devinfo cannot start (no libibverbs.so.1)" \
		bash -c 'grep -q "^memlock soft" <<<"$1" && ! grep -q "state:PORT_ACTIVE" <<<"$1"' _ "$OUT"
	with_hook $W/b-bare-on $SUPPLY
	runc_run $W/b-bare-on
	echo "$OUT"
	sed 's/^/# hook: /' $W/b-bare-on/hook.log | tee -a "$TAP"
	check "glibc and ibv_devinfo alone, image_supply = yes: starts (rc $RC: $(tail -c 300 <<<"$ERR"))" [ "$RC" = 0 ]
	check "glibc and ibv_devinfo alone, image_supply = yes: ibv_devinfo -d rxe0 shows PORT_ACTIVE" \
		bash -c 'grep -A1 -x "hca_id:rxe0" <<<"$1" | grep -qx "state:PORT_ACTIVE"' _ "$OUT"
	check "glibc and ibv_devinfo alone, image_supply = yes: the node's libibverbs, libnl and rxe provider given" \
		[ "$(grep "^lib " <<<"$OUT" | tr '\n' ' ')" = "lib libibverbs.so.1 lib libnl-3.so.200 lib libnl-route-3.so.200 lib librxe-rdmav34.so " ]
	check "glibc and ibv_devinfo alone, image_supply = yes: the loader cache rewritten" \
		grep -q "/etc/ld.so.cache rewritten with them first" $W/b-bare-on/hook.log
fi

section "the runtime shim over runc"
ln -sf "$HOOK" $W/oci-rdma-runtime
bundle $W/b-shim "$INSIDE" "$OPT_IN"
runc_run $W/b-shim $W/oci-rdma-runtime
echo "$OUT $ERR"
check_served "shim" conf
bundle $W/b-shim-off "$INSIDE" "$BIND_UVERBS"
runc_run $W/b-shim-off $W/oci-rdma-runtime
check_unserved "shim"
check "shim (not activated): the bound uverbs0 gives EPERM" has "$OUT" "/dev/uverbs-bound EPERM"

# ---- podman: precreate and the createRuntime hook from a hooks.d directory ----------------
section "podman with the shipped hooks.d files (precreate, createRuntime, poststop)"
mkdir -p $W/hooks.d
for f in "$SRC"/hooks.d/*.json.in; do
	sed "s#@BINDIR@#$(dirname "$HOOK")#" "$f" >"$W/hooks.d/$(basename "${f%.in}")"
done
printf '[containers]\ndefault_ulimits = []\n[engine]\nevents_logger = "file"\n' >$CONTAINERS_CONF
PODMAN=(podman --root $W/podman-root --runroot $W/podman-run --storage-driver vfs
	--runtime runc --cgroup-manager cgroupfs)
# pod_run NAME [OPTION...] -- CMD: podman run on a fresh rootfs, host network
pod_run() {
	local name=$1 opts=()
	shift
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	mk_rootfs "$W/$name"
	RC=0
	OUT=$("${PODMAN[@]}" run --rm --network host "${opts[@]}" --rootfs "$W/$name" /bin/sh -c "$1" \
		2>$W/$name.err </dev/null) || RC=$?
	ERR=$(cat $W/$name.err)
}
pod_run p-on --hooks-dir $W/hooks.d --annotation oci-rdma-hook/enable=true -- "$INSIDE"
echo "$OUT"
check_served "podman hooks.d" conf
check "podman hooks.d: the createRuntime hook wrote /etc/nccl.conf too" \
	has "$OUT" "conf $(head -1 <<<"$ENV_PLAN")"
pod_run p-off --hooks-dir $W/hooks.d -- "$INSIDE"
check_unserved "podman hooks.d"

section "CDI with podman"
mkdir -p /etc/cdi
"${ORH[@]}" cdi --output /etc/cdi/oci-rdma-hook.json 2>$W/cdi.err
check "cdi --output writes the spec ($(head -c 200 $W/cdi.err))" [ -s /etc/cdi/oci-rdma-hook.json ]
pod_run p-cdi --device rdma.oci-rdma-hook.io/hca=all -- "$INSIDE"
echo "$OUT"
check_served "CDI" conf
pod_run p-cdi-off -- "$INSIDE"
check_unserved "CDI"

# ---- 4. non-root workloads ------------------------------------------------------------------
section "non-root: uid 1000, no capability, 256 MiB registered with ibv_reg_mr"
REG='echo "uid $(id -u) caps $(grep CapEff /proc/self/status | cut -f2) memlock $(ulimit -l)"; /regmr rxe0 256'
bundle $W/b-nr "$REG" "$OPT_IN | $NONROOT"
cp "$REGMR" $W/b-nr/rootfs/regmr
with_hook $W/b-nr
runc_run $W/b-nr
echo "$OUT"
check "non-root (runc live hook): the workload is uid 1000 with no capability" \
	grep -q "^uid 1000 caps 0000000000000000 " <<<"$OUT"
check "non-root (runc live hook): ibv_reg_mr of 256 MiB succeeds" has "$OUT" "regmr rxe0 256 ok"
# the control: the device given by hand (node and grant), no hook: the runtime's 8 MiB
BY_HAND='.linux.devices += [{path: "/dev/infiniband/uverbs0", type: "c", major: 231, minor: 192, fileMode: 438}] | .linux.resources.devices += [{allow: true, type: "c", major: 231, minor: 192, access: "rwm"}]'
bundle $W/b-nr-off "$REG" "$NONROOT | $BY_HAND"
cp "$REGMR" $W/b-nr-off/rootfs/regmr
runc_run $W/b-nr-off
echo "$OUT"
check "non-root without the hook (device given by hand): 256 MiB cannot be registered" \
	grep -q "regmr rxe0 256 failed: ibv_reg_mr" <<<"$OUT"
mk_rootfs $W/p-nr
cp "$REGMR" $W/p-nr/regmr
OUT=$("${PODMAN[@]}" run --rm --network host --hooks-dir $W/hooks.d \
	--annotation oci-rdma-hook/enable=true --user 1000:1000 --cap-drop all \
	--rootfs $W/p-nr /bin/sh -c "$REG" 2>&1 </dev/null)
echo "$OUT"
check "non-root (podman): uid 1000 with no capability" grep -q "^uid 1000 caps 0000000000000000 " <<<"$OUT"
check "non-root (podman): ibv_reg_mr of 256 MiB succeeds" has "$OUT" "regmr rxe0 256 ok"

# ---- 4b. non-root through containerd's CRI ---------------------------------------------------
section "CRI: a non-root pod through containerd's CRI plugin, the handler written by configure"
CRI_SRC=$SRC
# shellcheck source=tests/cri/lib.sh
. "$SRC/tests/cri/lib.sh"
CRI_PY=$(cri_py) || not_ok "CRI: no python3 with grpcio and grpc_tools"
CD=$W/cri
cri_config $CD
"${ORH[@]}" configure --engine containerd --engine-config $CD/config.toml --handler rdma \
	--shim $W/oci-rdma-runtime >$W/configure.out 2>&1
# (a block of config.toml on containerd 1.x, or a drop-in it imports: containerd's own merged
# view says whether it is there)
check "CRI: configure --engine containerd adds the handler rdma ($(tr '\n' ' ' <$W/configure.out))" \
	bash -c 'containerd --config "$1" config dump | grep -q "runtimes\.rdma\]"' _ $CD/config.toml
containerd --config $CD/config.toml >$CD/containerd.log 2>&1 &
cd_pid=$!
for i in $(seq 150); do ctr -a $CD/containerd.sock version >/dev/null 2>&1 && break; sleep 0.2; done
# the workload image: mk_rootfs's tree without its /usr, which the pod mounts from the node
# (a hostPath volume) as the other containers have it
mk_rootfs $W/cri-rootfs
umount $W/cri-rootfs/usr
cp "$REGMR" $W/cri-rootfs/regmr
cri_images $CD "$PAUSE" $W/cri-rootfs >$W/cri-images.log 2>&1
rc=$?
check "CRI: the local pause and workload images imported (rc $rc: $(tail -c 300 $W/cri-images.log))" \
	[ $rc = 0 ]
for i in $(seq 150); do cri_at $CD status 2>/dev/null | grep -qx "RuntimeReady true" && break; sleep 0.2; done
# cri_pod NAME POD-JQ CTR-JQ: a host-network pod through the handler rdma whose container
# runs $REG as uid 1000 with no capability, /usr from the node; its log in $OUT
CRI_PODS=()
cri_pod() {
	local d=$W/cri-$1 i
	mkdir -p $d/logs
	cri_pod_json $d/pod.json "$1" 2 $d/logs "$2"
	cri_ctr_json $d/ctr.json 2 "echo orh-cri-ran; $REG; echo orh-cri-end" \
		'.mounts = [{container_path: "/usr", host_path: "/usr", readonly: true}]
		| .linux.security_context.run_as_user = {value: 1000}
		| .linux.security_context.run_as_group = {value: 1000}
		| .linux.security_context.capabilities = {drop_capabilities: ["ALL"]}'" | $3"
	cri_start_pod $CD $d "${CRI_HANDLER-rdma}" || not_ok "CRI $1: $CRI_ERR"
	[ -n "$CRI_POD" ] && CRI_PODS+=("$CRI_POD")
	for i in $(seq 300); do grep -q orh-cri-end $d/logs/work.log 2>/dev/null && break; sleep 0.2; done
	OUT=$(cri_at $CD logs "$CRI_CTR" 2>&1)
	echo "$OUT"
	check "CRI $1: the container ran (its marker, then its output)" \
		bash -c 'head -1 <<<"$1" | grep -qx orh-cri-ran && grep -qx orh-cri-end <<<"$1"' _ "$OUT"
}
cri_pod regmr "$OPT_IN" .
check "CRI non-root: the pod ran through the handler rdma" \
	[ "$(cri_at $CD inspectp "$CRI_POD" | jq -r .status.runtime_handler)" = rdma ]
check "CRI non-root: the workload is uid 1000 with no capability" \
	grep -q "^uid 1000 caps 0000000000000000 " <<<"$OUT"
check "CRI non-root: memlock is the configured ${MEMLOCK_KIB} KiB" \
	grep -q " memlock $MEMLOCK_KIB\$" <<<"$OUT"
check "CRI non-root: ibv_reg_mr of 256 MiB succeeds" has "$OUT" "regmr rxe0 256 ok"
# the control: uverbs0 given through CRI devices (as a device plugin does), not activated
cri_pod regmr-off . '.devices = [{container_path: "/dev/infiniband/uverbs0", host_path: "/dev/infiniband/uverbs0", permissions: "rwm"}]'
check "CRI non-root, uverbs0 through CRI devices, not activated: 256 MiB cannot be registered" \
	grep -q "regmr rxe0 256 failed: ibv_reg_mr" <<<"$OUT"
for p in "${CRI_PODS[@]}"; do
	cri_at $CD rmp -f "$p" >$W/rmp.err 2>&1 || not_ok "CRI: rmp -f $p: $(cat $W/rmp.err)"
done
kill $cd_pid
wait $cd_pid
for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $CD/"); do kill -9 "$p"; done
umount -R $CD/state/* 2>/dev/null

# ---- 4c. the same pod through NRI ----------------------------------------------------------------
# containerd 2.3.4 (the host's Go peer, tests/setup-debian.sh), config version 3 with NRI on,
# the plain runc handler and no handler of ours; `oci-rdma-hook nri` on its NRI socket
# once, in the cgroup v2 boot (tests/e2e/e2e-nri.sh runs the plugin under cgroup v1 on the
# host): the pod and its control take about a minute under TCG
if [ "$mode" = v2 ]; then
	section "NRI: a non-root pod through containerd 2.3.4's CRI with oci-rdma-hook nri, no handler"
	PEERS=/opt/oci-rdma-hook-peers/bin
	CD=$W/nri
	mkdir -p $CD/net.d
	cat >$CD/config.toml <<NRI_CONFIG
version = 3
root = "$CD/root"
state = "$CD/state"
[grpc]
  address = "$CD/containerd.sock"
[ttrpc]
  address = "$CD/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CD/opt"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "localhost/orh-pause:1"
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "$CD/net.d"
[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/amd64"
  snapshotter = "native"
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = "$CD/nri.sock"
  plugin_path = "$CD/nri-plugins"
  plugin_config_path = "$CD/nri-conf.d"
NRI_CONFIG
	PATH=$PEERS:$PATH containerd --config $CD/config.toml >$CD/containerd.log 2>&1 &
	cd_pid=$!
	for i in $(seq 150); do $PEERS/ctr -a $CD/containerd.sock version >/dev/null 2>&1 && break; sleep 0.2; done
	check "NRI: containerd 2.3.4 runs" \
		bash -c '"$1/ctr" -a "$2/containerd.sock" version | grep -Eq "Version: +v?2\.3\.4"' _ $PEERS $CD
	"$HOOK" nri --socket $CD/nri.sock --config "$CONF" 2>$W/nri-plugin.log &
	nri_pid=$!
	synced() { grep -q 'plugin .*50-oci-rdma-hook.* connected and synchronized' $CD/containerd.log; }
	for i in $(seq 150); do synced && break; sleep 0.2; done
	check "NRI: containerd has the plugin connected and synchronized" synced
	PATH=$PEERS:$PATH cri_images $CD "$PAUSE" $W/cri-rootfs >$W/nri-images.log 2>&1
	rc=$?
	check "NRI: the local images imported (rc $rc: $(tail -c 300 $W/nri-images.log))" [ $rc = 0 ]
	for i in $(seq 150); do cri_at $CD status 2>/dev/null | grep -qx "RuntimeReady true" && break; sleep 0.2; done
	CRI_PODS=()
	CRI_HANDLER=""
	cri_pod nri-regmr "$OPT_IN" .
	check "NRI non-root: the pod ran through the default runc handler, not rdma" \
		[ "$(cri_at $CD inspectp "$CRI_POD" | jq -r '.status.runtime_handler // ""')" != rdma ]
	check "NRI non-root: the plugin logged what it gave the container" \
		bash -c 'grep -F "$1" "$2" | grep -q "device(s)"' _ "$CRI_CTR" $W/nri-plugin.log
	check "NRI non-root: the workload is uid 1000 with no capability" \
		grep -q "^uid 1000 caps 0000000000000000 " <<<"$OUT"
	check "NRI non-root: memlock is the configured ${MEMLOCK_KIB} KiB" \
		grep -q " memlock $MEMLOCK_KIB\$" <<<"$OUT"
	check "NRI non-root: ibv_reg_mr of 256 MiB succeeds" has "$OUT" "regmr rxe0 256 ok"
	# the control: uverbs0 through CRI devices, not activated: the plugin gives nothing
	cri_pod nri-regmr-off . '.devices = [{container_path: "/dev/infiniband/uverbs0", host_path: "/dev/infiniband/uverbs0", permissions: "rwm"}]'
	check "NRI non-root, uverbs0 through CRI devices, not activated: 256 MiB cannot be registered" \
		grep -q "regmr rxe0 256 failed: ibv_reg_mr" <<<"$OUT"
	unset CRI_HANDLER
	for p in "${CRI_PODS[@]}"; do
		cri_at $CD rmp -f "$p" >$W/rmp.err 2>&1 || not_ok "NRI: rmp -f $p: $(cat $W/rmp.err)"
	done
	kill $nri_pid
	wait $nri_pid
	rc=$?
	check "NRI: SIGTERM ends the plugin with status 0 (got $rc)" [ $rc = 0 ]
	cat $W/nri-plugin.log
	kill $cd_pid
	wait $cd_pid
	for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $CD/"); do kill -9 "$p"; done
	umount -R $CD/state/* 2>/dev/null
fi

# ---- 5. traffic with what the plan gave ----------------------------------------------------------
section "traffic between two containers: rping (rdma_cm) and ib_write_bw with the plan's -d and -x"
FROM_CONF='hca=$(sed -n "s/^NCCL_IB_HCA==\{0,1\}\([^:,]*\).*/\1/p" /etc/nccl.conf); gidx=$(sed -n "s/^NCCL_IB_GID_INDEX=//p" /etc/nccl.conf); echo "plan: -d $hca -x $gidx"'
# pair NAME SERVER-CMD CLIENT-CMD [JQ-EDIT-SERVER] [JQ-EDIT-CLIENT]: two containers through
# the live hook, the server started first in the background; $SOUT, $COUT; $CRC. PAIR_CONF:
# their node config (default the installed one); PAIR_PREP: a command run in each bundle;
# PAIR_STOP_SERVER=1: the server is killed once the client has ended (a server whose client
# cannot reach it would otherwise wait for its own timeout)
pair() {
	local n=$1
	bundle $W/$n-s "$2" "$OPT_IN | ${4:-.}"
	bundle $W/$n-c "$3" "$OPT_IN | ${5:-.}"
	(cd $W/$n-s && eval "${PAIR_PREP:-true}")
	(cd $W/$n-c && eval "${PAIR_PREP:-true}")
	with_hook $W/$n-s ${PAIR_CONF:-}
	with_hook $W/$n-c ${PAIR_CONF:-}
	# files, not pipes: a process left in a container must not hold the lane
	(cd $W/$n-s && runc run $n-s >$W/$n-s.out 2>&1 </dev/null
		echo "rc $?" >>$W/$n-s.out) &
	sleep 3
	CRC=0
	(cd $W/$n-c && runc run $n-c >$W/$n-c.out 2>&1 </dev/null) || CRC=$?
	COUT=$(cat $W/$n-c.out)
	[ -n "${PAIR_STOP_SERVER:-}" ] && runc kill $n-s KILL >/dev/null 2>&1
	wait
	SOUT=$(cat $W/$n-s.out)
	runc delete -f $n-s >/dev/null 2>&1
	runc delete -f $n-c >/dev/null 2>&1
	echo "$SOUT"
	echo "$COUT"
}
pair rping "timeout 60 rping -s -a 10.0.3.15 -C 4 -v" "timeout 50 rping -c -a 10.0.3.15 -C 4 -v"
check "rping: the client exits 0 (rc $CRC)" [ "$CRC" = 0 ]
check "rping: the client got 4 pings back" [ "$(grep -c "ping data: rdma-ping" <<<"$COUT")" = 4 ]
check "rping: the server exits 0" grep -qx "rc 0" <<<"$SOUT"
pair bw "$FROM_CONF; timeout 60 ib_write_bw -d \$hca -x \$gidx -n 200 -s 65536 -F" \
	"$FROM_CONF; timeout 50 ib_write_bw -d \$hca -x \$gidx -n 200 -s 65536 -F 10.0.3.15"
check "ib_write_bw: both took -d rxe0 -x $RXE0_IDX from their own nccl.conf" \
	[ "$(grep -c "^plan: -d rxe0 -x $RXE0_IDX\$" <<<"$SOUT
$COUT")" = 2 ]
check "ib_write_bw: the client exits 0 (rc $CRC)" [ "$CRC" = 0 ]
check "ib_write_bw: a bandwidth line for 200 writes of 65536 bytes" grep -Eq '^ *65536 +200 ' <<<"$COUT"
# the image without the rxe provider given the node's (image_supply = yes, section 3's
# config): once, in the cgroup v2 boot
if [ "$mode" = v2 ]; then
	NORXE='rm -f rootfs/etc/libibverbs.d/rxe.driver'
	PAIR_CONF=$SUPPLY PAIR_PREP=$NORXE pair supplied \
		"ls /etc/libibverbs.d | grep -c rxe | sed 's/^/rxe files /'; timeout 60 rping -s -a 10.0.3.15 -C 2 -v" \
		"ls /etc/libibverbs.d | grep -c rxe | sed 's/^/rxe files /'; timeout 50 rping -c -a 10.0.3.15 -C 2 -v"
	check "image_supply = yes: rping between two containers given the node's provider (rc $CRC)" \
		[ "$CRC" = 0 -a "$(grep -c "ping data: rdma-ping" <<<"$COUT")" = 2 ]
	check "image_supply = yes: each had only our driver file for rxe" \
		[ "$(printf '%s\n%s\n' "$SOUT" "$COUT" | grep -c "^rxe files 1$")" = 2 ]
fi

# ---- 5b. the sysfs view: a container given rxe0 sees only rxe0 --------------------------------------
section "the sysfs view: a container given rxe0 of the node's two devices (rxe1 is down, the plan leaves it out)"
# the entries of the three class directories that name rxe0 (its own, its uverbs and umad
# nodes), and the class files: what the container must list, no more
VIEW_HOST=$(ls /sys/class/infiniband | tr '\n' ' ')
VIEW_WANT=$(for c in infiniband infiniband_verbs infiniband_mad; do
	for e in /sys/class/$c/*; do
		if [ -L "$e" ]; then
			if [ $c = infiniband ]; then d=${e##*/}; else d=$(cat "$e/ibdev"); fi
			[ "$d" = rxe0 ] || continue
		fi
		echo "sys $c/${e##*/}"
	done
done)
check "the node lists rxe0 and rxe1 in /sys/class/infiniband ($VIEW_HOST)" [ "$VIEW_HOST" = "rxe0 rxe1 " ]
VIEW_CLASSES=$(ls -d /sys/class/infiniband /sys/class/infiniband_verbs /sys/class/infiniband_mad 2>/dev/null | wc -l)
SYSVIEW='echo "memlock soft $(ulimit -Sl) hard $(ulimit -Hl)"
for c in infiniband infiniband_verbs infiniband_mad; do for e in /sys/class/$c/*; do echo "sys $c/${e##*/}"; done; done
ibv_devices 2>&1 | sed -n "3,\$ s/^[[:space:]]*\([^[:space:]]*\).*/ibv_devices \1/p"
ibv_devinfo -d rxe0 2>&1 | grep -E "hca_id|state:" | tr -d "\t" | sed "s/ *(.*//"
grep -L -x 0000:0000:0000:0000:0000:0000:0000:0000 /sys/class/infiniband/*/ports/*/gids/* 2>/dev/null | sed "s,^/sys/class/infiniband/,gid ," | cut -d/ -f1 | sort -u
true'
# check_view WAY: $OUT of SYSVIEW in a container given rxe0
check_view() {
	local way=$1
	check "$way: starts (rc $RC: $(tail -c 300 <<<"$ERR"))" [ "$RC" = 0 ]
	check "$way: the container ran" grep -q "^memlock soft" <<<"$OUT"
	check "$way: /sys/class/infiniband* list rxe0's entries only ($(grep "^sys " <<<"$OUT" | tr '\n' ' '))" \
		[ -n "$VIEW_WANT" -a "$(grep "^sys " <<<"$OUT")" = "$VIEW_WANT" ]
	check "$way: ibv_devices lists rxe0 alone ($(grep ^ibv_devices <<<"$OUT" | tr '\n' ' '))" \
		[ "$(grep ^ibv_devices <<<"$OUT")" = "ibv_devices rxe0" ]
	check "$way: ibv_devinfo -d rxe0 shows it PORT_ACTIVE" \
		bash -c 'grep -A1 -x "hca_id:rxe0" <<<"$1" | grep -qx "state:PORT_ACTIVE"' _ "$OUT"
	check "$way: a show_gids-style read of /sys/class/infiniband/*/ports/*/gids/* names rxe0 alone ($(grep ^gid <<<"$OUT" | tr '\n' ' '))" \
		[ "$(grep ^gid <<<"$OUT")" = "gid rxe0" ]
}
bundle $W/v-hook "$SYSVIEW" "$OPT_IN"
with_hook $W/v-hook
runc_run $W/v-hook
echo "$OUT"
sed 's/^/# hook: /' $W/v-hook/hook.log | tee -a "$TAP"
check_view "sysfs view (runc live hook)"
check "sysfs view (runc live hook): the hook covered the node's $VIEW_CLASSES class directories" \
	grep -q "sysfs view: 1 of 2 devices; $VIEW_CLASSES of /sys/class/infiniband\* covered" $W/v-hook/hook.log
bundle $W/v-shim "$SYSVIEW" "$OPT_IN"
runc_run $W/v-shim $W/oci-rdma-runtime
echo "$OUT"
check_view "sysfs view (runtime shim)"
check "the node still lists rxe0 and rxe1 in /sys/class/infiniband" \
	[ "$(ls /sys/class/infiniband | tr '\n' ' ')" = "rxe0 rxe1 " ]
pair view "ls /sys/class/infiniband | sed 's/^/sys /'; timeout 40 rping -s -a 10.0.3.15 -C 2 -v" \
	"ls /sys/class/infiniband | sed 's/^/sys /'; timeout 30 rping -c -a 10.0.3.15 -C 2 -v"
check "sysfs view: rping between two containers that see only rxe0 (rc $CRC)" \
	[ "$CRC" = 0 -a "$(grep -c "ping data: rdma-ping" <<<"$COUT")" = 2 ]
check "sysfs view: both containers of the rping listed rxe0 alone" \
	[ "$(grep "^sys " <<<"$SOUT
$COUT")" = "sys rxe0
sys rxe0" ]

# ---- 6. per-container GIDs, as CNI makes them ---------------------------------------------------
section "per-container GIDs: a macvlan of eth1 in each container's network namespace"
for i in 1 2; do
	ip netns add c$i
	ip link add mv$i link eth1 type macvlan mode bridge
	ip link set mv$i netns c$i
	ip -n c$i addr add 10.0.3.10$i/24 dev mv$i
	ip -n c$i link set mv$i up
	ip -n c$i link set lo up
done
sleep 1
IDX1=$(kernel_index rxe0 1 10.0.3.101 mv1)
IDX2=$(kernel_index rxe0 1 10.0.3.102 mv2)
check "the kernel gave each namespace's address its own GID (${IDX1:-none}, ${IDX2:-none})" \
	[ -n "$IDX1" ] && [ -n "$IDX2" ] && [ "$IDX1" != "$IDX2" ]
NS1='.linux.namespaces += [{type: "network", path: "/run/netns/c1"}]'
NS2='.linux.namespaces += [{type: "network", path: "/run/netns/c2"}]'
# (rxe on 6.1 carries no traffic between namespaces, see docs/vm-lane.md: the server is
# stopped once the client gave up)
PAIR_STOP_SERVER=1 pair cni "$FROM_CONF; timeout 25 rping -s -a 10.0.3.101 -C 2 -v" \
	"$FROM_CONF; timeout 20 rping -c -a 10.0.3.101 -C 2 -v" \
	"$NS1" "$NS2"
check "container in c1: NCCL_IB_GID_INDEX is its own address's index $IDX1" \
	grep -qx "plan: -d rxe0 -x $IDX1" <<<"$SOUT"
check "container in c2: NCCL_IB_GID_INDEX is its own address's index $IDX2" \
	grep -qx "plan: -d rxe0 -x $IDX2" <<<"$COUT"
if [ "$CRC" = 0 ]; then
	ok "rping between the two namespaces carried traffic"
else
	echo "# note: rping between the namespaces: rc $CRC: $(tail -3 <<<"$COUT" | tr '\n' ' ')" | tee -a "$TAP"
fi

# ---- 8. faults: rdma link delete while containers start -------------------------------------------
section "faults: rdma link delete of rxe0 while containers start"
ip netns del c1
ip netns del c2
rdma link delete rxe0
bundle $W/f-gone 'echo started; ls /dev/infiniband 2>&1; true' "$OPT_IN"
with_hook $W/f-gone
runc_run $W/f-gone
check "rxe0 deleted, rxe1 down: an activated container starts (rc $RC)" [ "$RC" = 0 ]
check "rxe0 deleted: the log says there is no usable device" \
	grep -Eq "container orh-vm-$run_n: .*no usable RDMA (device|port) on this node" $W/f-gone/hook.log
check "rxe0 deleted: the container got no RDMA node" ran_lacks "$OUT" started uverbs
rdma link add rxe0 type rxe netdev eth1
( for i in $(seq 8); do
	rdma link delete rxe0 2>/dev/null
	sleep 0.$((RANDOM % 5))
	rdma link add rxe0 type rxe netdev eth1 2>/dev/null
	sleep 0.$((RANDOM % 5))
done ) &
churn=$!
fault_rcs="" fault_logs=0 fault_ids=""
for i in $(seq 10); do
	if [ $((i % 2)) = 0 ]; then
		bundle $W/f$i 'echo started' .
	else
		bundle $W/f$i 'echo started' "$OPT_IN"
	fi
	with_hook $W/f$i
	runc_run $W/f$i
	fault_rcs="$fault_rcs $i:$RC"
	fault_ids="$fault_ids orh-vm-$run_n"
	if [ $((i % 2)) = 0 ]; then
		[ "$RC" = 0 ] && has "$OUT" started || not_ok "fault run $i (not activated): rc $RC, $ERR"
	fi
	grep -q "container orh-vm-$run_n: " $W/f$i/hook.log && fault_logs=$((fault_logs + 1))
	sed "s/^/# f$i: /" $W/f$i/hook.log
done
wait $churn
echo "# fault runs (run:rc):$fault_rcs" | tee -a "$TAP"
check "every container started while rxe0 came and went (on_error=warn):$fault_rcs" \
	bash -c '! grep -Eq ":[1-9]" <<<"$1"' _ "$fault_rcs"
check "every container's hook wrote a line naming it ($fault_logs of 10)" [ "$fault_logs" = 10 ]
left=$(runc list -q | grep -c . || true)
check "no container left behind ($left listed by runc)" [ "$left" = 0 ]
left=$(ls /run/oci-rdma-hook 2>/dev/null | wc -l)
check "no state directory left under /run/oci-rdma-hook ($left)" [ "$left" = 0 ]
left=$(find $W/f*/rootfs/etc $W/f*/rootfs/dev -name '*orh-*' 2>/dev/null | wc -l)
check "no temporary file left in the rootfs ($left)" [ "$left" = 0 ]

echo "# guest done" >>"$TAP"
