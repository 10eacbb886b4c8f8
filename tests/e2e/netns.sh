#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Per-container GID index: a container that joins a network namespace holding an address
# that the node's GID table lists at another index than the host address gets that
# index (and the namespace's default route interface) in its /etc/nccl.conf.
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v ip >/dev/null 2>&1 || cant_run "iproute2 (ip) not installed"
setup_work

NS="orh-e2e-$$"
DUMMY="orhd$$"
PEER="orhp$$"
cleanup_ns() {
	ip netns del "$NS" 2>/dev/null || true
	ip link del "$PEER" 2>/dev/null || true
}
trap 'rc=$?; cleanup_ns; cleanup_work $rc' EXIT

ip netns add "$NS" || cant_run "cannot create a network namespace"
# a dummy interface where the kernel has the driver, else one end of a veth pair
ip link add "$DUMMY" type dummy 2>/dev/null ||
	ip link add "$DUMMY" type veth peer name "$PEER" ||
	cant_run "cannot create a dummy or veth interface"
ip link set dev "$DUMMY" netns "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" addr add 192.168.77.10/24 dev "$DUMMY"
ip -n "$NS" link set "$DUMMY" up
ip -n "$NS" route add default via 192.168.77.1 dev "$DUMMY"

make_rootfs "$WORK/base"
cp -a "$WORK/base" "$WORK/r1"
cp -a "$WORK/base" "$WORK/r2"
make_node "$HERE/nodes/netns-roce.json" "$WORK/node"
write_conf "$WORK/hook.conf" "[containers]
activation = always"

"$HOOK" --sysroot "$WORK/node" --config "$WORK/hook.conf" env >"$WORK/host.env"
check "host plan: GID index 3 (the host address)" grep -qx "NCCL_IB_GID_INDEX=3" "$WORK/host.env"

JOIN="for n in c['linux']['namespaces']:
    if n['type'] == 'network': n['path'] = '/var/run/netns/$NS'"
make_bundle "$WORK/b1" "$WORK/r1" "$WORK/node" "$WORK/hook.conf" \
	'ip -4 -o addr show 2>/dev/null | grep -c 192.168.77.10; cat /etc/nccl.conf' "$JOIN"
run_ctr "$WORK/b1"
check "container in the namespace starts" [ "$RC" = 0 ]
check "the container holds the namespace's address" grep -qx 1 <<<"$(head -1 <<<"$OUT")"
check "container nccl.conf: GID index 5 (its own address's RoCE v2 entry)" \
	grep -qx "NCCL_IB_GID_INDEX=5" <<<"$OUT"
check "container nccl.conf: socket interface of its default route" \
	grep -qx "NCCL_SOCKET_IFNAME==$DUMMY" <<<"$OUT"

HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
make_bundle "$WORK/b2" "$WORK/r2" "$WORK/node" "$WORK/hook.conf" 'cat /etc/nccl.conf' "$HOSTNET"
run_ctr "$WORK/b2"
check "a host-network container keeps the host's GID index 3" grep -qx "NCCL_IB_GID_INDEX=3" <<<"$OUT"

# a fresh network namespace of its own (no path): only loopback, no default route
cp -a "$WORK/base" "$WORK/r3"
make_bundle "$WORK/b3" "$WORK/r3" "$WORK/node" "$WORK/hook.conf" 'cat /etc/nccl.conf'
run_ctr "$WORK/b3"
check "own fresh namespace: the host GID index 3" grep -qx "NCCL_IB_GID_INDEX=3" <<<"$OUT"
# (in the nccl.conf of a container that ran and got the plan: the GID index line)
check "own fresh namespace: no host interface as NCCL_SOCKET_IFNAME" \
	bash -c 'grep -qx "NCCL_IB_GID_INDEX=3" <<<"$1" && ! grep -q "^NCCL_SOCKET_IFNAME=" <<<"$1"' _ "$OUT"
# (in the log of a hook that ran: it names the container)
check "own fresh namespace: the hook read it (logged nothing about a failure)" \
	bash -c 'grep -q "container orh-e2e-$2-" "$1" && ! grep -q "network namespace" "$1"' _ \
	"$WORK/b3/hook.log" "$$"

