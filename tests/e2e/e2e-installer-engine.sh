#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: the installer (as the DaemonSet runs it: installer-lib.sh) is ready only once
# the engine behind the host root's socket reports the handler, that engine being what
# /proc shows behind the socket (the PID of its peer credentials, its binary, the config its
# command line names), and its undo keeps containerd 2.x able to exec into a pod of the
# handler:
#   - containerd 2.3.4 listens on the socket CONTAINERD_SOCKET names, on the config
#     CONTAINERD_CONFIG names (version 3), while the host root's /usr/bin/containerd is
#     Debian's 1.6, whose dump of a version 3 config has no handler: ready once 2.3.4 (the
#     binary behind the socket, run in the host root) reports it; a pod through the handler;
#     SIGTERM while it runs: the handler kept, exec into the pod works, the pod removed;
#     the runtime shim's delete then finishes the undo (install --uninstall --after-pid the
#     pod's containerd shim): containerd's config back byte for byte, containerd restarted;
#   - containerd 1.6 reading another config than the one CONTAINERD_CONFIG names: not ready,
#     the log names both and the variable; with no variable, the config its command line
#     names is the one configured, and it is ready;
#   - no engine listening: not ready, said so; ready once one starts;
#   - no host PID namespace, no CAP_SYS_PTRACE: not ready, each said so.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"
CRI_SRC=${ORH_SRCDIR:-$HERE/../..}
. "$CRI_SRC/tests/cri/lib.sh"
need_root_runc
. "$(dirname "$0")/installer-lib.sh"
PEERS=${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}
for p in containerd containerd-shim-runc-v2 ctr; do
	[ -x "$PEERS/$p" ] || cant_run "$PEERS/$p missing (tests/setup-debian.sh builds it)"
done
CD16=/usr/bin/containerd
[ -x "$CD16" ] || cant_run "no Debian containerd at $CD16"
"$CD16" --version | grep -q ' 1\.' || cant_run "$CD16 is not containerd 1.x"
# same_file SNAPSHOT DIR PATH: PATH under DIR has the content it had in SNAPSHOT
same_file() { grep -qxF "$(cd "$2" && sha256sum ".$3")" "$1"; }
# snap DIR: snapshot DIR without its sockets (the engines' own, made and left as they run)
snap() { snapshot "$1" | grep -v '^[^ ]* s '; }
# not CMD...: CMD fails
not() { ! "$@" >/dev/null 2>&1; }
# ready_line LOG: the installer's last "ready: " line
ready_line() { grep '^ready: ' "$1" | tail -1; }
MANIFEST=/var/lib/oci-rdma-hook/install.manifest
FINISH_LOG=/var/lib/oci-rdma-hook/finish.log

# ---- containerd 2.3.4 behind the socket, 1.6 at /usr/bin/containerd ------------------------
HA=$WORK/hosta
CA=$WORK/cda
SHIM_A=$HA$BINDIR/oci-rdma-runtime
mkdir -p "$HA/etc/containerd" "$HA/run/custom" "$HA$BINDIR"
add_binary "$HA" "$CD16"
cd2_config "$CA" "$CA/nri.sock"
# its socket where CONTAINERD_SOCKET names it in the host root (the CRI client's path to it
# is a link)
sed -e "s#\"$CA/containerd.sock#\"$HA/run/custom/containerd.sock#" "$CA/config.toml" \
	>"$HA/etc/containerd/v3.toml"
rm "$CA/config.toml"
ln -s "$HA/run/custom/containerd.sock" "$CA/containerd.sock"
echo '{"cniVersion": "0.4.0", "name": "orh-inst", "plugins": [{"type": "loopback"}]}' \
	>"$CA/net.d/10-orh-inst.conflist"
spec_edit_node # $WORK/node (seed001-roce), $INSIDE
mkdir -p "$WORK/devplugin"
mknod "$WORK/devplugin/uverbs2" c 231 194
make_rootfs "$WORK/rootfs"
ENGINE_ENV=(OCI_RDMA_HOOK_CONFIG="$HA$CONF" OCI_RDMA_HOOK_SYSROOT="$WORK/node"
	PATH="$PEERS:$PATH")
engine_up cda "$HA" "$PEERS/containerd" --config /etc/containerd/v3.toml
ENGINE_ENV=()
CTR=$PEERS/ctr
wait_for 30 "$CTR" -a "$CA/containerd.sock" version ||
	cant_run "containerd 2.3.4 did not start: $(tail -5 "$WORK/cda.log")"
cri() { cri_at "$CA" "$@"; }
PATH=$PEERS:$PATH cri_images "$CA" "$PAUSE" "$WORK/rootfs" >"$WORK/images.log" 2>&1 ||
	cant_run "the local images: $(cat "$WORK/images.log")"
