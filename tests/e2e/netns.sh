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

finish
