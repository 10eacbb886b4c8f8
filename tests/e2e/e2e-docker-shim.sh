#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: dockerd with the shim registered as a runtime in daemon.json
# ("runtimes": {"rdma": {"path": ".../oci-rdma-runtime"}}); `docker run --runtime=rdma`
# gives PID 1 the plan's variables, the devices and the memlock limit, keeps a variable
# the user set, and `docker run` with the default runtime stays untouched.
# containerd and dockerd are private to the test (own roots, sockets and pidfile).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"

need_root_runc
command -v dockerd >/dev/null 2>&1 || cant_run "dockerd (docker.io) not installed"
command -v docker >/dev/null 2>&1 || cant_run "docker client not installed"
setup_work
trap 'rc=$?; stop_daemons; cleanup_work $rc' EXIT

spec_edit_node
make_rootfs "$WORK/rootfs"
tar -C "$WORK/rootfs" -cf "$WORK/rootfs.tar" .
install_shim
start_containerd "$WORK/node.conf" "$WORK/node"

D=$WORK/docker
mkdir -p "$D"
cat >"$D/daemon.json" <<EOF
{
  "runtimes": {
    "rdma": { "path": "$SHIM" }
  }
}
EOF
export DOCKER_HOST=unix://$D/docker.sock
OCI_RDMA_HOOK_CONFIG=$WORK/node.conf OCI_RDMA_HOOK_SYSROOT=$WORK/node \
	dockerd --config-file "$D/daemon.json" --data-root "$D/data" --exec-root "$D/exec" \
	--pidfile "$D/docker.pid" -H "$DOCKER_HOST" --containerd "$CD_SOCK" \
	--storage-driver vfs --bridge none --iptables=false --ip-masq=false \
	--exec-opt native.cgroupdriver=cgroupfs >"$D/dockerd.log" 2>&1 &
DAEMON_PIDS+=($!)
wait_for 60 docker version || cant_run "dockerd did not start: $(tail -5 "$D/dockerd.log")"
docker import "$WORK/rootfs.tar" orh-e2e-bb:latest >/dev/null || cant_run "docker import failed"

run_docker() {
	RC=0
	OUT=$(docker run --rm --network none "$@" orh-e2e-bb /bin/sh -c "$INSIDE" \
		2>"$WORK/docker.err" </dev/null) || RC=$?
	ERR=$(cat "$WORK/docker.err")
}
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)

run_docker --runtime=rdma -e NCCL_IB_HCA=mine
check "docker run --runtime=rdma succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_spec_edit_inside
check "the container's output carries no shim message" \
	bash -c "! grep -q oci-rdma <<<\"\$1\$2\"" _ "$OUT" "$ERR"

run_docker
check "default runtime: container runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check "default runtime: no NCCL variable and no RDMA device" \
	bash -c "! grep -q -e '^NCCL_' -e infiniband <<<\"\$1\"" _ "$OUT"

docker rmi -f orh-e2e-bb >/dev/null 2>&1 || true
finish