cri_ready() {
	local s
	s=$(cri status 2>/dev/null || true)
	grep -qx 'RuntimeReady true' <<<"$s" && grep -qx 'NetworkReady true' <<<"$s"
}
wait_for 30 cri_ready || cant_run "the CRI is not ready: $(cri status 2>&1 | tr '\n' ' ')"
snap "$HA" >"$WORK/origa.snap"
PID0=$(engine_pid cda)
INST_ENV=(CONTAINERD_CONFIG=/etc/containerd/v3.toml CONTAINERD_SOCKET=/run/custom/containerd.sock)
inst_start "$HA" --shim "$SHIM_A" || { not_ok "the installer's start on hosta"; finish || exit 1; }
installed() { inst_log | grep -qx "installed; waiting for SIGTERM to undo it"; }
wait_for 60 installed || true
inst_log >"$WORK/a.log"
check "2.3.4 behind the socket: SIGHUP to its pid ($PID0)" \
	grep -qx "note: sent SIGHUP to pid $PID0 (behind /run/custom/containerd.sock)" "$WORK/a.log"
PID1=$(engine_pid cda)
check "2.3.4 behind the socket: ready once the binary behind it (pid $PID1, started again) reports the handler ($(ready_line "$WORK/a.log"))" \
	grep -qxF "ready: containerd config dump of /etc/containerd/v3.toml has handler 'rdma' with $(
		)$SHIM_A (pid $PID1: $PEERS/containerd)" "$WORK/a.log"
check "the readinessProbe's command exits 0" inst_probe
check "1.6's dump of that config (what the installer asked before) has no handler" \
	bash -c '! chroot "$1" /usr/bin/containerd --config /etc/containerd/v3.toml config dump 2>/dev/null |
		grep -q "runtimes.rdma"' _ "$HA"
wait_for 30 cri_ready || true
# a pod through the handler: the device plugin's uverbs2 gives it mlx5_2
d=$WORK/pods/a
mkdir -p "$d/logs"
cri_pod_json "$d/pod.json" a 2 "$d/logs" .
cri_ctr_json "$d/ctr.json" 2 "echo orh-inst-ran; $INSIDE; echo orh-inst-end; exec sleep 600" \
	".devices = [{container_path: \"/dev/infiniband/uverbs2\",
	host_path: \"$WORK/devplugin/uverbs2\", permissions: \"rwm\"}]"
cri_start_pod "$CA" "$d" rdma || not_ok "the pod through rdma on 2.3.4: $CRI_ERR"
PODS=("$CRI_POD")
wait_for 20 grep -q orh-inst-end "$d/logs/work.log" || true
OUT=$(cri logs "$CRI_CTR" 2>&1 || true)
check_ran "2.3.4 pod"
check "2.3.4: the pod through rdma got mlx5_2 ($(grep '^conf:NCCL_IB_HCA' <<<"$OUT"))" \
	grep -qx 'conf:NCCL_IB_HCA==mlx5_2:1' <<<"$OUT"
snap "$HA" >"$WORK/installeda.snap"
inst_stop
inst_log | sed -n '/^signal 15: /,$p' >"$WORK/undoa.log"
check "SIGTERM with the pod running: exit 0 (status $INST_RC), the handler kept, saying why" \
	bash -c '[ "$1" = 0 ] && grep -q "^kept the handler '"'rdma'"' in /etc/containerd/v3.toml: 1 containers still run through it (shim pid [0-9]*, bundle .*)" "$2"' \
	_ "$INST_RC" "$WORK/undoa.log"
check "the feature file is gone" [ ! -e "$HA$FEATURE" ]
check "the probe fails" not inst_probe
check "the engine's files are as installed" \
	diff <(grep -F ./etc/containerd "$WORK/installeda.snap") <(snap "$HA" | grep -F ./etc/containerd)
EXEC_OUT=$(cri exec "$CRI_CTR" /bin/sh -c 'echo orh-exec-ran' 2>&1 || true)
check "after the undo, exec into the pod of the handler on 2.3.4 works ($EXEC_OUT)" \
	grep -qx orh-exec-ran <<<"$EXEC_OUT"
check "the manifest marks the undo pending, with the shim and the socket it needs" \
	bash -c 'm=$(cat "$1$2") && grep -qx pending <<<"$m" && grep -qxF "shim $3" <<<"$m" &&
		grep -qx "socket /run/custom/containerd.sock" <<<"$m"' _ "$HA" "$MANIFEST" "$SHIM_A"