# ---- the spec edit (the runtime shim): the namespace read through rtnetlink, by its path.
# An address on a veth (a pod's bridge network) is never in a GID table, and looking for
# it reads every entry of every port: the shim does not look. One on a link of another
# kind (a macvlan, a VLAN; here whichever of macvlan or ifb this kernel has) can be: it
# looks. (The node's table lists 192.168.77.10 at index 5 for both.)
NSV="orh-e2e-v$$" NSM="orh-e2e-m$$" VETH="orhv$$" MACV="orhm$$" PARENT="orhq$$"
cleanup_ns2() {
	ip netns del "$NSV" 2>/dev/null || true
	ip netns del "$NSM" 2>/dev/null || true
	ip link del "$VETH" 2>/dev/null || true
	ip link del "$PARENT" 2>/dev/null || true
	cleanup_ns
}
trap 'rc=$?; cleanup_ns2; cleanup_work $rc' EXIT
ip netns add "$NSV" && ip netns add "$NSM" || cant_run "cannot create network namespaces"
ip link add "$VETH" type veth peer name "${VETH}p" || cant_run "cannot create a veth pair"
ip link set dev "${VETH}p" netns "$NSV"
ip -n "$NSV" addr add 192.168.77.10/24 dev "${VETH}p"
ip -n "$NSV" link set "${VETH}p" up
ip -n "$NSV" route add default via 192.168.77.1 dev "${VETH}p"
have_macvlan=yes
{ ip link add "$PARENT" type dummy && ip link add "$MACV" link "$PARENT" type macvlan; } \
	2>/dev/null || ip link add "$MACV" type ifb 2>/dev/null || have_macvlan=no
[ "$have_macvlan" = no ] || ip link set dev "$MACV" netns "$NSM" || have_macvlan=no
if [ "$have_macvlan" = yes ]; then
	ip -n "$NSM" addr add 192.168.77.10/24 dev "$MACV"
	ip -n "$NSM" link set "$MACV" up
	ip -n "$NSM" route add default via 192.168.77.1 dev "$MACV"
fi
mkdir -p "$WORK/bin"
ln -s "$HOOK" "$WORK/bin/oci-rdma-runtime"
# shim_in NS ROOTFS: a container joining /var/run/netns/NS, run through the shim; its
# output (the address check, then /etc/nccl.conf) in $OUT
SHIM_N=0
shim_in() {
	SHIM_N=$((SHIM_N + 1))
	local b="$WORK/shim$SHIM_N" id="orh-e2e-$$-shim$SHIM_N"
	cp -a "$WORK/base" "$2"
	make_bundle "$b" "$2" "$WORK/node" "$WORK/hook.conf" \
		'ip -4 -o addr show 2>/dev/null | grep -c 192.168.77.10; cat /etc/nccl.conf' \
		"c.pop('hooks')
for n in c['linux']['namespaces']:
    if n['type'] == 'network': n['path'] = '/var/run/netns/$1'"
	RC=0
	OUT=$(OCI_RDMA_HOOK_CONFIG="$WORK/hook.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
		"$WORK/bin/oci-rdma-runtime" run --bundle "$b" "$id" 2>"$b/shim.err" </dev/null) || RC=$?
	"$WORK/bin/oci-rdma-runtime" delete -f "$id" >/dev/null 2>&1 || true
}
shim_in "$NSV" "$WORK/r4"
check "shim, veth: the container ran in the namespace and holds its address (rc $RC)" \
	bash -c '[ "$1" = 0 ] && [ "$(head -1 <<<"$2")" = 1 ]' _ "$RC" "$OUT"
check "shim, veth: GID index 3, the host's (a veth's address is not looked for)" \
	grep -qx "NCCL_IB_GID_INDEX=3" <<<"$OUT"
check "shim, veth: socket interface of the namespace's default route" \
	grep -qx "NCCL_SOCKET_IFNAME==${VETH}p" <<<"$OUT"
if [ "$have_macvlan" = yes ]; then
	shim_in "$NSM" "$WORK/r5"
	check "shim, a link of another kind: the container ran in the namespace and holds its address (rc $RC)" \
		bash -c '[ "$1" = 0 ] && [ "$(head -1 <<<"$2")" = 1 ]' _ "$RC" "$OUT"
	check "shim, a link of another kind: GID index 5 (its own address's RoCE v2 entry)" \
		grep -qx "NCCL_IB_GID_INDEX=5" <<<"$OUT"
else
	echo "# neither macvlan nor ifb here: the shim's case of another kind of link not run"
fi

finish
