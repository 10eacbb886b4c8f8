#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Kubernetes lane's pod network (tests/k8s/lib.sh installs it as the CNI plugin types
# orh-veth and loopback, @IP@ and @NSENTER@ replaced by the host's ip and nsenter): a veth
# pair with both ends in the pod's network namespace, eth0 holding the config's "address",
# and lo up. Nothing is made outside the pod's namespace, so nothing is left when it goes.
# ADD prints the result in the configuration's CNI version; DEL, CHECK and STATUS succeed; VERSION lists the versions.
conf=$(cat)
case $CNI_COMMAND in
VERSION)
	echo '{"cniVersion": "1.0.0", "supportedVersions": ["0.3.0", "0.3.1", "0.4.0", "1.0.0"]}'
	exit 0 ;;
ADD) ;;
*) exit 0 ;;
esac
# the result in the version the configuration names (containerd's loopback asks for its own)
ver=$(printf '%s' "$conf" | sed -n 's/.*"cniVersion": *"\([^"]*\)".*/\1/p')
type=$(printf '%s' "$conf" | sed -n 's/.*"type": *"\([^"]*\)".*/\1/p')
in_pod() { @NSENTER@ --net="$CNI_NETNS" @IP@ "$@"; }
if [ "$type" = loopback ]; then
	in_pod link set lo up || exit 1
	printf '{"cniVersion": "%s", "interfaces": [{"name": "lo", "sandbox": "%s"}], "ips": [{"version": "4", "address": "127.0.0.1/8", "interface": 0}]}\n' "$ver" "$CNI_NETNS"
	exit 0
fi
addr=$(printf '%s' "$conf" | sed -n 's/.*"address": *"\([^"]*\)".*/\1/p')
in_pod link add "$CNI_IFNAME" type veth peer name orh-peer >&2 &&
	in_pod addr add "$addr" dev "$CNI_IFNAME" >&2 &&
	in_pod link set "$CNI_IFNAME" up >&2 && in_pod link set orh-peer up >&2 || {
	printf '{"cniVersion": "1.0.0", "code": 999, "msg": "orh-veth: the veth pair in %s not made"}\n' "$CNI_NETNS"
	exit 1
}
mac=$(in_pod -o link show "$CNI_IFNAME" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
printf '{"cniVersion": "%s", "interfaces": [{"name": "%s", "mac": "%s", "sandbox": "%s"}], "ips": [{"version": "4", "address": "%s", "interface": 0}]}\n' \
	"$ver" "$CNI_IFNAME" "$mac" "$CNI_NETNS" "$addr"
