#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: the installer image (deploy/installer/build-image.sh, FROM scratch) built by
# a private dockerd, run as the DaemonSet runs it (deploy/kubernetes/base/installer.yaml:
# its args, the host's PID namespace, its capabilities, its ConfigMap's node config mounted
# where they name it, an emptyDir for the ready file; installer-lib.sh) against scratch host
# roots:
#   - a host root with a containerd config (version 2), a containerd binary and a file of
#     its own, and containerd 1.6 with its CRI plugin listening on the host root's socket on
#     that config and the installed node config, started again when it exits as its service
#     manager does: `oci-rdma-hook install --root /host` puts the binary, the
#     oci-rdma-runtime link, the ConfigMap's node config and the hooks.d files there,
#     registers the handler "rdma", sends containerd SIGHUP, and says it is ready (the
#     readinessProbe's command) once the containerd behind the socket (its own binary, on the
#     config its command line names) reports the handler, before it writes the
#     node-feature-discovery feature file;
#   - pods through the handler (tests/cri/cri.py): a pod allocated uverbs2 (a device
#     plugin's DeviceSpec) gets mlx5_2 alone, an annotated pod allocated nothing is left
#     alone (the ConfigMap's activation = devices, request_scope = allocated);
#   - a second install over the first puts back the ConfigMap's node config edited on the
#     node, and changes nothing else;
#   - SIGTERM (docker stop) while a pod of the handler runs: the feature file first, then
#     the handler kept, said so; the pod is exec'd into and removed after it (containerd's
#     runc shim runs the kept shim for those); the kept shim's delete then finishes the undo
#     (install --uninstall --after-pid): containerd's config back byte for byte, the binary,
#     the link, the hooks.d files and the node config kept, and nothing else; --uninstall
#     after it has nothing to revert; --purge then leaves the host root as it was, byte for
#     byte;
#   - with the host's PID namespace (the DaemonSet's hostPID) and a containerd listening on
#     the host root's socket, the installer sends SIGHUP to its PID and is not ready while
#     no containerd is back; with one started again, it is;
#   - CONTAINERD_CONFIG and CONTAINERD_SOCKET name a config and a socket of their own; no
#     engine behind that socket: not ready;
#   - a dockerd listening on a host root's socket reloads its runtimes on SIGHUP, and the
#     installer is ready once `docker info` (the host root's client) has the runtime;
#   - k3s and rke2 are found by their paths, and their template is what is edited; ready
#     once k3s's containerd (run here as k3s starts it: -c the rendered config) has the
#     handler (k3s and rke2 are not run here: their paths and the template's format were
#     read in k3s's source);
#   - the reconcile (nvidia-ctk run while the installer runs), each host root's containerd
#     (1.6, or 2.3) listening on its socket.
# e2e-installer-engine.sh: the engine behind the socket (2.3.4 while /usr/bin/containerd is
# 1.6, another config, none, no hostPID, no CAP_SYS_PTRACE) and exec after the undo on 2.3.4.
. "$(dirname "$0")/installer-lib.sh"
# ---- the scratch host root: a containerd config and binary, and a file of the node's own ----
# containerd (1.6, the host root's /usr/bin/containerd) with its CRI plugin listens on the
# host root's socket as its service manager runs it (engine_up: started again on the
# installer's SIGHUP), in a mount namespace of its own whose /etc/containerd is the host
# root's: the paths configure wrote there (an imports line, a drop-in) are host paths
[ -d /etc/containerd ] || cant_run "no /etc/containerd to mount the host root's over"
CD=$WORK/cri
cri_config "$CD" 'restrict_oom_score_adj = true'
mkdir -p "$H/etc/containerd" "$H$BINDIR" "$H/run/containerd"
sed -e "s#\"$CD/containerd.sock#\"$H/run/containerd/containerd.sock#" "$CD/config.toml" \
	>"$H/etc/containerd/config.toml"
rm "$CD/config.toml"
ln -s "$H/run/containerd/containerd.sock" "$CD/containerd.sock"
echo '{"cniVersion": "0.4.0", "name": "orh-inst", "plugins": [{"type": "loopback"}]}' \
	>"$CD/net.d/10-orh-inst.conflist"
printf '#!/bin/sh\necho the node'"'"'s own\n' >"$H$BINDIR/node-tool"
chmod 755 "$H$BINDIR/node-tool"
add_containerd "$H"
# snap DIR: snapshot DIR without its sockets (the engines' own, made and left as they run)
snap() { snapshot "$1" | grep -v '^[^ ]* s '; }
snap "$H" >"$WORK/orig.snap"
cri() { cri_at "$CD" "$@"; }
spec_edit_node # $WORK/node (seed001-roce), $INSIDE
mkdir -p "$WORK/devplugin"
mknod "$WORK/devplugin/uverbs2" c 231 194
make_rootfs "$WORK/rootfs"
ENGINE_ENV=(OCI_RDMA_HOOK_CONFIG="$H$CONF" OCI_RDMA_HOOK_SYSROOT="$WORK/node")
engine_up cri "$H" containerd --config /etc/containerd/config.toml
ENGINE_ENV=()
wait_for 30 ctr -a "$CD/containerd.sock" version ||
	cant_run "containerd did not start: $(tail -5 "$WORK/cri.log")"
cri_images "$CD" "$PAUSE" "$WORK/rootfs" >"$WORK/images.log" 2>&1 ||
	cant_run "the local images: $(cat "$WORK/images.log")"
