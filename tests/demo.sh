#!/usr/bin/env bash
# The main job, end to end: a real runc container started with the oci-rdma-hook
# createRuntime hook on the bundled sample node (the 9-NIC RoCE node of a public cloud
# guide: mlx5_0 on eth0 is the TCP NIC, mlx5_1..mlx5_8 the fabric). Debian 12, root.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

bash tests/setup-debian.sh --demo
[ -d build-demo ] || meson setup build-demo >/dev/null
meson compile -C build-demo src/oci-rdma-hook tests/e2e/probe >/dev/null

export HOOK=$src/build-demo/src/oci-rdma-hook PROBE=$src/build-demo/tests/e2e/probe
export MKNODE=$src/tests/mknode.py NODES=$src/tests/nodes
# shellcheck source=tests/e2e/lib.sh
. tests/e2e/lib.sh
need_root_runc
setup_work

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "The sample node: a fake sysfs tree with the kernel's layout, device nodes made with mknod"
make_node seed001-roce.json "$WORK/node"
table=$("$HOOK" --sysroot "$WORK/node" detect 2>&1)
sed -n '1,9p' <<<"$table" | cut -c1-112
echo "..."

say "What a container on this node gets (oci-rdma-hook env --explain)"
explain=$("$HOOK" --sysroot "$WORK/node" env --explain 2>&1 >/dev/null)
grep -v '^# mlx5_[2-8]:1 used' <<<"$explain"

say "Start a busybox container with runc; its image already has /etc/nccl.conf with NCCL_DEBUG=INFO"
make_rootfs "$WORK/rootfs"
echo "NCCL_DEBUG=INFO" >"$WORK/rootfs/etc/nccl.conf"
write_conf "$WORK/node.conf" ""
inside='echo "--- ls -l /dev/infiniband"; ls -l /dev/infiniband
echo "--- open the nodes (ENXIO/ENODEV: the device cgroup allows them and there is no hardware here; EPERM would be a denial)"
probe /dev/infiniband/uverbs1 /dev/infiniband/uverbs8 /dev/infiniband/rdma_cm
echo "--- ulimit -l (KiB)"; ulimit -l
echo "--- /etc/nccl.conf"; cat /etc/nccl.conf'
# host network, as on a training node (pods in their own namespace: tests/e2e/netns.sh)
make_bundle "$WORK/bundle" "$WORK/rootfs" "$WORK/node" "$WORK/node.conf" "$inside" \
	'c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
echo "runc run --bundle $WORK/bundle  (hooks.createRuntime: oci-rdma-hook createRuntime)"
run_ctr "$WORK/bundle"
printf '%s\n' "$OUT"

say "The hook's log (also in syslog, ident oci-rdma-hook)"
cat "$WORK/bundle/hook.log"

say "Result"
rc=0
grep -q '^/dev/infiniband/uverbs1 ENXIO$' <<<"$OUT" || { echo "uverbs1 is not usable"; rc=1; }
grep -q '^NCCL_IB_HCA==mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1$' <<<"$OUT" || { echo "NCCL_IB_HCA missing"; rc=1; }
grep -q '^NCCL_IB_GID_INDEX=3$' <<<"$OUT" || { echo "NCCL_IB_GID_INDEX missing"; rc=1; }
grep -q '^NCCL_SOCKET_IFNAME==eth0$' <<<"$OUT" || { echo "NCCL_SOCKET_IFNAME missing"; rc=1; }
grep -q '^NCCL_DEBUG=INFO$' <<<"$OUT" || { echo "the image's own line was lost"; rc=1; }
[ "$RC" = 0 ] || { echo "runc exited $RC: $ERR"; rc=1; }
if [ $rc = 0 ]; then
	echo "the container got its RDMA devices, a raised memlock limit and the NCCL settings"
	echo "(this machine cannot raise a hard rlimit: the hook raised the soft limit to the hard one)"
fi
exit $rc
