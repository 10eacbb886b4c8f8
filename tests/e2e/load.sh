#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Load: 200 runc containers started in parallel (LOAD_N, LOAD_P to change), each with the
# createRuntime and poststop hooks on the sample RoCE node, each in its own network
# namespace (loopback only). They share one read-only busybox rootfs, so every
# container gets its nccl.conf through a file generated under /run/oci-rdma-hook/<id>
# and bind-mounted (poststop removes it). Each container reports its device nodes, what
# opening one gives, `ulimit -l` and /etc/nccl.conf; all must be right and alike.
# Afterwards no container, no cgroup and nothing under /run/oci-rdma-hook is left.
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v xargs >/dev/null 2>&1 || cant_run "xargs not installed"
setup_work

N=${LOAD_N:-200}
P=${LOAD_P:-8}
BUDGET=${LOAD_BUDGET_S:-150}

make_rootfs "$WORK/rootfs"
printf 'NCCL_DEBUG=WARN\n' >"$WORK/rootfs/etc/nccl.conf"
make_node seed001-roce.json "$WORK/node"
write_conf "$WORK/hook.conf" "[containers]
activation = always"
INSIDE='for f in /dev/infiniband/*; do stat -c "%n %F %t:%T %a" $f; done; probe /dev/infiniband/uverbs1 /dev/infiniband/uverbs8; echo "memlock $(ulimit -l)"; echo ---; cat /etc/nccl.conf'
make_bundle "$WORK/b" "$WORK/rootfs" "$WORK/node" "$WORK/hook.conf" "$INSIDE" \
	"c['root']['readonly'] = True; c['hooks']['createRuntime'][0]['timeout'] = 60"
sum0=$(sha256sum <"$WORK/rootfs/etc/nccl.conf")
PREFIX="orh-load-$$"
mkdir -p "$WORK/out"

# the expected report of every container
{
	# the plan: rdma_cm and uverbs1-8 (uverbs0 is the front-end NIC; no umad/issm)
	for d in rdma_cm uverbs1 uverbs2 uverbs3 uverbs4 uverbs5 uverbs6 uverbs7 uverbs8; do
		echo "/dev/infiniband/$d character special file $(stat -c '%t:%T' "$WORK/node/dev/infiniband/$d") 666"
	done
	echo "/dev/infiniband/uverbs1 ENXIO"
	echo "/dev/infiniband/uverbs8 ENXIO"
	echo "memlock $(ulimit -Hl)"
} >"$WORK/expected.head"

cleanup_load() {
	for id in $(runc list -q 2>/dev/null | grep "^$PREFIX-" || true); do
		runc delete -f "$id" >/dev/null 2>&1 || true
	done
}
trap 'rc=$?; cleanup_load; cleanup_work $rc' EXIT

t0=$(date +%s)
export WORK PREFIX
seq 1 "$N" | timeout "$BUDGET" xargs -P "$P" -I{} sh -c \
	'runc run --bundle "$WORK/b" "$PREFIX-{}" >"$WORK/out/{}.out" 2>"$WORK/out/{}.err" </dev/null; echo $? >"$WORK/out/{}.rc"' ||
	not_ok "the $N containers did not all finish within ${BUDGET}s"
secs=$(($(date +%s) - t0))
echo "# $N containers, $P at a time, in ${secs}s"

ran=0 good=0 same=0
first=""
for i in $(seq 1 "$N"); do
	[ -f "$WORK/out/$i.rc" ] || continue
	# (ran: runc ran its process to the end, exit 0; a refused start is no run)
	[ "$(cat "$WORK/out/$i.rc")" != 0 ] || ran=$((ran + 1))
	o="$WORK/out/$i.out"
	if [ "$(cat "$WORK/out/$i.rc")" = 0 ] &&
		[ "$(sed -n '/^---$/q;p' "$o")" = "$(cat "$WORK/expected.head")" ] &&
		[ "$(sed -n '/^---$/,$p' "$o" | sed -n 2p)" = NCCL_DEBUG=WARN ] &&
		sed -n '/^---$/,$p' "$o" | grep -q '^NCCL_IB_HCA='; then
		good=$((good + 1))
	else
		[ "$good" -lt 3 ] && { echo "# container $i:"; sed 's/^/#   /' "$o" "$WORK/out/$i.err" | head -20; }
	fi
	# compared with the first report that has a memlock line: empty reports are not alike
	[ -n "$first" ] || ! grep -q '^memlock ' "$o" || first=$o
	[ -n "$first" ] && cmp -s "$o" "$first" && same=$((same + 1))
done
check "all $N containers ran (exit 0: $ran)" [ "$ran" = "$N" ]
check "all $N containers got the right devices, ENXIO (cgroup allows), memlock and nccl.conf ($good good)" [ "$good" = "$N" ]
check "all $N containers report the same" [ "$same" = "$N" ]
check "the whole run took at most ${BUDGET}s (${secs}s)" [ "$secs" -le "$BUDGET" ]
# what is unchanged or gone afterwards, of a run in which containers got the plan (a file
# generated for each and bind-mounted, a cgroup, a mount: nothing of a run that did not
# happen would be left either)
check "the shared image's nccl.conf is untouched" \
	[ "$good" -gt 0 -a "$(sha256sum <"$WORK/rootfs/etc/nccl.conf")" = "$sum0" ]

# nothing is left
check "no container of the run is left" [ "$good" -gt 0 -a -z "$(runc list -q | grep "^$PREFIX-")" ]
check "no cgroup of the run is left (v1 hierarchies and the unified one)" \
	bash -c '[ "$2" -gt 0 ] && [ -z "$(find /sys/fs/cgroup -maxdepth 3 -type d -name "$1-*" 2>/dev/null)" ]' _ \
	"$PREFIX" "$good"
check "nothing of the run is left under /run/oci-rdma-hook" \
	bash -c '[ "$2" -gt 0 ] && ! ls -A /run/oci-rdma-hook 2>/dev/null | grep -q "^$1-"' _ "$PREFIX" "$good"
check "no mount of the run is left" \
	bash -c '[ "$2" -gt 0 ] && ! grep -q "$1" /proc/self/mountinfo' _ "$WORK" "$good"

finish