PID0=$(engine_pid cri)

# ---- install ------------------------------------------------------------------------------
installed() { inst_log | grep -qx "installed; waiting for SIGTERM to undo it"; }
inst_start "$H" --shim "$SHIM" || { not_ok "the installer's start"; finish || exit 1; }
check "the installer says it is installed and waits" \
	wait_for 60 installed
inst_log >"$WORK/install.log"
check "the binary is the built one" cmp "$HOOK" "$H$BINDIR/oci-rdma-hook"
check "oci-rdma-runtime links to it" [ "$(readlink "$SHIM")" = oci-rdma-hook ]
check "the node config is the ConfigMap's (activation = devices, request_scope = allocated)" \
	cmp "$CM_CONF" "$H$CONF"
check "the hooks.d files name the installed binary" \
	jq -e --arg b "$BINDIR/oci-rdma-hook" '.hook.path == $b' "$H$HOOKS_DIR/oci-rdma-hook.json"
# dump_has DIR CONFIG [SHIM]: containerd's own view of CONFIG in the root DIR (its imports
# there) has the handler rdma with BinaryName SHIM (default: the copied shim)
dump_has() {
	local table='^ *\[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.rdma.options\]'
	chroot "$1" "${4:-/usr/bin/containerd}" --config "$2" config dump 2>/dev/null |
		sed -n "/$table/,/^ *\[/p" | grep -qxE " *BinaryName = \"${3:-$SHIM}\""
}
check "containerd's own view (config dump): the handler rdma, BinaryName the copied shim" \
	dump_has "$H" /etc/containerd/config.toml
check "containerd was listening: the installer sent SIGHUP to its pid ($PID0)" \
	grep -qx "note: sent SIGHUP to pid $PID0 (behind /run/containerd/containerd.sock)" \
	"$WORK/install.log"
PID1=$(engine_pid cri)
check "ready once the containerd started again ($PID1), asked in the host root, has the handler" \
	grep -qxF "ready: containerd config dump of /etc/containerd/config.toml has handler 'rdma'$(
		) with $SHIM (pid $PID1: /usr/bin/containerd)" "$WORK/install.log"
PROBE_RC=0
PROBE_OUT=$(inst_probe 2>&1) || PROBE_RC=$?
check "the readinessProbe's command exits 0 (rc $PROBE_RC: $PROBE_OUT)" [ "$PROBE_RC" = 0 ]
check "the node-feature-discovery feature file labels the node" \
	grep -qx 'feature.node.kubernetes.io/oci-rdma-hook-runtime=rdma' "$H$FEATURE"
# line numbers in the installer's output: the engine's config, ready, then the label
line_of() { grep -n -m1 -e "$1" "$WORK/install.log" | cut -d: -f1; }
L_CFG=$(line_of '^\(changed\|created\) /etc/containerd/')
L_READY=$(line_of '^ready: ')
L_LABEL=$(line_of "^created $FEATURE\$")
# in_order N...: each a line number, each above the one before
in_order() {
	local prev=0 n
	for n in "$@"; do [ -n "$n" ] && [ "$n" -gt "$prev" ] || return 1; prev=$n; done
}
check "the feature file is written after the engine reported the handler ($L_CFG, $L_READY, $L_LABEL)" \
	in_order "$L_CFG" "$L_READY" "$L_LABEL"

# ---- pods through the handler ---------------------------------------------------------------
wait_for 30 cri status || cant_run "the CRI is not ready: $(cri status 2>&1 | tr '\n' ' ')"
# run_pod NAME POD-JQ CTR-JQ: the pod's container output in $OUT, checked to have run
run_pod() {
	local d=$WORK/pods/$1
	mkdir -p "$d/logs"
	cri_pod_json "$d/pod.json" "$1" 2 "$d/logs" "$2"
	cri_ctr_json "$d/ctr.json" 2 \
		"echo orh-inst-ran; $INSIDE; echo orh-inst-end; exec sleep 600" "$3"
	cri_start_pod "$CD" "$d" rdma || not_ok "$1: the pod through rdma: $CRI_ERR"
	PODS+=("$CRI_POD")
	wait_for 20 grep -q orh-inst-end "$d/logs/work.log" || true
	OUT=$(cri logs "$CRI_CTR" 2>&1 || true)
	check_ran "$1"
	check "$1: its container ran (its first and last markers)" \
		bash -c 'head -1 <<<"$1" | grep -qx orh-inst-ran && grep -qx orh-inst-end <<<"$1"' _ "$OUT"
}
ib_nodes() { sed -n 's#^/dev/infiniband/\([^ ]*\) .*#\1#p' <<<"$OUT" | sort | tr '\n' ' '; }
run_pod allocated . ".devices = [{container_path: \"/dev/infiniband/uverbs2\",
	host_path: \"$WORK/devplugin/uverbs2\", permissions: \"rwm\"}]"
check "allocated uverbs2: NCCL_IB_HCA names mlx5_2 alone ($(grep '^conf:NCCL_IB_HCA' <<<"$OUT"))" \
	grep -qx 'conf:NCCL_IB_HCA==mlx5_2:1' <<<"$OUT"
check "allocated uverbs2: only uverbs2 and rdma_cm (saw: $(ib_nodes))" \
	[ "$(ib_nodes)" = "rdma_cm uverbs2 " ]
