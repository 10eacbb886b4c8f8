# SPDX-License-Identifier: Apache-2.0
# Shared helpers for the end-to-end tests (sourced). They start real containers with
# runc and check from inside them. Environment (set by tests/e2e/meson.build):
#   HOOK    the built oci-rdma-hook     PROBE   the static probe (tests/e2e/probe.c)
#   MKNODE  tests/mknode.py             NODES   tests/nodes
# A test that cannot run exits 77 (skip), or 1 when CI=true.

set -eu
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

: "${HOOK:?HOOK not set}" "${PROBE:?PROBE not set}" "${MKNODE:?}" "${NODES:?}"

FAILS=0
PASSES=0
WORK=""

. "$(dirname "${BASH_SOURCE[0]}")/../tap.sh"

need_root_runc() {
	[ "$(id -u)" = 0 ] || cant_run "needs root"
	command -v runc >/dev/null 2>&1 || cant_run "runc not installed"
	command -v python3 >/dev/null 2>&1 || cant_run "python3 not installed"
	[ -x /bin/busybox ] || cant_run "busybox-static not installed (/bin/busybox)"
	file_is_static /bin/busybox || cant_run "/bin/busybox is not static (install busybox-static)"
}

file_is_static() {
	# a static binary has no PT_INTERP: ldd says so
	! ldd "$1" >/dev/null 2>&1
}

# finish: the summary line; fails when a check failed, or when none was recorded (a script
# that checked nothing proved nothing: one that cannot run says so with cant_run)
finish() {
	if [ $((PASSES + FAILS)) = 0 ]; then
		not_ok "the script recorded no check"
	fi
	echo "# $PASSES passed, $FAILS failed"
	[ "$FAILS" = 0 ]
}

setup_work() {
	WORK=$(mktemp -d /tmp/orh-e2e.XXXXXX)
	chmod 755 "$WORK"
	trap cleanup_work EXIT
}