PID2=$(engine_pid cda)
RC=0
RMP_OUT=$(cri rmp -f "$CRI_POD" 2>&1) || RC=$?
check "after the undo, the pod is removed (rc $RC: $RMP_OUT)" [ "$RC" = 0 ]
PODS=()
# the runtime shim's delete of the pod's containers started the kept undo's finish, which
# waited for the pod's containerd shim to exit: no one ran --uninstall
check "the shim's delete finished the undo: containerd's config is the original, byte for byte" \
	wait_for 30 same_file "$WORK/origa.snap" "$HA" /etc/containerd/v3.toml
sed 's/^/# finish: /' "$HA$FINISH_LOG" 2>/dev/null
# (a delete of each of the pod's containers starts one: those that run before the last
# shim exits keep the handler, saying so, or leave it to the one that holds the lock)
check "the finish's log: it waited for the pod's shim, then reverted the config" \
	bash -c 'grep -q "^[-0-9T:]*Z: the undo kept for running containers, once pid [0-9]* exits$" "$1" &&
		grep -Eq "^(changed|removed) /etc/containerd/" "$1"' _ "$HA$FINISH_LOG"
check "the finish restarted containerd (pid $PID2 before)" \
	wait_for 30 bash -c '[ "$(cat "$1")" != "$2" ]' _ "$WORK/cda.pid" "$PID2"
check "no drop-in left (the engine's directory as it was)" \
	diff <(grep -F ./etc/containerd "$WORK/origa.snap") <(snap "$HA" | grep -F ./etc/containerd)
check "the manifest names no engine, nothing pending" \
	bash -c '! grep -Eq "^(engine|pending|shim|socket)( |$)" "$1$2"' _ "$HA" "$MANIFEST"
RC=0
inst_once "$HA" --uninstall >"$WORK/uninstalla.log" || RC=$?
check "install --uninstall after it: exit 0 (rc $RC), nothing left to revert (it ran: the files kept, said so)" \
	bash -c '[ "$1" = 0 ] && ! grep -Eq "^(changed|removed) /etc/containerd/" "$2" &&
		grep -q "^kept the binary, the hooks.d files and the node config" "$2"' \
	_ "$RC" "$WORK/uninstalla.log"
INST_ENV=()
engine_down cda
inst_once "$HA" --purge >"$WORK/purgea.log" 2>&1 || not_ok "install --purge on hosta"
check "after --purge hosta is the original byte for byte" diff "$WORK/origa.snap" <(snap "$HA")

# ---- containerd 1.6 reading another config than the one configured --------------------------
HB=$WORK/hostb
mkdir -p "$HB/etc/containerd" "$HB/run/containerd"
add_binary "$HB" "$CD16"
printf 'version = 2\n' >"$HB/etc/containerd/config.toml"
cat >"$HB/etc/containerd/other.toml" <<EOF
version = 2
root = "$WORK/cdb/root"
state = "$WORK/cdb/state"
[grpc]
  address = "$HB/run/containerd/containerd.sock"
[ttrpc]
  address = "$HB/run/containerd/containerd.sock.ttrpc"
EOF
snap "$HB" >"$WORK/origb.snap"
engine_up cdb "$HB" "$CD16" --config /etc/containerd/other.toml
wait_for 30 ctr -a "$HB/run/containerd/containerd.sock" version ||
	cant_run "containerd 1.6 on hostb did not start: $(tail -5 "$WORK/cdb.log")"
INST_ENV=(CONTAINERD_CONFIG=/etc/containerd/config.toml)
RC=0
inst_once "$HB" --once --ready-timeout 5 >"$WORK/b1.log" || RC=$?
INST_ENV=()
PID=$(engine_pid cdb)
check "another config behind the socket: not ready (rc $RC), the log names both and CONTAINERD_CONFIG" \
	bash -c '[ "$1" = 1 ] && grep -q "^not ready: the engine behind /run/containerd/containerd.sock (pid $3, /usr/bin/containerd) reads /etc/containerd/other.toml (its command line), not /etc/containerd/config.toml, the file configured: set CONTAINERD_CONFIG=/etc/containerd/other.toml" "$2"' \
	_ "$RC" "$WORK/b1.log" "$PID"
check "not ready: no feature file" [ ! -e "$HB$FEATURE" ]
PID=$(engine_pid cdb)
inst_once "$HB" --purge >/dev/null 2>&1 || not_ok "install --purge on hostb"
# the purge's SIGHUP: containerd back (another pid) before the next installer looks
wait_for 30 bash -c '[ "$(cat "$1")" != "$2" ] && ctr -a "$3" version' _ "$WORK/cdb.pid" "$PID" \
	"$HB/run/containerd/containerd.sock" || not_ok "containerd 1.6 on hostb not back"