# this pod runs on through the undo below, and is then exec'd into and removed
KEEP_POD=$CRI_POD KEEP_CTR=$CRI_CTR
run_pod annotated-only '.annotations["oci-rdma-hook/enable"] = "true"' .
check "annotated, allocated nothing: no NCCL setting, no RDMA device (saw: $(ib_nodes))" \
	out_lacks -e '^conf:NCCL_' -e '^/dev/infiniband'
cri rmp -f "$CRI_POD" >/dev/null 2>&1 || not_ok "rmp -f $CRI_POD"
PODS=("$KEEP_POD")

# ---- a second install over the first, the node config edited on the node -----------------
snap "$H" >"$WORK/installed.snap"
echo '# edited on the node' >>"$H$CONF"
RC=0
inst_once "$H" --shim "$SHIM" --once >"$WORK/second.log" || RC=$?
check "a second install exits 0 (rc $RC: $(tail -2 "$WORK/second.log" | tr '\n' ' '))" [ "$RC" = 0 ]
check "it puts back the ConfigMap's node config (updated), the others unchanged" \
	bash -c 'grep -qx "updated $2" "$1" && grep -q "^unchanged .*/oci-rdma-hook$" "$1"' \
	_ "$WORK/second.log" "$CONF"
check "it wrote no engine file" \
	bash -c '! grep -Eq "^(created|changed|removed) /etc/containerd" "$1"' _ "$WORK/second.log"
check "it changed nothing else under the host root" diff "$WORK/installed.snap" <(snap "$H")

# ---- SIGTERM while a pod of the handler runs: the handler kept; then --uninstall ----------
inst_stop
# what it printed from the signal on
inst_log | sed -n '/^signal 15: /,$p' >"$WORK/undo.log"
check "the installer exited 0 after SIGTERM (status $INST_RC)" [ "$INST_RC" = 0 ]
check "it says it undid the installation" \
	grep -q '^signal 15: undoing the installation' "$WORK/undo.log"