# cleanup_work [RC]: remove the work dir and exit with RC (default: the status at the
# time of the call). A trap that runs other cleanup first must pass its saved status:
# trap 'rc=$?; other_cleanup; cleanup_work $rc' EXIT   (under set -e, "(exit $rc)"
# before it would end the trap early).
cleanup_work() {
	local rc=${1:-$?}
	stop_fake_ctr
	for id in $(runc list -q 2>/dev/null | grep "^orh-e2e-$$-" || true); do
		runc delete -f "$id" >/dev/null 2>&1 || true
	done
	if [ -n "$WORK" ] && [ -z "${KEEP:-}" ]; then
		# never follow links planted by the security tests; every mount under $WORK
		# (podman's storage leaves one on its overlay directory) goes first, deepest first
		umount -R "$WORK"/* 2>/dev/null || true
		awk -v w="$WORK/" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
			while read -r m; do umount -l "$m" 2>/dev/null || true; done
		# a lazily unmounted overlay can stay busy a moment (podman's processes leaving)
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			rm -rf --one-file-system "$WORK" 2>/dev/null && break
			sleep 0.3
		done
		[ ! -e "$WORK" ] || echo "# cleanup: $WORK is still busy; left in place" >&2
	fi
	exit $rc
}

# make_rootfs DIR: a busybox rootfs with the probe in /bin
make_rootfs() {
	local d=$1
	mkdir -p "$d/bin" "$d/etc" "$d/dev" "$d/proc" "$d/sys" "$d/tmp"
	cp /bin/busybox "$d/bin/busybox"
	chroot "$d" /bin/busybox --install -s /bin
	cp "$PROBE" "$d/bin/probe"
	echo "root:x:0:0:root:/root:/bin/sh" >"$d/etc/passwd"
}

# fake_ctr ROOTFS [CGROUP]: a process that is, as a createRuntime hook sees it, the
# container runc is creating from a bundle whose root.path is ROOTFS: in a mount namespace
# of its own where ROOTFS is bind-mounted onto itself (what runc and crun do before the
# hooks run), its root still the host's (before pivot_root). It sleeps; its pid is in
# $SLEEPER. With CGROUP (a cgroup directory) it enters that cgroup first. The tests that
# call the hook directly hand it this pid: the hook refuses any other process.
SLEEPER=""
fake_ctr() {
	local rootfs=$1 cg=${2:-} i try
	# (a mount can fail for a moment while other mount namespaces come and go)
	for try in 1 2 3; do
		unshare -m --propagation private sh -c \
			'if [ -n "$2" ]; then echo $$ >"$2/cgroup.procs" || exit 1; fi
			mount --bind "$1" "$1" && exec sleep 600' _ "$rootfs" "$cg" &
		SLEEPER=$!
		for i in $(seq 1 200); do
			[ "$(cat "/proc/$SLEEPER/comm" 2>/dev/null)" = sleep ] && return 0
			grep -q '^State:[[:space:]]*[^Z]' "/proc/$SLEEPER/status" 2>/dev/null || break
			sleep 0.02
		done
		wait "$SLEEPER" 2>/dev/null || true
	done
	echo "fake_ctr: the stand-in container for '$rootfs' did not start" \
		"($(ls -ld "$rootfs" 2>&1))" >&2
	SLEEPER=""
	return 1
}
stop_fake_ctr() {
	[ -n "$SLEEPER" ] || return 0
	kill "$SLEEPER" 2>/dev/null || true
	wait "$SLEEPER" 2>/dev/null || true
	SLEEPER=""
}
# bundle_rootfs BUNDLE: root.path of BUNDLE/config.json
bundle_rootfs() {
	python3 -c 'import json, os, sys
p = json.load(open(sys.argv[1] + "/config.json"))["root"]["path"]
print(os.path.join(sys.argv[1], p))' "$1"
}

# make_node SPEC.json DIR: a fake node with device nodes (SPEC relative to $NODES)
make_node() {
	local spec=$1
	case $spec in /*) ;; *) spec="$NODES/$spec" ;; esac
	python3 "$MKNODE" "$spec" "$2" --devnodes >/dev/null
}

# make_bundle BUNDLE ROOTFS NODE CONF CMD [PYTHON-EDIT]: a runc bundle whose
# createRuntime hook is the oci-rdma-hook under test (through BUNDLE/hook.sh, which
# appends its stderr to BUNDLE/hook.log and runs it under $HOOK_PREFIX, if set).
# PYTHON-EDIT is Python code run with `c` bound to the config dict.
make_bundle() {
	local b=$1 rootfs=$2 node=$3 conf=$4 cmd=$5 edit=${6:-}
	mkdir -p "$b"
	rm -f "$b/config.json"
	(cd "$b" && runc spec)
	printf '#!/bin/sh\nexec %s "%s" "$@" 2>>"%s"\n' "${HOOK_PREFIX:-}" "$HOOK" \
		"$b/hook.log" >"$b/hook.sh"
	chmod 755 "$b/hook.sh"
	python3 - "$b/config.json" "$rootfs" "$b/hook.sh" "$node" "$conf" "$cmd" "$edit" <<'EOF'
import json, sys
path, rootfs, hook, node, conf, cmd, edit = sys.argv[1:8]
c = json.load(open(path))
c["root"] = {"path": rootfs, "readonly": False}
c["process"]["terminal"] = False
c["process"]["args"] = ["/bin/sh", "-c", cmd]
c["hooks"] = {"createRuntime": [{
    "path": hook,
    "args": ["oci-rdma-hook", "--sysroot", node, "--config", conf, "createRuntime"],
    "timeout": 30,
}], "poststop": [{
    "path": hook,
    "args": ["oci-rdma-hook", "--sysroot", node, "--config", conf, "poststop"],
}]}
if edit:
    exec(edit)
json.dump(c, open(path, "w"), indent=1)
EOF
}

# run_ctr BUNDLE: run the container to completion; its stdout in $OUT, the hook's
# stderr (runc's) in $ERR, exit status in $RC
CTR_N=0
run_ctr() {
	CTR_N=$((CTR_N + 1))
	local id="orh-e2e-$$-$CTR_N"
	RC=0
	OUT=$(runc run --bundle "$1" "$id" 2>"$WORK/runc-$CTR_N.err" </dev/null) || RC=$?
	ERR=$(cat "$WORK/runc-$CTR_N.err")
	runc delete -f "$id" >/dev/null 2>&1 || true
}

# write_conf FILE [LINES]: a hook config
write_conf() {
	printf '%s\n' "${2:-}" >"$1"
}

# spec_edit_node: the node of the spec-edit tests (precreate, the shim) in $WORK/node with
# its config $WORK/node.conf, and $INSIDE, the command that shows what check_spec_edit_inside
# checks: PID 1's NCCL_* environment ("env:" lines), the NCCL settings of /etc/nccl.conf
# ("conf:" lines), "memlock N" and `stat` lines of /dev/infiniband/*. The node gives
# memlock 4 MiB: below this machine's hard limit (a hard limit cannot be raised here
# without CAP_SYS_RESOURCE), and different from the default, so seeing it inside proves the
# spec's rlimit was applied. $IMG_CONF is an image's own /etc/nccl.conf (make_image_rootfs).
spec_edit_node() {
	make_node seed001-roce.json "$WORK/node"
	write_conf "$WORK/node.conf" "[node]
memlock = 4M"
	INSIDE='tr "\0" "\n" </proc/1/environ | grep -E "^NCCL_|^UCX_" | sed "s/^/env:/" | sort; sed -n "s/^[[:space:]]*NCCL_/conf:NCCL_/p" /etc/nccl.conf 2>/dev/null; echo "memlock $(ulimit -l)"; for f in /dev/infiniband/*; do [ -e "$f" ] && stat -c "%n %F %t:%T" "$f"; done; true'
	IMG_CONF='# the image'"'"'s own settings
NCCL_IB_HCA=image_hca
NCCL_DEBUG=WARN'
}

# make_image_rootfs DIR: a busybox rootfs (make_rootfs) whose /etc/nccl.conf is $IMG_CONF
make_image_rootfs() {
	make_rootfs "$1"
	printf '%s\n' "$IMG_CONF" >"$1/etc/nccl.conf"
}

# inside_ran: $OUT holds the "memlock ..." line that every $INSIDE prints (spec_edit_node's
# "memlock N", the scripts' own "memlock SOFT HARD"): the container ran and its output was
# captured. A container that never started, or whose output was lost, has no such line.
inside_ran() {
	grep -Eqx 'memlock ([0-9]+|unlimited)( ([0-9]+|unlimited))?' <<<"$OUT"
}

# check_ran LABEL: records whether $OUT is the output of a container that ran
# (inside_ran), with its exit status, output and stderr when it is not. Every helper below
# that looks at a container's output starts with it.
check_ran() {
	if inside_ran; then
		ok "$1: the container ran (its memlock line is in the output)"
	else
		not_ok "$1: the container ran: no memlock line in its output (rc ${RC:-?}; output: '$(head -c 200 <<<"$OUT")'; stderr: '$(tail -c 300 <<<"${ERR:-}")')"
	fi
}

# out_lacks GREP-ARG...: $OUT is the output of a container that ran (inside_ran) and no
# line of it matches grep GREP-ARG... (an absence proves nothing about a container that
# did not run)
out_lacks() {
	inside_ran && ! grep -q "$@" <<<"$OUT"
}

# out_is TEXT: $OUT is the output of a container that ran, and is TEXT
out_is() {
	inside_ran && [ "$OUT" = "$1" ]
}

# check_conf_has_plan LABEL: $OUT ("conf:" lines, see spec_edit_node) is a container's
# that ran, and holds every setting of $PLAN but NCCL_SOCKET_IFNAME (the container's
# network decides that one); an empty $PLAN, or one of NCCL_SOCKET_IFNAME alone, fails
check_conf_has_plan() {
	check_ran "$1"
	conf_has_plan "$1"
}
conf_has_plan() {
	local missing="" line n=0
	while IFS= read -r line; do
		case $line in "" | NCCL_SOCKET_IFNAME=*) continue ;; esac
		n=$((n + 1))
		grep -qxF "conf:$line" <<<"$OUT" || missing="$missing $line"
	done <<<"$PLAN"
	check "$1 ($n settings of the plan; missing:${missing:- none})" [ "$n" -gt 0 -a -z "$missing" ]
}

# hooks_d DIR BINARY CONF FILE...: the shipped hooks.d files FILE (names without .json.in)
# in DIR, running BINARY on the node $WORK/node with the config CONF
hooks_d() {
	local dir=$1 bin=$2 conf=$3 f
	shift 3
	mkdir -p "$dir"
	for f in "$@"; do
		python3 - "${ORH_SRCDIR:-$HERE/../..}/hooks.d/$f.json.in" "$dir/$f.json" "$bin" \
			"$WORK/node" "$conf" <<'EOF'
import json, sys
src, dst, hook, node, conf = sys.argv[1:6]
h = json.load(open(src))
h["hook"]["path"] = hook
h["hook"]["args"] = h["hook"]["args"][:1] + ["--sysroot", node, "--config", conf] + h["hook"]["args"][1:]
json.dump(h, open(dst, "w"))
EOF
	done
}

# out_env_is_the_users: $OUT is a container's that ran, and the only NCCL_* variable of
# its PID 1 ("env:" lines) is the user's NCCL_IB_HCA=mine
out_env_is_the_users() {
	inside_ran && ! { grep '^env:' <<<"$OUT" | grep -qvx 'env:NCCL_IB_HCA=mine'; }
}

# check_spec_edit_inside: what a container started through a spec edit (precreate, the
# shim) must show in $OUT (see spec_edit_node): that it ran (check_ran); the user's
# NCCL_IB_HCA=mine kept in PID 1's environment and no variable of the plan added there;
# every other plan variable of $PLAN in /etc/nccl.conf (where NCCL reads it, and
# processes started by exec too); the node's 4 MiB memlock; and uverbs1, uverbs8 and
# rdma_cm with the node's numbers.
check_spec_edit_inside() {
	local n want
	check_ran "spec edit"
	check "the user's NCCL_IB_HCA survives" grep -qx 'env:NCCL_IB_HCA=mine' <<<"$OUT"
	check "no variable of the plan in PID 1's environment (found: $(grep '^env:' <<<"$OUT" | grep -v '^env:NCCL_IB_HCA=mine' | tr '\n' ' '))" \
		out_env_is_the_users
	conf_has_plan "/etc/nccl.conf has every plan variable"
	check "memlock is the node's 4 MiB ($(grep '^memlock' <<<"$OUT"))" grep -qx 'memlock 4096' <<<"$OUT"
	for n in uverbs1 uverbs8 rdma_cm; do
		want=$(stat -c '%t:%T' "$WORK/node/dev/infiniband/$n")
		check "/dev/infiniband/$n is a character device $want" \
			grep -qx "/dev/infiniband/$n character special file $want" <<<"$OUT"
	done
}

# check_image_conf_kept WHAT: $OUT of a container of an image whose /etc/nccl.conf is
# $IMG_CONF: it ran (check_ran); the image's NCCL_IB_HCA is the one NCCL gets (in the
# file, alone, and not beaten by PID 1's environment), its other lines are kept, and the
# plan's other settings are added to the file.
check_image_conf_kept() {
	check_ran "$1"
	check "$1: the image's NCCL_IB_HCA=image_hca stays, and is the only one in the file" \
		[ "$(grep '^conf:NCCL_IB_HCA=' <<<"$OUT")" = "conf:NCCL_IB_HCA=image_hca" ]
	check "$1: no NCCL_IB_HCA in PID 1's environment beats the image's file" \
		out_lacks '^env:NCCL_IB_HCA='
	check "$1: the image's NCCL_DEBUG=WARN stays" grep -qx 'conf:NCCL_DEBUG=WARN' <<<"$OUT"
	check "$1: the plan's NCCL_IB_GID_INDEX is added to the file" \
		grep -qx "conf:$(grep '^NCCL_IB_GID_INDEX=' <<<"$PLAN")" <<<"$OUT"
}

# check_served LABEL / check_not_served LABEL: $OUT of $INSIDE (spec_edit_node) shows a
# container that ran (check_ran) given the plan (uverbs1 with the node's numbers, the
# plan's NCCL_IB_GID_INDEX in /etc/nccl.conf, the node's memlock), or one left as it would
# be without oci-rdma-hook.
check_served() {
	check_ran "$1"
	check "$1: /dev/infiniband/uverbs1 is there with the node's numbers" \
		grep -qx "/dev/infiniband/uverbs1 character special file $(stat -c '%t:%T' "$WORK/node/dev/infiniband/uverbs1")" <<<"$OUT"
	check "$1: /etc/nccl.conf has the plan's NCCL_IB_GID_INDEX" \
		grep -qx "conf:$(grep '^NCCL_IB_GID_INDEX=' <<<"$PLAN")" <<<"$OUT"
	check "$1: memlock is the node's 4 MiB" grep -qx 'memlock 4096' <<<"$OUT"
}
check_not_served() {
	check_ran "$1"
	check "$1: no NCCL setting and no RDMA device" out_lacks -e 'NCCL_' -e infiniband
	check "$1: the default memlock" out_lacks -x 'memlock 4096'
}

# podman_setup [PODMAN-OPTION...]: $PODMAN, a podman with its own storage under $WORK,
# runc and cgroupfs, and the image localhost/orh-e2e-bb imported from a busybox rootfs
podman_setup() {
	make_rootfs "$WORK/rootfs"
	tar -C "$WORK/rootfs" -cf "$WORK/rootfs.tar" .
	PODMAN=(podman --root "$WORK/storage" --runroot "$WORK/runroot" --tmpdir "$WORK/libpod"
		--runtime runc --cgroup-manager cgroupfs "$@")
	"${PODMAN[@]}" import "$WORK/rootfs.tar" localhost/orh-e2e-bb:latest >/dev/null ||
		cant_run "podman import failed"
}

# run_podman [RUN-OPTION...]: run $INSIDE in that image; its stdout in $OUT, stderr in
# $ERR, exit status in $RC
run_podman() {
	RC=0
	OUT=$("${PODMAN[@]}" run --rm --network none "$@" "${PODMAN_IMAGE:-localhost/orh-e2e-bb}" /bin/sh -c "$INSIDE" \
		2>"$WORK/podman.err") || RC=$?
	ERR=$(cat "$WORK/podman.err")
}

# cd2_config DIR NRI_SOCK: DIR/config.toml for containerd 2.x (config version 3) whose
# root, state and sockets are under DIR: the CRI plugin with the runc handler (runc can
# lower no oom_score_adj without CAP_SYS_RESOURCE: restrict_oom_score_adj), the local pause
# image, the native snapshotter, the CNI configurations of DIR/net.d with the plugins in
# $CD2_CNI_BIN (default Debian's); NRI on, its socket NRI_SOCK, its plugin_path and
# plugin_config_path DIR/nri/plugins and DIR/nri/conf.d. Lines of $CD2_RUNTIME go into the
# CRI runtime plugin's table, of $CD2_RUNC into the runc handler's options; $CD2_TABLES is
# added at the end (tables of its own).
cd2_config() {
	local dir=$1 nri=$2 platform
	case $(uname -m) in
	x86_64) platform=amd64 ;;
	aarch64) platform=arm64 ;;
	*) platform=$(uname -m) ;;
	esac
	mkdir -p "$dir/net.d" "$dir/nri/plugins" "$dir/nri/conf.d"
	{
		cat <<-EOF
			version = 3
			root = "$dir/root"
			state = "$dir/state"
			[grpc]
			  address = "$dir/containerd.sock"
			[ttrpc]
			  address = "$dir/containerd.sock.ttrpc"
			[debug]
			  address = "$dir/debug.sock"
			[plugins."io.containerd.internal.v1.opt"]
			  path = "$dir/opt"
			[plugins."io.containerd.cri.v1.images"]
			  snapshotter = "native"
			  [plugins."io.containerd.cri.v1.images".pinned_images]
			    sandbox = "localhost/orh-pause:1"
			[plugins."io.containerd.cri.v1.runtime"]
			  restrict_oom_score_adj = true
			  netns_mounts_under_state_dir = true
		EOF
		[ -z "${CD2_RUNTIME:-}" ] || printf '%s\n' "$CD2_RUNTIME" | sed 's/^/  /'
		cat <<-EOF
			  [plugins."io.containerd.cri.v1.runtime".containerd]
			    default_runtime_name = "runc"
			    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
			      runtime_type = "io.containerd.runc.v2"
			      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
			        SystemdCgroup = false
		EOF
		[ -z "${CD2_RUNC:-}" ] || printf '%s\n' "$CD2_RUNC" | sed 's/^/        /'
		cat <<-EOF
			  [plugins."io.containerd.cri.v1.runtime".cni]
			    bin_dirs = ["${CD2_CNI_BIN:-/usr/lib/cni}"]
			    conf_dir = "$dir/net.d"
			# ctr's import unpacks through the transfer service, for the snapshotter named here
			[[plugins."io.containerd.transfer.v1.local".unpack_config]]
			  platform = "linux/$platform"
			  snapshotter = "native"
			[plugins."io.containerd.nri.v1.nri"]
			  disable = false
			  socket_path = "$nri"
			  plugin_path = "$dir/nri/plugins"
			  plugin_config_path = "$dir/nri/conf.d"
		EOF
		[ -z "${CD2_TABLES:-}" ] || printf '%s\n' "$CD2_TABLES"
	} >"$dir/config.toml"
}
