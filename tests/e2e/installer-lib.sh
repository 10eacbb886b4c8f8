# SPDX-License-Identifier: Apache-2.0
# Sourced by e2e-installer.sh and e2e-installer-engine.sh: the installer as the DaemonSet runs
# it (deploy/kubernetes/base/installer.yaml: its args, its ConfigMap's node config, the
# host's PID namespace and its capabilities), as its image built by a private dockerd or,
# in a build without the static binary, as the binary itself; the engines the installer
# finds behind a host root's socket, run as a service manager runs them; scratch host roots.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"
CRI_SRC=${ORH_SRCDIR:-$HERE/../..}
. "$CRI_SRC/tests/cri/lib.sh"
need_root_runc
# The image needs the static binary; a build without it (the sanitizer pass: -Dstatic=false)
# runs the same steps with the binary itself, the image's files under $WORK/imgroot (--from)
IMAGE_MODE=true
file_is_static "$HOOK" || IMAGE_MODE=false
if $IMAGE_MODE; then
	command -v dockerd >/dev/null 2>&1 || cant_run "dockerd (docker.io) not installed"
	command -v docker >/dev/null 2>&1 || cant_run "docker client not installed"
fi
command -v ctr >/dev/null 2>&1 || cant_run "ctr (containerd) not installed"
command -v jq >/dev/null 2>&1 || cant_run "jq not installed"
python3 -c 'import yaml' 2>/dev/null || cant_run "python3-yaml not installed"
[ -x "${PAUSE:-}" ] || cant_run "PAUSE (the static tests/cri/pause.c) not built"
[ -n "${ORH_BUILDDIR:-}" ] || cant_run "ORH_BUILDDIR not set"
CRI_PY=$(cri_py) ||
	cant_run "no python3 with grpc and grpc_tools (python3-grpcio, python3-grpc-tools)"