check "the feature file is gone" [ ! -e "$H$FEATURE" ]
L_LABEL=$(grep -n -m1 "^removed $FEATURE\$" "$WORK/undo.log" | cut -d: -f1)
L_KEPT=$(grep -n -m1 "^kept the handler 'rdma' in /etc/containerd/config.toml: 1 containers $(
	)still run through it (shim pid [0-9]*, bundle " "$WORK/undo.log" | cut -d: -f1)
check "the label went, then it kept the handler for the pod that runs through it, saying so (lines $L_LABEL, $L_KEPT)" \
	in_order "$L_LABEL" "$L_KEPT"
# same_file SNAPSHOT DIR PATH: PATH under DIR has the content it had in SNAPSHOT
same_file() {
	grep -qxF "$(cd "$2" && sha256sum ".$3")" "$1"
}
check "containerd's config is as installed" \
	same_file "$WORK/installed.snap" "$H" /etc/containerd/config.toml
check "the manifest still names the engine" \
	grep -q "^engine containerd" "$H/var/lib/oci-rdma-hook/install.manifest"
if $IMAGE_MODE; then
	L_READY=$(grep -n -m1 '^removed /run/oci-rdma-hook-installer/ready$' "$WORK/undo.log" |
		cut -d: -f1)
	check "the ready file is removed first ($L_READY, $L_LABEL)" in_order "$L_READY" "$L_LABEL"
else
	check "the readinessProbe's command fails once undone" \
		bash -c '! "$@" 2>/dev/null' _ "$HOOK" install --probe --ready-file "$WORK/ready"
fi
# the pod that ran through the handler before the undo: containerd's runc shim runs the
# handler's BinaryName, the kept shim, for exec, kill and delete
EXEC_OUT=$(cri exec "$KEEP_CTR" /bin/sh -c 'echo orh-exec-ran' 2>&1 || true)
check "after the undo, exec into the pod that ran before it goes through the kept shim ($EXEC_OUT)" \
	grep -qx orh-exec-ran <<<"$EXEC_OUT"
PID0=$(engine_pid cri)
RC=0
RMP_OUT=$(cri rmp -f "$KEEP_POD" 2>&1) || RC=$?
check "after the undo, the pod is stopped and removed through the kept shim (rc $RC: $RMP_OUT)" \
	[ "$RC" = 0 ]
PODS=()
# no pod of the handler left: the kept shim's delete finished the undo (install --uninstall
# --after-pid the pod's containerd 1.6 shim): the engine's part reverted, the files stay
check "the shim's delete finished the undo: containerd's config is the original, byte for byte" \
	wait_for 30 same_file "$WORK/orig.snap" "$H" /etc/containerd/config.toml
sed 's/^/# finish: /' "$H/var/lib/oci-rdma-hook/finish.log" 2>/dev/null
check "the finish's log: it reverted the config and signalled containerd ($PID0)" \
	bash -c 'grep -Eq "^(changed|removed) /etc/containerd/" "$1" &&
		grep -qx "note: sent SIGHUP to pid $2 (behind /run/containerd/containerd.sock)" "$1"' \
	_ "$H/var/lib/oci-rdma-hook/finish.log" "$PID0"
RC=0
inst_once "$H" --shim "$SHIM" --uninstall >"$WORK/uninstall.log" || RC=$?
check "install --uninstall after it exits 0 (rc $RC), with nothing left to revert (it ran: the files kept, said so)" \
	bash -c '[ "$1" = 0 ] && ! grep -Eq "^(changed|removed) /etc/containerd/" "$2" &&
		grep -q "^kept the binary, the hooks.d files and the node config" "$2"' \
	_ "$RC" "$WORK/uninstall.log"
check "the binary is kept" cmp "$HOOK" "$H$BINDIR/oci-rdma-hook"
check "the oci-rdma-runtime link is kept" [ "$(readlink "$SHIM")" = oci-rdma-hook ]
check "the hooks.d files are kept" [ -s "$H$HOOKS_DIR/oci-rdma-hook.json" ]
check "the node config is kept, the ConfigMap's" cmp "$CM_CONF" "$H$CONF"
check "it says what it kept and how to remove it" \
	grep -q 'install --purge removes them' "$WORK/uninstall.log"
# what differs from the original is what the manifest still lists, and the manifest itself
added() {
	diff "$WORK/orig.snap" <(snap "$H") | sed -n 's/^> //p' |
		sed -E 's/^[0-9a-f]{64}  //; s/ .*//' | LC_ALL=C sort -u
}
listed() {
	{ sed -n 's#^[dflcst] #.#p' "$H/var/lib/oci-rdma-hook/install.manifest"
	  echo ./var/lib/oci-rdma-hook/install.manifest; } | LC_ALL=C sort -u
}
check "nothing of the original is gone or changed" \
	bash -c '! diff "$1" <(cd "$2" && find . -printf "%p %y %m %l\n" | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | grep -q "^<"' \
	_ "$WORK/orig.snap" "$H"
check "what is left beside the original is what the manifest lists as kept" \
	diff <(added) <(listed)
check "the manifest no longer names an engine" \
	bash -c '! grep -q "^engine " "$1/var/lib/oci-rdma-hook/install.manifest"' _ "$H"
engine_down cri
umount -R "$WORK"/cri/state/* 2>/dev/null || true
RC=0
inst_once "$H" --purge >"$WORK/purge.log" || RC=$?
check "install --purge exits 0 (rc $RC)" [ "$RC" = 0 ]
check "after --purge the host root is the original byte for byte" \
	diff "$WORK/orig.snap" <(snap "$H")

# ---- the engine signalled: a containerd listening on the host root's socket ---------------
# (the DaemonSet's hostPID: the PID behind the socket is one of the installer's namespace).
# containerd does not handle SIGHUP: it exits (status 129), for its service manager to
# start it again on the new config; until one listens again the installer is not ready.
H2=$WORK/host2
mkdir -p "$H2/etc/containerd" "$H2/run/containerd"
# with its CRI plugin, whose handlers `containerd config dump` shows, listening on host2's
# socket
cri_config "$WORK/cd2" 'restrict_oom_score_adj = true'
sed -e "s#\"$WORK/cd2/containerd.sock#\"$H2/run/containerd/containerd.sock#" \
	"$WORK/cd2/config.toml" >"$H2/etc/containerd/config.toml"
add_containerd "$H2"
snap "$H2" >"$WORK/orig2.snap"
# start_cd2: containerd on host2's config (its /etc/containerd host2's, as engine_up runs
# it, but not started again on its own), SIGHUP at its default action even where this test
# was started with it ignored (nohup), which a Go program keeps ignoring
start_cd2() {
	env --default-signal=HUP unshare -m --propagation private sh -c "$ENGINE_NS" "$H2" \
		/etc/containerd containerd --config /etc/containerd/config.toml \
		>>"$WORK/cd2/containerd.log" 2>&1 &
	CD2_PID=$!
	wait_for 30 ctr -a "$H2/run/containerd/containerd.sock" version ||
		cant_run "containerd on host2 did not start: $(tail -5 "$WORK/cd2/containerd.log")"
}
start_cd2
RC=0
inst_once "$H2" --once --ready-timeout 5 >"$WORK/signal.log" || RC=$?
check "it sent SIGHUP to containerd's PID ($CD2_PID), found behind its socket" \
	grep -qx "note: sent SIGHUP to pid $CD2_PID (behind /run/containerd/containerd.sock)" \
	"$WORK/signal.log"
check "install --once with no containerd back after the signal: not ready, exit 1 (rc $RC)" \
	bash -c '[ "$1" = 1 ] && grep -qx "not ready: no engine listens on $3 since it was restarted" "$2"' \
	_ "$RC" "$WORK/signal.log" /run/containerd/containerd.sock
check "not ready: no feature file" [ ! -e "$H2$FEATURE" ]
CD2_RC=0
# a containerd still running after 10 s is killed, so that the check fails, not hangs
wait_for 10 bash -c '! kill -0 "$1"' _ "$CD2_PID" || kill -KILL "$CD2_PID" 2>/dev/null || true
wait "$CD2_PID" 2>/dev/null || CD2_RC=$?
check "containerd exited on SIGHUP (status $CD2_RC: 129), to be started again" [ "$CD2_RC" = 129 ]
# its service manager's part: containerd started again, on the config with the handler
start_cd2
RC=0
inst_once "$H2" --once >"$WORK/again.log" || RC=$?
check "with containerd back, install --once is ready (rc $RC) and labels the node" \
	bash -c '[ "$1" = 0 ] && grep -q "^ready: containerd config dump" "$2" && [ -s "$3" ]' \
	_ "$RC" "$WORK/again.log" "$H2$FEATURE"
kill "$CD2_PID" 2>/dev/null || true
wait "$CD2_PID" 2>/dev/null || true
CD2_PID=""
RC=0
inst_once "$H2" --purge >"$WORK/purge2.log" || RC=$?
check "install --purge with no containerd running: exit 0, the manifest gone (rc $RC)" \
	bash -c '[ "$1" = 0 ] && grep -q "^removed /var/lib/oci-rdma-hook/install.manifest$" "$2" &&
		[ ! -e "$3/var/lib/oci-rdma-hook" ]' _ "$RC" "$WORK/purge2.log" "$H2"
check "host2's config is the original again" \
	same_file "$WORK/orig2.snap" "$H2" /etc/containerd/config.toml

# ---- CONTAINERD_CONFIG and CONTAINERD_SOCKET, no engine listening ---------------------------
H4=$WORK/host4
mkdir -p "$H4/etc/custom"
printf 'version = 2\n' >"$H4/etc/custom/containerd.toml"
add_containerd "$H4"
snap "$H4" >"$WORK/orig4.snap"
INST_ENV=(CONTAINERD_CONFIG=/etc/custom/containerd.toml
	CONTAINERD_SOCKET=/run/custom/containerd.sock)
RC=0
inst_once "$H4" --once --ready-timeout 3 >"$WORK/env.log" || RC=$?
INST_ENV=()
check "CONTAINERD_CONFIG: that file is configured" \
	grep -qx "engine containerd: /etc/custom/containerd.toml" "$WORK/env.log"
check "CONTAINERD_CONFIG: containerd's view of that file has the handler" \
	dump_has "$H4" /etc/custom/containerd.toml "$BINDIR/oci-rdma-runtime"
check "CONTAINERD_SOCKET: no engine listens behind that socket: not ready, exit 1 (rc $RC)" \
	bash -c '[ "$1" = 1 ] && grep -qx "not ready: no engine listens on /run/custom/containerd.sock$(
		) (one started later reads the config as configured; not ready until it does)" "$2" &&
		[ ! -e "$3" ]' _ "$RC" "$WORK/env.log" "$H4$FEATURE"
check "no /etc/containerd was made" [ ! -e "$H4/etc/containerd" ]
inst_once "$H4" --purge >"$WORK/purge4.log" || not_ok "install --purge on host4"
# (a config of `version = 2` alone, which configure --undo must not take for one it made)
check "after --purge host4 is the original byte for byte ($(
	grep -m1 '^removed /etc/custom/containerd.toml' "$WORK/purge4.log"))" \
	diff "$WORK/orig4.snap" <(snap "$H4")

# ---- docker: dockerd reloads its runtimes on SIGHUP; ready once docker info has it --------
if command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1; then
	H6=$WORK/host6
	mkdir -p "$H6/etc/docker" "$H6/run" "$WORK/d6"
	printf '{\n  "log-level": "info"\n}\n' >"$H6/etc/docker/daemon.json"
	add_binary "$H6" docker
	[ -n "${CD_SOCK:-}" ] || start_containerd "$WORK/unused.conf" "$WORK/unused"
	env --default-signal=HUP dockerd --config-file "$H6/etc/docker/daemon.json" \
		--data-root "$WORK/d6/data" --exec-root "$WORK/d6/exec" --pidfile "$WORK/d6/pid" \
		-H "unix://$H6/run/docker.sock" --containerd "$CD_SOCK" --storage-driver vfs \
		--bridge none --iptables=false --ip-masq=false \
		--exec-opt native.cgroupdriver=cgroupfs >"$WORK/d6/dockerd.log" 2>&1 &
	D6_PID=$!
	DAEMON_PIDS+=("$D6_PID")
	D6=(docker -H "unix://$H6/run/docker.sock")
	wait_for 60 "${D6[@]}" version ||
		cant_run "dockerd on host6 did not start: $(tail -5 "$WORK/d6/dockerd.log")"
	snap "$H6" >"$WORK/orig6.snap"
	RC=0
	inst_once "$H6" --once --ready-timeout 30 >"$WORK/docker.log" || RC=$?
	check "docker: SIGHUP to dockerd ($D6_PID) behind its socket" \
		grep -qx "note: sent SIGHUP to pid $D6_PID (behind /run/docker.sock)" "$WORK/docker.log"
	check "docker: ready once docker info, run in the host root, has the runtime (rc $RC)" \
		bash -c '[ "$1" = 0 ] && grep -q "^ready: docker info of /etc/docker/daemon.json has handler" "$2" &&
			[ -s "$3" ]' _ "$RC" "$WORK/docker.log" "$H6$FEATURE"
	check "docker: the running dockerd reports it (docker info from here)" \
		bash -c '"$@" info --format "{{json .Runtimes}}" | grep -qF "\"rdma\":{\"path\":"' _ "${D6[@]}"
	RC=0
	inst_once "$H6" --purge >"$WORK/purge6.log" || RC=$?
	check "docker: --purge exits 0 (rc $RC) and host6 is the original byte for byte" \
		bash -c '[ "$1" = 0 ] && diff "$2" "$3"' _ "$RC" "$WORK/orig6.snap" <(snap "$H6")
else
	ok "docker: # SKIP no dockerd or docker client"
fi
# a daemon.json of `{}` alone, which configure --undo must not take for one it made
H7=$WORK/host7
mkdir -p "$H7/etc/docker"
echo '{}' >"$H7/etc/docker/daemon.json"
snap "$H7" >"$WORK/orig7.snap"
inst_once "$H7" --engine docker --once --ready-timeout 0 >/dev/null || true
inst_once "$H7" --purge >"$WORK/purge7.log" || true
check "docker: after --purge a daemon.json of {} is the original ($(
	grep -m1 '^removed /etc/docker/daemon.json' "$WORK/purge7.log"))" \
	diff "$WORK/orig7.snap" <(snap "$H7")

# ---- k3s and rke2: found by their paths, their template edited ----------------------------
K3S=/var/lib/rancher/k3s/agent/etc/containerd
K3S_BIN=/var/lib/rancher/k3s/data/current/bin/containerd
H3=$WORK/host3
mkdir -p "$H3$K3S"
# the config k3s rendered at its last start (version 2: the containerd here reads it), and
# k3s's containerd (this machine's, where k3s keeps its own)
cat >"$H3$K3S/config.toml" <<'EOF'
version = 2

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
EOF
add_containerd "$H3"
mkdir -p "$H3${K3S_BIN%/*}" "$H3/run/k3s/containerd"
mv "$H3/usr/bin/containerd" "$H3$K3S_BIN"
snap "$H3" >"$WORK/orig3.snap"
# k3s's containerd as k3s starts it (-c the rendered config, -a its socket, its state and
# root), its /var/lib/rancher host3's
ENGINE_DIR=$K3S
engine_up k3s "$H3" "$H3$K3S_BIN" -c "$K3S/config.toml" \
	-a "$H3/run/k3s/containerd/containerd.sock" --state "$WORK/k3s/state" --root "$WORK/k3s/root"
ENGINE_DIR=/etc/containerd
K3S_SOCK=$H3/run/k3s/containerd/containerd.sock
wait_for 30 ctr -a "$K3S_SOCK" version || cant_run "k3s's containerd did not start: $(
	tail -5 "$WORK/k3s.log")"
TMPL=$K3S/config.toml.tmpl
RC=0
inst_once "$H3" --once --ready-timeout 0 >"$WORK/k3s.log" || RC=$?
check "k3s is found by its path; version 2 rendered: its template config.toml.tmpl is edited" \
	grep -qx "engine k3s: $TMPL" "$WORK/k3s.log"
check "the template is made, k3s's base template first" \
	bash -c 'grep -qx "created $2" "$1" && head -1 "$3$2" | grep -qxF "$4"' \
	_ "$WORK/k3s.log" "$TMPL" "$H3" '{{ template "base" . }}'
check "the rendered config.toml is not edited" same_file "$WORK/orig3.snap" "$H3" "$K3S/config.toml"
check "configure appends the handler to the template (rc $RC: $(
	grep -m1 'oci-rdma-hook: install:' "$WORK/k3s.log"))" \
	grep -q 'runtimes.rdma' "$H3$TMPL"
# no k3s restarted (no systemctl under host3): the config it rendered has no handler yet
check "not ready while k3s's rendered config has no handler (rc $RC)" \
	bash -c '[ "$1" = 1 ] && [ ! -e "$4" ] &&
		grep -q "^not ready: containerd config dump of $2/config.toml has no handler" "$3"' \
	_ "$RC" "$K3S" "$WORK/k3s.log" "$H3$FEATURE"
# k3s's start: the rendered file is the base template (here: the last rendered file), then
# the template's other lines
{ cat "$H3$K3S/config.toml"; tail -n +2 "$H3$TMPL"; } >"$WORK/rendered.toml"
cp "$WORK/rendered.toml" "$H3$K3S/config.toml"
# k3s restarted by hand (systemctl restart k3s): its containerd started again on it
PID0=$(engine_pid k3s)
kill "$PID0"
wait_for 30 bash -c '[ "$(cat "$1")" != "$2" ] && ctr -a "$3" version' _ "$WORK/k3s.pid" "$PID0" \
	"$K3S_SOCK" || not_ok "k3s's containerd did not start again"
RC=0
inst_once "$H3" --once --ready-timeout 0 >"$WORK/k3s2.log" || RC=$?
check "ready once the rendered config has the handler, k3s's containerd asked (rc $RC)" \
	bash -c '[ "$1" = 0 ] &&
		grep -q "^ready: containerd config dump of $2/config.toml has handler" "$3"' \
	_ "$RC" "$K3S" "$WORK/k3s2.log"
engine_down k3s
RC=0
inst_once "$H3" --purge >"$WORK/purge3.log" 2>&1 || RC=$?
check "install --purge on host3 exits 0 (rc $RC: $(tail -1 "$WORK/purge3.log"))" [ "$RC" = 0 ]
# what differs from the original: the config k3s rendered, and nothing else
only_rendered_differs() {
	diff "$WORK/orig3.snap" <(snap "$H3") | grep '^[<>]' | grep -vF "$K3S/config.toml" |
		grep -q . && return 1
	return 0
}
check "after --purge host3 is the original but for the config k3s rendered (no template)" \
	only_rendered_differs
K3SV3=$WORK/host3v3
mkdir -p "$K3SV3$K3S"
printf 'version = 3\n' >"$K3SV3$K3S/config.toml"
inst_once "$K3SV3" --once --ready-timeout 0 >"$WORK/k3sv3.log" || true
check "k3s with version 3 rendered: its template is config-v3.toml.tmpl" \
	grep -qx "engine k3s: $K3S/config-v3.toml.tmpl" "$WORK/k3sv3.log"
# k3s renders config-v3.toml.tmpl on its version 3 base template, whose CRI runtime plugin is
# io.containerd.cri.v1.runtime (containerd 2.x): the handler's table must be that plugin's
check "the handler in config-v3.toml.tmpl is io.containerd.cri.v1.runtime's" \
	grep -q '^\[plugins\."io\.containerd\.cri\.v1\.runtime"\.containerd\.runtimes\.rdma\]' \
	"$K3SV3$K3S/config-v3.toml.tmpl"
RKE2=/var/lib/rancher/rke2/agent/etc/containerd
H5=$WORK/host5
mkdir -p "$H5$RKE2"
printf 'version = 2\n' >"$H5$RKE2/config.toml"
inst_once "$H5" --once --ready-timeout 0 >"$WORK/rke2.log" || true
check "rke2 is found by its path; version 2 rendered: its template config.toml.tmpl" \
	grep -qx "engine rke2: $RKE2/config.toml.tmpl" "$WORK/rke2.log"


# ---- the installer reconciles: the GPU Operator's nvidia-ctk re-run while it runs --------
# nvidia-ctk 1.20 (tests/setup-debian.sh builds it) sets nvidia as the default runtime, with
# its drop-in, or with --config-source=command (a copy of containerd's merged config); the
# installer sees the change (inotify), is not ready while the node is drifted, configures
# again (the node config then chains nvidia), says so, and is ready again. Judged by
# containerd 1.6's and 2.3's `config dump` and by configure --check.
PEERS=${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}
NVCTK=$PEERS/nvidia-ctk CD2X=$PEERS/containerd
NV=/usr/local/nvidia/toolkit/nvidia-container-runtime
# where an upgrade of the GPU Operator moves it: the default runtime's binary changes
NV2=/usr/local/nvidia/toolkit-2/nvidia-container-runtime
INST_SHIM=$BINDIR/oci-rdma-runtime
if [ -x "$NVCTK" ] && [ -x "$CD2X" ] && command -v unshare >/dev/null 2>&1; then
	# nvidia_ctk ROOT DUMP-PATH RUNTIME ARGS...: nvidia-ctk with ROOT/etc as /etc, DUMP-PATH
	# first in its PATH (the containerd whose `config dump` --config-source=command reads),
	# nvidia's runtime RUNTIME
	nvidia_ctk() {
		local root=$1 path=$2 rt=$3
		shift 3
		PATH=$path:$PATH unshare -m bash -c \
			'mount --make-rprivate / && mount --bind "$0/etc" /etc && exec "$@"' "$root" \
			"$NVCTK" runtime configure --runtime=containerd --nvidia-runtime-path="$rt" \
			--config=/etc/containerd/config.toml --set-as-default "$@" >>"$WORK/nvctk.log" 2>&1
	}
	# merged ROOT BIN: BIN (under ROOT)'s `config dump` of ROOT's config
	merged() { chroot "$1" "$2" --config /etc/containerd/config.toml config dump 2>/dev/null; }
	# view_ok ROOT BIN RUNTIME: the merged view has rdma (our shim) and nvidia (RUNTIME),
	# nvidia the default
	view_ok() {
		local d
		d=$(merged "$1" "$2") || return 1
		grep -qE "^ *default_runtime_name = [\"']nvidia[\"']$" <<<"$d" &&
			grep -qE "containerd\.runtimes\.nvidia\]$" <<<"$d" &&
			grep -qE "^ *BinaryName = [\"']$3[\"']$" <<<"$d" &&
			grep -qE "^ *BinaryName = [\"']$INST_SHIM[\"']$" <<<"$d"
	}
	# settled ROOT [RUNTIME]: ready (the probe), the view of each containerd under ROOT right
	# (1.6 and 2.3 where ROOT has both), the node config chaining nvidia (RUNTIME, else $NV),
	# and configure --check finding nothing to change
	settled() {
		local rt=${2:-$NV}
		inst_probe >/dev/null 2>&1 && view_ok "$1" /usr/bin/containerd "$rt" &&
			{ [ ! -e "$1/opt/cd2/containerd" ] || view_ok "$1" /opt/cd2/containerd "$rt"; } &&
			grep -qx "runtime = $rt" "$1$CONF" &&
			"$HOOK" --config "$CONF" configure --engine containerd --root "$1" --check
	}
	# new_host NAME VERSION: a host root with a config of that version; version 2: containerd
	# 1.6 its engine (what the installer asks) and 2.3 under /opt/cd2; else 2.3 its engine
	new_host() {
		local h=$WORK/$1
		mkdir -p "$h/etc/containerd" "$h/usr/bin" "$h/run/containerd"
		printf 'version = %s\n' "$2" >"$h/etc/containerd/config.toml"
		# (2.x: NRI off, whose default socket is this machine's)
		[ "$2" = 2 ] ||
			echo 'disabled_plugins = ["io.containerd.nri.v1.nri"]' >>"$h/etc/containerd/config.toml"
		add_binary "$h" "$CD2X"
		if [ "$2" = 2 ]; then
			add_containerd "$h"
			mkdir -p "$h/opt/cd2"
			cp "$CD2X" "$h/opt/cd2/containerd"
		else
			cp "$CD2X" "$h/usr/bin/containerd"
		fi
		echo "$h"
	}
	# host_engine NAME BIN: BIN (under NAME's root: 1.6 or 2.3) on its config, listening on its
	# socket, as its service manager runs it; its root and state under $WORK/NAME
	host_engine() {
		local h=$WORK/$1
		engine_up "$1" "$h" "$2" --config /etc/containerd/config.toml \
			--address "$h/run/containerd/containerd.sock" --root "$WORK/$1/root" \
			--state "$WORK/$1/state"
		wait_for 30 ctr -a "$h/run/containerd/containerd.sock" version ||
			cant_run "containerd on $1 did not start: $(tail -5 "$WORK/$1.log")"
	}
	reasserts() { inst_log | grep -c '^re-asserted: ' || true; }
	watching() { inst_log | grep -q "^watching the engine's config"; }
	rate_limited() { inst_log | grep -q '^rate-limited: '; }
	reasserted_logged() { inst_log | sed -n '/^re-asserted: /,$p' | grep -q '^ready: '; }
	reasserted_settled() { [ "$(reasserts)" -gt "$1" ] && settled "$2" "$3"; }
	# (the handler rdma once in ROOT's 2.3 view)
	rdma_once() {
		[ "$(merged "$1" /usr/bin/containerd | grep -c 'containerd\.runtimes\.rdma\]$')" = 1 ]
	}
	! $IMAGE_MODE || docker rm -f "$INST" >/dev/null 2>&1 || true
	H8=$(new_host host8 2)
	host_engine host8 /usr/bin/containerd
	inst_start "$H8" || not_ok "the installer's start on host8"
	check "reconcile: the installer on host8 is installed and watches" wait_for 30 watching
	check "reconcile: ready before nvidia-ctk" wait_for 15 inst_probe
	# 1. nvidia-ctk's drop-in, containerd 1.6 (ours first: nvidia-ctk after the installer)
	nvidia_ctk "$H8" /usr/bin "$NV"
	check "reconcile 1.6, drop-in: within 15 s ready again, nvidia the default, both handlers in 1.6's and 2.3's view, the node config chaining nvidia, nothing for configure to change" \
		wait_for 15 settled "$H8"
	wait_for 5 reasserted_logged || true
	inst_log >"$WORK/reconcile.log"
	L_DRIFT=$(grep -n -m1 '^not ready: drifted: .*not as configure would leave them' \
		"$WORK/reconcile.log" | cut -d: -f1)
	L_RE=$(grep -n -m1 '^re-asserted: .*changed ' "$WORK/reconcile.log" | cut -d: -f1)
	L_READY=$(sed -n "${L_RE:-1},\$p" "$WORK/reconcile.log" | grep -n -m1 '^ready: ' | cut -d: -f1)
	[ -z "$L_READY" ] || L_READY=$((L_RE + L_READY - 1))
	check "reconcile: not ready (drifted), then one line naming what it re-asserted, then ready ($L_DRIFT, $L_RE, $L_READY)" \
		in_order "$L_DRIFT" "$L_RE" "$L_READY"
	in_order "$L_DRIFT" "$L_RE" "$L_READY" || sed -n '/^watching /,$s/^/# /p' "$WORK/reconcile.log"
	check "reconcile: the re-assert line names the node config it rewrote" \
		grep -q "^re-asserted: .*changed $CONF" "$WORK/reconcile.log"
	# 2. right after: nvidia-ctk with --config-source=command (containerd 1.6's dump), the
	# runtime moved: the second re-assert within 10 s is put off, the node not ready meanwhile
	N=$(reasserts)
	nvidia_ctk "$H8" /usr/bin "$NV2" --config-source=command
	check "reconcile: a second change within 10 s is rate-limited, said in the log" \
		wait_for 5 rate_limited
	PROBE_RC=0
	inst_probe >/dev/null 2>&1 || PROBE_RC=$?
	check "reconcile: not ready while drifted and rate-limited (probe rc $PROBE_RC)" \
		[ "$PROBE_RC" != 0 ]
	check "reconcile 1.6, --config-source=command: within 15 s re-asserted and settled" \
		wait_for 15 reasserted_settled "$N" "$H8" "$NV2"
	# 3. its re-run, nothing moved: the merged config copied again, nothing to re-assert
	N=$(reasserts)
	nvidia_ctk "$H8" /usr/bin "$NV2" --config-source=command
	sleep 3
	check "reconcile 1.6, the same re-run: settled, no re-assert ($(reasserts) after $N)" \
		bash -c '[ "$1" = "$2" ]' _ "$N" "$(reasserts)"
	check "reconcile 1.6, the same re-run: still settled" settled "$H8" "$NV2"
	inst_stop
	engine_down host8
	check "reconcile: SIGTERM still undoes it (status $INST_RC)" [ "$INST_RC" = 0 ]
	! $IMAGE_MODE || docker rm -f "$INST" >/dev/null 2>&1 || true
	# 4. containerd 2.x (its default config's version, 4): nvidia-ctk first, then the installer, then nvidia-ctk's
	# re-run with --config-source=command reading 2.3's dump
	H9=$(new_host host9 4)
	nvidia_ctk "$H9" "$H9/usr/bin" "$NV"
	host_engine host9 "$CD2X"
	inst_start "$H9" || not_ok "the installer's start on host9"
	check "reconcile 2.x, nvidia-ctk first: the installer chains nvidia at its start" \
		wait_for 30 settled "$H9"
	N=$(reasserts)
	nvidia_ctk "$H9" "$H9/usr/bin" "$NV2" --config-source=command
	check "reconcile 2.x, --config-source=command after ours, the runtime moved: within 15 s re-asserted and settled" \
		wait_for 15 reasserted_settled "$N" "$H9" "$NV2"
	check "reconcile 2.x: the handler rdma once in 2.3's view" rdma_once "$H9"
	inst_stop
	engine_down host9
	check "reconcile 2.x: SIGTERM undoes it (status $INST_RC)" [ "$INST_RC" = 0 ]
else
	ok "reconcile: # SKIP no nvidia-ctk or containerd 2.x in $PEERS (tests/setup-debian.sh)"
fi

finish
