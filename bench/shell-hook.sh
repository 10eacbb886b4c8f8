#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# The baseline for bench/run.sh: the job oci-rdma-hook's `env` does, done the way
# node operators' shell hooks do it today. It reads sysfs with `cat`, lists every GID
# entry of every port the way Mellanox's show_gids does (one `cat` per entry, then the
# type and netdev of every entry in use), picks the first RoCE v2 IPv4 GID of each port
# from those rows, and prints the same NCCL lines as the hook. Written for this
# benchmark in the style of such scripts; it is not a copy of any published one.
#
#   bash bench/shell-hook.sh [SYSROOT]     (reads SYSROOT/sys and SYSROOT/proc/net/route)
#
# It handles RoCE nodes with one GID index for all ports (the scale node); it is a
# yardstick, not a second implementation.

SYSROOT=${1:-}
IB=$SYSROOT/sys/class/infiniband
ZERO=0000:0000:0000:0000:0000:0000:0000:0000

# --- show_gids: one row per GID entry in use -----------------------------------------
# DEV PORT INDEX GID IPV4 VER NDEV
show_gids() {
	for dev in $(ls -v $IB); do
		for port in $(ls -v $IB/$dev/ports); do
			pdir=$IB/$dev/ports/$port
			for idx in $(ls -v $pdir/gids); do
				gid=$(cat $pdir/gids/$idx)
				if [ "$gid" = "$ZERO" ]; then
					continue
				fi
				ndev=$(cat $pdir/gid_attrs/ndevs/$idx 2>/dev/null)
				ver=$(cat $pdir/gid_attrs/types/$idx 2>/dev/null | grep -o '[Vv].*')
				if [ "$(echo $gid | cut -d: -f1-6)" = "0000:0000:0000:0000:0000:ffff" ]; then
					ipv4=$(printf '%d.%d.%d.%d' 0x${gid:30:2} 0x${gid:32:2} 0x${gid:35:2} 0x${gid:37:2})
				else
					ipv4=-
				fi
				echo "$dev $port $idx $gid $ipv4 ${ver:--} ${ndev:--}"
			done
		done
	done
}

# --- the default route's interface ---------------------------------------------------
default_if=$(awk 'NR > 1 && $2 == "00000000" && $8 == "00000000" { print $1; exit }' \
	$SYSROOT/proc/net/route)

rows=$(show_gids)

# --- usable ports: ACTIVE, Ethernet, not the default route's NIC ---------------------
hcas=""
index=""
for dev in $(ls -v $IB); do
	for port in $(ls -v $IB/$dev/ports); do
		pdir=$IB/$dev/ports/$port
		state=$(cat $pdir/state)
		case "$state" in
		*ACTIVE*) ;;
		*) continue ;;
		esac
		if [ "$(cat $pdir/link_layer)" != "Ethernet" ]; then
			continue
		fi
		netdev=$(echo "$rows" | awk -v d=$dev -v p=$port '$1 == d && $2 == p && $7 != "-" { print $7; exit }')
		if [ -n "$default_if" ] && [ "$netdev" = "$default_if" ]; then
			continue
		fi
		idx=$(echo "$rows" | awk -v d=$dev -v p=$port '$1 == d && $2 == p && $5 != "-" && $6 == "v2" { print $3; exit }')
		if [ -z "$idx" ]; then
			continue
		fi
		if [ -z "$index" ]; then
			index=$idx
		elif [ "$index" != "$idx" ]; then
			index=mixed
		fi
		hcas="${hcas:+$hcas,}$dev:$port"
	done
done

[ -n "$hcas" ] || exit 0
echo "NCCL_IB_HCA==$hcas"
if [ "$index" != mixed ]; then
	echo "NCCL_IB_GID_INDEX=$index"
fi
echo "NCCL_SOCKET_IFNAME==$default_if"
echo "NCCL_IB_TIMEOUT=22"
echo "NCCL_IB_QPS_PER_CONNECTION=8"
