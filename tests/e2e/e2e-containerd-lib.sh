# SPDX-License-Identifier: Apache-2.0
# Sourced by e2e-containerd-shim.sh and e2e-docker-shim.sh after lib.sh: a private
# containerd (and dockerd) under $WORK, so nothing clashes with a daemon of the host or
# of another test, and the runtime shim installed as $WORK/bin/oci-rdma-runtime.
#
# The shim reads its config from OCI_RDMA_HOOK_CONFIG / OCI_RDMA_HOOK_SYSROOT in its own
# environment: containerd passes its environment to containerd-shim-runc-v2, which runs
# the runtime binary with it; so both are set in the daemon's environment here.

DAEMON_PIDS=()

stop_daemons() {
	local i
	for ((i = ${#DAEMON_PIDS[@]} - 1; i >= 0; i--)); do
		kill "${DAEMON_PIDS[$i]}" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "${DAEMON_PIDS[$i]}" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "${DAEMON_PIDS[$i]}" 2>/dev/null || true
	done
	# shims left by a killed containerd
	for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $WORK/" 2>/dev/null || true); do
		kill -9 "$p" 2>/dev/null || true
	done
	umount -R "$WORK"/cd/state/* 2>/dev/null || true
	umount -R "$WORK"/docker/exec/* "$WORK"/docker/data/* 2>/dev/null || true
}

# install_shim: $WORK/bin/oci-rdma-runtime -> the built binary (argv[0] dispatch)
install_shim() {
	mkdir -p "$WORK/bin"
	ln -sf "$HOOK" "$WORK/bin/oci-rdma-runtime"
	SHIM=$WORK/bin/oci-rdma-runtime
}

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds
wait_for() {
	local n=$(($1 * 10))
	shift
	while ! "$@" >/dev/null 2>&1; do
		n=$((n - 1))
		[ $n -gt 0 ] || return 1
		sleep 0.1
	done
}

# start_containerd CONF SYSROOT: $CD_SOCK is the private containerd's socket
start_containerd() {
	command -v containerd >/dev/null 2>&1 || cant_run "containerd not installed"
	command -v containerd-shim-runc-v2 >/dev/null 2>&1 || cant_run "containerd-shim-runc-v2 not installed"
	mkdir -p "$WORK/cd"
	CD_SOCK=$WORK/cd/containerd.sock
	cat >"$WORK/cd/config.toml" <<EOF
version = 2
root = "$WORK/cd/root"
state = "$WORK/cd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$CD_SOCK"
[ttrpc]
  address = "$CD_SOCK.ttrpc"
[debug]
  address = "$WORK/cd/debug.sock"
EOF
	OCI_RDMA_HOOK_CONFIG=$1 OCI_RDMA_HOOK_SYSROOT=$2 \
		containerd --config "$WORK/cd/config.toml" >"$WORK/cd/containerd.log" 2>&1 &
	DAEMON_PIDS+=($!)
	wait_for 30 ctr -a "$CD_SOCK" version ||
		cant_run "containerd did not start: $(tail -5 "$WORK/cd/containerd.log")"
}