RC=0
inst_once "$HB" --once --ready-timeout 30 >"$WORK/b2.log" || RC=$?
check "no CONTAINERD_CONFIG: the config the engine's command line names is configured" \
	bash -c 'grep -qx "note: the engine behind /run/containerd/containerd.sock (pid [0-9]*) reads /etc/containerd/other.toml (its command line): that file is configured" "$1" &&
		grep -qx "engine containerd: /etc/containerd/other.toml" "$1"' _ "$WORK/b2.log"
check "... and ready once the engine reports it (rc $RC: $(ready_line "$WORK/b2.log"))" \
	bash -c '[ "$1" = 0 ] && grep -q "^ready: containerd config dump of /etc/containerd/other.toml has handler" "$2"' \
	_ "$RC" "$WORK/b2.log"
check "/etc/containerd/config.toml, which it does not read, is not edited" \
	same_file "$WORK/origb.snap" "$HB" /etc/containerd/config.toml

# ---- no host PID namespace, no CAP_SYS_PTRACE: not ready, said so -------------------------
RC=0
INST_PIDNS=private inst_once "$HB" --once --ready-timeout 3 >"$WORK/nopid.log" || RC=$?
check "without the host's PID namespace: not ready (rc $RC), the log says hostPID" \
	bash -c '[ "$1" = 1 ] && grep -q "^not ready: the engine behind /run/containerd/containerd.sock is outside this PID namespace: the installer needs the host.s (the DaemonSet.s hostPID: true)" "$2"' \
	_ "$RC" "$WORK/nopid.log"
RC=0
INST_NOCAP=SYS_PTRACE inst_once "$HB" --once --ready-timeout 3 >"$WORK/noptrace.log" || RC=$?
check "without CAP_SYS_PTRACE: not ready (rc $RC), the log says so" \
	bash -c '[ "$1" = 1 ] && grep -q "^not ready: the engine behind /run/containerd/containerd.sock is pid [0-9]*, whose binary (/proc/[0-9]*/exe) the installer may not open: .*(it needs CAP_SYS_PTRACE" "$2"' \
	_ "$RC" "$WORK/noptrace.log"
engine_down cdb
inst_once "$HB" --purge >"$WORK/purgeb.log" 2>&1 || not_ok "install --purge on hostb"
check "after --purge hostb is the original byte for byte" diff "$WORK/origb.snap" <(snap "$HB")

# ---- no engine listening: not ready, said so; ready once one starts -------------------------
HC=$WORK/hostc
mkdir -p "$HC/etc/containerd" "$HC/run/containerd"
add_binary "$HC" "$CD16"
cat >"$HC/etc/containerd/config.toml" <<EOF
version = 2
root = "$WORK/cdc/root"
state = "$WORK/cdc/state"
[grpc]
  address = "$HC/run/containerd/containerd.sock"
[ttrpc]
  address = "$HC/run/containerd/containerd.sock.ttrpc"
EOF
snap "$HC" >"$WORK/origc.snap"
RC=0
inst_once "$HC" --once --ready-timeout 3 >"$WORK/c1.log" || RC=$?
check "no engine listening: not ready (rc $RC), said so, no feature file" \
	bash -c '[ "$1" = 1 ] && grep -q "^not ready: no engine listens on /run/containerd/containerd.sock" "$2" &&
		[ ! -e "$3" ]' _ "$RC" "$WORK/c1.log" "$HC$FEATURE"
! $IMAGE_MODE || docker rm -f "$INST" >/dev/null 2>&1 || true
inst_start "$HC" || not_ok "the installer's start on hostc"
sleep 4
check "the installer running with no engine: not ready (the probe fails)" not inst_probe
check "... the log says why" \
	eval 'inst_log | grep -q "^not ready: no engine listens on /run/containerd/containerd.sock"'
engine_up cdc "$HC" "$CD16" --config /etc/containerd/config.toml
check "ready once an engine listens and reports the handler" wait_for 30 inst_probe
inst_log >"$WORK/c2.log"
check "... that engine's ($(engine_pid cdc))" \
	grep -q "^ready: containerd config dump of /etc/containerd/config.toml has handler .* (pid $(
		engine_pid cdc): /usr/bin/containerd)$" "$WORK/c2.log"
inst_stop
check "SIGTERM with no pod of the handler: exit 0 (status $INST_RC)" [ "$INST_RC" = 0 ]
check "... the config reverted" same_file "$WORK/origc.snap" "$HC" /etc/containerd/config.toml
engine_down cdc
inst_once "$HC" --purge >/dev/null 2>&1 || not_ok "install --purge on hostc"
check "after --purge hostc is the original byte for byte" diff "$WORK/origc.snap" <(snap "$HC")

finish