setup_work
INST=orh-e2e-inst-$$
CRI_PID=""
PODS=()
ENGINES=()
stop_all() {
	local id
	for id in "${PODS[@]}"; do
		[ -z "$id" ] || cri rmp -f "$id" >/dev/null 2>&1 || true
	done
	if [ -n "$CRI_PID" ]; then
		kill "$CRI_PID" 2>/dev/null || true
		wait "$CRI_PID" 2>/dev/null || true
		for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $WORK/" 2>/dev/null || true); do
			kill -9 "$p" 2>/dev/null || true
		done
		umount -R "$WORK"/cri/state/* 2>/dev/null || true
	fi
	! $IMAGE_MODE || docker rm -f "$INST" >/dev/null 2>&1 || true
	[ -z "${INST_PID:-}" ] || kill -9 "$INST_PID" 2>/dev/null || true
	[ -z "${CD2_PID:-}" ] || kill -9 "$CD2_PID" 2>/dev/null || true
	for e in "${ENGINES[@]}"; do engine_down "$e"; done
	for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $WORK/" 2>/dev/null || true); do
		kill -9 "$p" 2>/dev/null || true
	done
	umount -R "$WORK"/*/state/* 2>/dev/null || true
	stop_daemons
}
trap 'rc=$?; stop_all; cleanup_work $rc' EXIT

define() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$ORH_BUILDDIR/orh-config.h"; }
BINDIR=$(define ORH_BINDIR)
CONF=$(define ORH_DEFAULT_CONFIG)
HOOKS_DIR=$(define ORH_CONTAINERS_HOOKS_DIR)
FEATURE=/etc/kubernetes/node-feature-discovery/features.d/oci-rdma-hook
H=$WORK/host
# the shim as the engine on this machine finds it: in the scratch host root
SHIM=$H$BINDIR/oci-rdma-runtime

# ---- the DaemonSet's container: its args, and its ConfigMap's node config where they name it
DS=$CRI_SRC/deploy/kubernetes/base/installer.yaml
# shellcheck disable=SC2207 # one argument a line, none with white space
DS_ARGS=($(python3 -c 'import sys, yaml
ds = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "DaemonSet"][0]
print("\n".join(ds["spec"]["template"]["spec"]["containers"][0]["args"]))' "$DS"))
NODE_CONFIG=""
for ((i = 0; i < ${#DS_ARGS[@]} - 1; i++)); do
	[ "${DS_ARGS[$i]}" = --node-config ] && NODE_CONFIG=${DS_ARGS[$((i + 1))]}
done
[ -n "$NODE_CONFIG" ] || cant_run "no --node-config in the DaemonSet's args (${DS_ARGS[*]})"
CM=$WORK/configmap
mkdir -p "$CM"
# what the ConfigMap holds: kustomization.yaml generates it from this file
cp "$CRI_SRC/deploy/kubernetes/base/oci-rdma-hook.conf" "$CM/${NODE_CONFIG##*/}"
CM_CONF=$CM/${NODE_CONFIG##*/}
# the container's capabilities: docker run's words for its securityContext's
# shellcheck disable=SC2207
DS_CAPS=($(python3 -c 'import sys, yaml
ds = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "DaemonSet"][0]
caps = ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]
print("\n".join(["--cap-drop=" + c for c in caps.get("drop", [])] +
                ["--cap-add=" + c for c in caps.get("add", [])]))' "$DS"))
DS_HOSTPID=$(python3 -c 'import sys, yaml
ds = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "DaemonSet"][0]
print(ds["spec"]["template"]["spec"].get("hostPID") is True)' "$DS")
[ "$DS_HOSTPID" = True ] || cant_run "the DaemonSet has no hostPID: true"

# ---- the installer: the image run by a private dockerd, or the binary itself ---------------
# inst_start HOST ARG...: the installer in the background on HOST (its /host), with the
#   DaemonSet's args; inst_log: its output so far; inst_probe: its readinessProbe's command;
#   inst_stop: SIGTERM, its exit status in $INST_RC
# inst_once HOST ARG...: another installer, run to its end, its output on stdout
# Both with the host's PID namespace and the DaemonSet's capabilities; INST_ENV: their
#   environment (NAME=VALUE words); INST_PIDNS=private: a PID namespace of their own (no
#   hostPID); INST_NOCAP=CAP: without that capability too
INST_PID=""
INST_ENV=()
INST_PIDNS=host
INST_NOCAP=""
if $IMAGE_MODE; then
	start_containerd "$WORK/unused.conf" "$WORK/unused"
	D=$WORK/docker
	mkdir -p "$D"
	export DOCKER_HOST=unix://$D/docker.sock
	dockerd --data-root "$D/data" --exec-root "$D/exec" --pidfile "$D/docker.pid" \
		-H "$DOCKER_HOST" --containerd "$CD_SOCK" --storage-driver vfs --bridge none \
		--iptables=false --ip-masq=false --exec-opt native.cgroupdriver=cgroupfs \
		>"$D/dockerd.log" 2>&1 &
	DAEMON_PIDS+=($!)
	wait_for 60 docker version || cant_run "dockerd did not start: $(tail -5 "$D/dockerd.log")"
	IMAGE=$("$CRI_SRC/deploy/installer/build-image.sh" "$ORH_BUILDDIR" "orh-e2e-installer:$$" \
		2>"$WORK/build.err") || { not_ok "build-image.sh: $(cat "$WORK/build.err")"; finish || exit 1; }
	check "the image is built, its entrypoint install --root /host" \
		eval '[ "$(docker image inspect -f "{{json .Config.Entrypoint}}" "$IMAGE")" = \
			"[\"$BINDIR/oci-rdma-hook\",\"install\",\"--root\",\"/host\"]" ]'
	LAYERS=$(docker image inspect -f '{{len .RootFS.Layers}}' "$IMAGE" 2>&1 || true)
	check "the image is FROM scratch: one layer, its COPY (layers: $LAYERS)" [ "$LAYERS" = 1 ]
	VOLS=(-v "$CM:${NODE_CONFIG%/*}:ro" --tmpfs /run/oci-rdma-hook-installer)

	# docker_args: the DaemonSet's PID namespace, capabilities and INST_ENV
	docker_args() {
		local e
		DARGS=()
		for e in "${DS_CAPS[@]}"; do
			[ "$e" = "--cap-add=$INST_NOCAP" ] || DARGS+=("$e")
		done
		[ "$INST_PIDNS" = private ] || DARGS+=(--pid host)
		for e in "${INST_ENV[@]}"; do DARGS+=(-e "$e"); done
	}
	inst_start() {
		local h=$1
		shift
		docker_args
		docker run -d --name "$INST" --network none "${DARGS[@]}" -v "$h:/host" "${VOLS[@]}" \
			"$IMAGE" "${DS_ARGS[@]}" "$@" >/dev/null
	}
	inst_log() { docker logs "$INST" 2>&1; }
	inst_probe() { docker exec "$INST" /oci-rdma-hook install --probe; }
	inst_stop() {
		docker stop -t 30 "$INST" >/dev/null
		INST_RC=$(docker inspect -f '{{.State.ExitCode}}' "$INST")
	}
	inst_once() {
		local h=$1
		shift
		docker_args
		docker run --rm --network none "${DARGS[@]}" -v "$h:/host" "${VOLS[@]}" \
			"$IMAGE" "${DS_ARGS[@]}" "$@" 2>&1
	}
else
	DESTDIR=$WORK/imgroot meson install -C "$ORH_BUILDDIR" --no-rebuild --quiet >/dev/null ||
		cant_run "meson install into $WORK/imgroot failed"
	mkdir -p "$WORK/imgroot${NODE_CONFIG%/*}"
	cp "$CM_CONF" "$WORK/imgroot$NODE_CONFIG"
	# the DaemonSet's args, the ConfigMap's file under $WORK/imgroot
	LOCAL_ARGS=()
	for a in "${DS_ARGS[@]}"; do
		[ "$a" = "$NODE_CONFIG" ] && a=$WORK/imgroot$NODE_CONFIG
		LOCAL_ARGS+=("$a")
	done
	# ds_pre: in DS_PRE, the words that run a command with INST_ENV, in a PID namespace of
	#   its own under INST_PIDNS=private, without INST_NOCAP (this test's capabilities:
	#   root's all); a simple command, so that the installer started in the background is
	#   the process $! names (env and setpriv exec it)
	ds_pre() {
		DS_PRE=(env "${INST_ENV[@]}")
		[ "$INST_PIDNS" != private ] || DS_PRE+=(unshare --pid --fork --mount-proc)
		[ -z "$INST_NOCAP" ] || DS_PRE+=(setpriv "--bounding-set=-${INST_NOCAP,,}"
			"--inh-caps=-${INST_NOCAP,,}")
	}
	inst_start() {
		local h=$1
		shift
		ds_pre
		"${DS_PRE[@]}" "$HOOK" install --root "$h" --from "$WORK/imgroot" \
			--ready-file "$WORK/ready" "${LOCAL_ARGS[@]}" "$@" >"$WORK/inst.out" 2>&1 &
		INST_PID=$!
	}
	inst_log() { cat "$WORK/inst.out"; }
	inst_probe() { "$HOOK" install --probe --ready-file "$WORK/ready"; }
	inst_stop() {
		INST_RC=0
		kill -TERM "$INST_PID"
		wait "$INST_PID" || INST_RC=$?
		INST_PID=""
	}
	inst_once() {
		local h=$1
		shift
		ds_pre
		"${DS_PRE[@]}" "$HOOK" install --root "$h" --from "$WORK/imgroot" \
			--ready-file "$WORK/ready-once" "${LOCAL_ARGS[@]}" "$@" 2>&1
	}
fi

# add_binary DIR PROGRAM: this machine's PROGRAM and the libraries it loads, under DIR
add_binary() {
	local f bin
	bin=$(command -v "$2")
	for f in "$bin" $(ldd "$bin" | grep -o '/[^ ]*' | sort -u); do
		mkdir -p "$1$(dirname "$f")"
		cp -L "$f" "$1$f"
	done
}
add_containerd() { add_binary "$1" containerd; }
# snapshot DIR: every path with its type, mode and link target, and every file's sha256
snapshot() {
	(cd "$1" && find . -printf '%p %y %m %l\n' | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}

# ---- the engine behind a host root's socket, as a service manager runs it ------------------
# engine_up NAME ROOT CMD...: CMD (containerd --config ROOT-PATH ...) run as systemd runs
#   containerd (Restart=always): started again whenever it exits (containerd exits on the
#   installer's SIGHUP), in a mount namespace of its own where ENGINE_DIR (default
#   /etc/containerd) is ROOT's, so that the config its command line names is the host
#   root's (its sockets, state and root are named in that config, under $WORK; where this
#   machine has no such directory, a tmpfs on its nearest parent holds it); SIGHUP at its
#   default action, a soft memlock of 64 KiB (containers inherit it). ENGINE_ENV: its
#   environment (NAME=VALUE words). Its output in $WORK/NAME.log, the pid of the one running
#   now in $WORK/NAME.pid.
ENGINE_ENV=()
ENGINE_DIR=/etc/containerd
# shellcheck disable=SC2016
ENGINE_NS='d=$1 a=$1; shift
while [ ! -d "$a" ]; do a=${a%/*}; done
if [ "$a" != "$d" ]; then mount -t tmpfs tmpfs "$a" && mkdir -p "$d" || exit 1; fi
mount --bind "$0$d" "$d" && exec "$@"'
engine_up() {
	local name=$1 root=$2
	shift 2
	rm -f "$WORK/$name.stop" "$WORK/$name.pid"
	(
		ulimit -S -l 64
		while [ ! -e "$WORK/$name.stop" ]; do
			env --default-signal=HUP "${ENGINE_ENV[@]}" unshare -m --propagation private \
				sh -c "$ENGINE_NS" "$root" "$ENGINE_DIR" "$@" >>"$WORK/$name.log" 2>&1 &
			echo $! >"$WORK/$name.pid"
			wait $! || true
			sleep 0.3
		done
	) &
	echo $! >"$WORK/$name.supervisor"
	ENGINES+=("$name")
}
# engine_pid NAME: the pid of NAME's engine now
engine_pid() { cat "$WORK/$1.pid" 2>/dev/null; }
# engine_down NAME: the engine stopped, and not started again
engine_down() {
	local sup
	[ -e "$WORK/$1.supervisor" ] || return 0
	sup=$(cat "$WORK/$1.supervisor")
	touch "$WORK/$1.stop"
	kill "$(engine_pid "$1")" 2>/dev/null || true
	wait_for 10 bash -c '! kill -0 "$1"' _ "$sup" || kill -9 "$sup" 2>/dev/null || true
	rm -f "$WORK/$1.supervisor"
}
# engine_starts NAME: how many times NAME's engine started
engine_starts() { grep -c 'starting containerd' "$WORK/$1.log" 2>/dev/null || echo 0; }
