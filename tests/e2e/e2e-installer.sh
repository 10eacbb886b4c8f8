#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: the installer image (deploy/installer/build-image.sh, FROM scratch) built by
# a private dockerd, run as the DaemonSet runs it (deploy/kubernetes/installer.yaml) against
# a scratch host root that holds a containerd config (version 2) and a file of its own:
#   - `oci-rdma-hook install --root /host` puts the binary, the oci-rdma-runtime link, the
#     node config, the hooks.d files and the node-feature-discovery feature file there,
#     and registers the handler "rdma" in the host's containerd config;
#   - a containerd with its CRI plugin, started on that config, runs a pod through the
#     handler (tests/cri/cri.py): the copied shim serves it (the plan's settings inside);
#   - a second install over the first, after the node config was edited, changes nothing;
#   - SIGTERM (docker stop) undoes it: the host root is the original byte for byte, the
#     edited node config (and the directories holding it) left in place;
#   - with the host's PID namespace (the DaemonSet's hostPID) and a containerd listening on
#     the host root's socket, the installer finds its PID from the socket and sends SIGHUP;
#     --uninstall then undoes that install.
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
[ -x "${PAUSE:-}" ] || cant_run "PAUSE (the static tests/cri/pause.c) not built"
[ -n "${ORH_BUILDDIR:-}" ] || cant_run "ORH_BUILDDIR not set"
CRI_PY=$(cri_py) ||
	cant_run "no python3 with grpc and grpc_tools (python3-grpcio, python3-grpc-tools)"

setup_work
INST=orh-e2e-inst-$$
CRI_PID=""
POD=""
stop_all() {
	[ -z "$POD" ] || cri rmp -f "$POD" >/dev/null 2>&1 || true
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
	stop_daemons
}
trap 'rc=$?; stop_all; cleanup_work $rc' EXIT

define() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$ORH_BUILDDIR/orh-config.h"; }
BINDIR=$(define ORH_BINDIR)
CONF=$(define ORH_DEFAULT_CONFIG)
HOOKS_DIR=$(define ORH_CONTAINERS_HOOKS_DIR)
H=$WORK/host
# the shim as the engine on this machine finds it: in the scratch host root
SHIM=$H$BINDIR/oci-rdma-runtime

# ---- the installer: the image run by a private dockerd, or the binary itself ---------------
# inst_start HOST ARG...: the installer in the background on HOST (its /host)
# inst_log: its output so far; inst_stop: SIGTERM, its exit status in $INST_RC
# inst_once HOST ARG...: a second installer, run to its end, its output on stdout
INST_PID=""
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

	inst_start() {
		local h=$1
		shift
		docker run -d --name "$INST" --network none -v "$h:/host" "$IMAGE" "$@" >/dev/null
	}
	inst_log() { docker logs "$INST" 2>&1; }
	inst_stop() {
		docker stop -t 30 "$INST" >/dev/null
		INST_RC=$(docker inspect -f '{{.State.ExitCode}}' "$INST")
	}
	inst_once() {
		local h=$1
		shift
		docker run --rm --network none --pid host -v "$h:/host" "$IMAGE" "$@" 2>&1
	}
else
	DESTDIR=$WORK/imgroot meson install -C "$ORH_BUILDDIR" --no-rebuild --quiet >/dev/null ||
		cant_run "meson install into $WORK/imgroot failed"
	inst_start() {
		local h=$1
		shift
		"$HOOK" install --root "$h" --from "$WORK/imgroot" "$@" >"$WORK/inst.out" 2>&1 &
		INST_PID=$!
	}
	inst_log() { cat "$WORK/inst.out"; }
	inst_stop() {
		INST_RC=0
		kill -TERM "$INST_PID"
		wait "$INST_PID" || INST_RC=$?
		INST_PID=""
	}
	inst_once() {
		local h=$1
		shift
		"$HOOK" install --root "$h" --from "$WORK/imgroot" "$@" 2>&1
	}
fi

# ---- the scratch host root: a containerd config, and a file of the node's own ------------
CD=$WORK/cri
cri_config "$CD" 'restrict_oom_score_adj = true'
mkdir -p "$H/etc/containerd" "$H$BINDIR"
mv "$CD/config.toml" "$H/etc/containerd/config.toml"
echo '{"cniVersion": "0.4.0", "name": "orh-inst", "plugins": [{"type": "loopback"}]}' \
	>"$CD/net.d/10-orh-inst.conflist"
printf '#!/bin/sh\necho the node'"'"'s own\n' >"$H$BINDIR/node-tool"
chmod 755 "$H$BINDIR/node-tool"
# snapshot DIR: every path with its type, mode and link target, and every file's sha256
snapshot() {
	(cd "$1" && find . -printf '%p %y %m %l\n' | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}
snapshot "$H" >"$WORK/orig.snap"

# ---- install ------------------------------------------------------------------------------
installed() { inst_log | grep -qx "installed; waiting for SIGTERM to undo it"; }
inst_start "$H" --shim "$SHIM" || { not_ok "the installer's start"; finish || exit 1; }
check "the installer says it is installed and waits" \
	wait_for 30 installed
inst_log >"$WORK/install.log"
check "the binary is the built one" cmp "$HOOK" "$H$BINDIR/oci-rdma-hook"
check "oci-rdma-runtime links to it" [ "$(readlink "$SHIM")" = oci-rdma-hook ]
check "the node config is the default one" cmp "$CRI_SRC/conf/oci-rdma-hook.conf" "$H$CONF"
check "the hooks.d files name the installed binary" \
	jq -e --arg b "$BINDIR/oci-rdma-hook" '.hook.path == $b' "$H$HOOKS_DIR/oci-rdma-hook.json"
check "the node-feature-discovery feature file labels the node" \
	grep -qx 'feature.node.kubernetes.io/oci-rdma-hook-runtime=rdma' "$H/etc/kubernetes/node-feature-discovery/features.d/oci-rdma-hook"
check "containerd's config has the handler rdma, BinaryName the copied shim" \
	grep -qxF "  BinaryName = \"$SHIM\"" "$H/etc/containerd/config.toml"
check "no containerd was listening: the installer says it reads the config at its start" \
	grep -q 'no engine listens on /run/containerd/containerd.sock' "$WORK/install.log"

# ---- a pod through the handler, containerd started on the host root's config -------------
(
	ulimit -S -l 64
	export OCI_RDMA_HOOK_CONFIG=$H$CONF OCI_RDMA_HOOK_SYSROOT=$WORK/node
	exec containerd --config "$H/etc/containerd/config.toml" >"$CD/containerd.log" 2>&1
) &
CRI_PID=$!
cri() { cri_at "$CD" "$@"; }
spec_edit_node # $WORK/node (the sample node), $INSIDE
make_rootfs "$WORK/rootfs"
wait_for 30 ctr -a "$CD/containerd.sock" version ||
	cant_run "containerd did not start: $(tail -5 "$CD/containerd.log")"
cri_images "$CD" "$PAUSE" "$WORK/rootfs" >"$WORK/images.log" 2>&1 ||
	cant_run "the local images: $(cat "$WORK/images.log")"
wait_for 20 cri status || cant_run "the CRI is not ready: $(cri status 2>&1 | tr '\n' ' ')"
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$H$CONF" env)
P=$WORK/pod
mkdir -p "$P/logs"
cri_pod_json "$P/pod.json" installed 2 "$P/logs" '.annotations["oci-rdma-hook/enable"] = "true"'
cri_ctr_json "$P/ctr.json" 2 "echo orh-inst-ran; $INSIDE; echo orh-inst-end; exec sleep 600"
cri_start_pod "$CD" "$P" rdma || not_ok "the pod through rdma: $CRI_ERR"
POD=$CRI_POD
wait_for 20 grep -q orh-inst-end "$P/logs/work.log" || true
OUT=$(cri logs "$CRI_CTR" 2>&1 || true)
check "the pod's container ran (its first marker, its memlock line, its last marker)" \
	bash -c 'head -1 <<<"$1" | grep -qx orh-inst-ran && grep -q "^memlock " <<<"$1" &&
		grep -qx orh-inst-end <<<"$1"' _ "$OUT"
check_conf_has_plan "the pod through the installed handler: /etc/nccl.conf has the plan"
cri rmp -f "$POD" >/dev/null 2>&1 || not_ok "rmp -f $POD"
POD=""
kill "$CRI_PID"
wait "$CRI_PID" 2>/dev/null || true
CRI_PID=""
umount -R "$WORK"/cri/state/* 2>/dev/null || true

# ---- a second install over the first, the node config edited -----------------------------
echo '# edited by the operator' >>"$H$CONF"
cp "$H$CONF" "$WORK/edited.conf"
snapshot "$H" >"$WORK/installed.snap"
RC=0
inst_once "$H" --shim "$SHIM" --once >"$WORK/second.log" || RC=$?
check "a second install exits 0 (rc $RC: $(tail -2 "$WORK/second.log" | tr '\n' ' '))" [ "$RC" = 0 ]
check "it found the files installed (unchanged lines) and wrote no engine file" \
	bash -c 'grep -q "^unchanged .*/oci-rdma-hook$" "$1" && ! grep -Eq "^(created|changed|removed) /" "$1"' \
	_ "$WORK/second.log"
check "it changed nothing under the host root, the edited config kept" \
	diff "$WORK/installed.snap" <(snapshot "$H")

# ---- SIGTERM undoes it ----------------------------------------------------------------------
inst_stop
inst_log >"$WORK/undo.log"
check "the installer exited 0 after SIGTERM (status $INST_RC)" [ "$INST_RC" = 0 ]
check "it says it undid the installation" grep -q '^signal 15: undoing the installation' "$WORK/undo.log"
check "the edited node config is kept, as edited" cmp "$WORK/edited.conf" "$H$CONF"
# what may differ from the original: the edited config and the directories holding it
kept_re="^> ([0-9a-f]{64}  )?\\.${CONF%/*/*}(/oci-rdma-hook(/oci-rdma-hook\\.conf)?)?( |\$)"
check "the host root is the original byte for byte, apart from the edited config" \
	bash -c 'd=$(diff "$1" <(cd "$2" && find . -printf "%p %y %m %l\n" | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | grep "^[<>]");
		[ -n "$d" ] && ! grep -Ev "$3" <<<"$d"' _ "$WORK/orig.snap" "$H" "$kept_re"
check "containerd's config is the original, byte for byte" \
	bash -c 'grep -q "config.toml$" "$1" && grep "config.toml$" "$1" | grep "^[0-9a-f]" |
		diff - <(cd "$2" && sha256sum ./etc/containerd/config.toml)' _ "$WORK/orig.snap" "$H"

# ---- the engine signalled: a containerd listening on the host root's socket ---------------
# (the DaemonSet's hostPID: the PID behind the socket is one of the installer's namespace).
# containerd does not handle SIGHUP: it exits (status 129), for its service manager to
# start it again on the new config.
H2=$WORK/host2
mkdir -p "$H2/etc/containerd" "$H2/run/containerd" "$WORK/cd2"
cat >"$H2/etc/containerd/config.toml" <<EOF
version = 2
root = "$WORK/cd2/root"
state = "$WORK/cd2/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$H2/run/containerd/containerd.sock"
[ttrpc]
  address = "$H2/run/containerd/containerd.sock.ttrpc"
[debug]
  address = "$WORK/cd2/debug.sock"
EOF
# SIGHUP at its default action even where this test was started with it ignored (nohup),
# which a Go program keeps ignoring
env --default-signal=HUP containerd --config "$H2/etc/containerd/config.toml" \
	>"$WORK/cd2/containerd.log" 2>&1 &
CD2_PID=$!
wait_for 30 ctr -a "$H2/run/containerd/containerd.sock" version ||
	cant_run "containerd on host2 did not start: $(tail -5 "$WORK/cd2/containerd.log")"
RC=0
inst_once "$H2" --once >"$WORK/signal.log" || RC=$?
check "install --once with containerd running exits 0 (rc $RC)" [ "$RC" = 0 ]
check "it sent SIGHUP to containerd's PID ($CD2_PID), found behind its socket" \
	grep -qx "note: sent SIGHUP to pid $CD2_PID (behind /run/containerd/containerd.sock)" \
	"$WORK/signal.log"
CD2_RC=0
# a containerd still running after 10 s is killed, so that the check fails, not hangs
wait_for 10 bash -c '! kill -0 "$1"' _ "$CD2_PID" || kill -KILL "$CD2_PID" 2>/dev/null || true
wait "$CD2_PID" 2>/dev/null || CD2_RC=$?
check "containerd exited on SIGHUP (status $CD2_RC: 129), to be started again" [ "$CD2_RC" = 129 ]
RC=0
inst_once "$H2" --uninstall >"$WORK/uninstall.log" || RC=$?
check "install --uninstall with no containerd running: exit 0, the manifest gone (rc $RC)" \
	bash -c '[ "$1" = 0 ] && grep -q "^removed /var/lib/oci-rdma-hook/install.manifest$" "$2" &&
		[ ! -e "$3/var/lib/oci-rdma-hook" ]' _ "$RC" "$WORK/uninstall.log" "$H2"

finish
