#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: rootless podman (a user the test creates, with subordinate ids, runc,
# cgroupfs, vfs storage) with every shipped hooks.d file (precreate, createRuntime,
# poststop) and the node's default config. podman runs the hooks in its user namespace,
# where the hook holds CAP_SYS_RESOURCE for nothing that counts: the spec must ask only for
# the memlock the runtime can give (the user's hard limit), or no container starts; the
# live hook leaves the device cgroup alone there and still writes /etc/nccl.conf. With
# activation = annotation, a container that does not ask starts exactly as without the
# hook.
#
# Rootless runc bind-mounts each device node of the spec from the host's /dev. This
# machine has no RDMA, so the test runs in a mount namespace of its own with a tmpfs on
# /dev/infiniband holding the fake node's nodes; the host keeps only an empty directory
# while the test runs, removed at the end when the test made it.
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v podman >/dev/null 2>&1 || cant_run "podman not installed"
command -v newuidmap >/dev/null 2>&1 || cant_run "newuidmap (uidmap) not installed"
command -v runuser >/dev/null 2>&1 || cant_run "runuser not installed"

if [ -z "${ORH_ROOTLESS_NS:-}" ]; then
	made_dir=""
	if [ ! -e /dev/infiniband ]; then
		mkdir /dev/infiniband || cant_run "cannot create /dev/infiniband"
		made_dir=1
	fi
	rc=0
	ORH_ROOTLESS_NS=1 unshare -m --propagation private bash "$0" "$@" || rc=$?
	[ -n "$made_dir" ] && rmdir /dev/infiniband 2>/dev/null
	exit $rc
fi

setup_work
U=orhrl$$
UHOME=$WORK/home
cleanup() {
	local rc=$1
	if id "$U" >/dev/null 2>&1; then
		runuser -u "$U" -- env HOME="$UHOME" XDG_RUNTIME_DIR="$XDG" \
			podman --storage-driver vfs system reset -f >/dev/null 2>&1 || true
		pkill -u "$U" 2>/dev/null || true
		sleep 0.5
		pkill -9 -u "$U" 2>/dev/null || true
		userdel "$U" 2>/dev/null || true
	fi
	sed -i "/^$U:/d" /etc/subuid /etc/subgid 2>/dev/null || true
	[ -n "${XDG:-}" ] && rm -rf "$XDG"
	umount /dev/infiniband 2>/dev/null || true
	# the vfs layers of a user namespace hold files of subordinate ids
	rm -rf "$UHOME" 2>/dev/null || true
	cleanup_work "$rc"
}
trap 'cleanup $?' EXIT

useradd -M -d "$UHOME" -s /bin/sh "$U" || cant_run "useradd failed"
mkdir -p "$UHOME" && chown "$U:" "$UHOME"
# a range no other entry uses
base=$(awk -F: '{ e = $2 + $3; if (e > m) m = e } END { print (m > 200000 ? m : 200000) }' \
	/etc/subuid /etc/subgid 2>/dev/null)
echo "$U:$base:65536" >>/etc/subuid
echo "$U:$base:65536" >>/etc/subgid
XDG=/run/user/$(id -u "$U")
mkdir -p "$XDG" && chown "$U:" "$XDG" && chmod 700 "$XDG"

make_node seed001-roce.json "$WORK/node"
mount -t tmpfs -o mode=755 tmpfs /dev/infiniband || cant_run "cannot mount a tmpfs on /dev/infiniband"
cp -a "$WORK/node/dev/infiniband/." /dev/infiniband/
# the default config: activation = always, memlock unlimited
write_conf "$WORK/node.conf" "[containers]"
write_conf "$WORK/ann.conf" "[containers]
activation = annotation"
# the binary where the user can run it (the build tree may not be reachable)
mkdir -p "$WORK/bin"
cp "$HOOK" "$WORK/bin/oci-rdma-hook"
chmod 755 "$WORK/bin/oci-rdma-hook"
ALL_HOOKS=(oci-rdma-hook-precreate oci-rdma-hook oci-rdma-hook-poststop)
hooks_d "$WORK/hooks.d" "$WORK/bin/oci-rdma-hook" "$WORK/node.conf" "${ALL_HOOKS[@]}"
hooks_d "$WORK/hooks-ann.d" "$WORK/bin/oci-rdma-hook" "$WORK/ann.conf" "${ALL_HOOKS[@]}"
# what podman reads of an installed package by default: /usr/share/containers/oci/hooks.d
# holds the createRuntime and poststop files; precreate lives in /etc/containers/oci/hooks.d,
# which podman's default hooks_dir does not list
hooks_d "$WORK/hooks-usr.d" "$WORK/bin/oci-rdma-hook" "$WORK/node.conf" oci-rdma-hook \
	oci-rdma-hook-poststop
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = []
EOF
make_rootfs "$WORK/rootfs"
tar -C "$WORK/rootfs" -cf "$WORK/rootfs.tar" .
chmod -R a+rX "$WORK"
chmod 755 "$UHOME"

as_user() {
	(cd "$UHOME" && runuser -u "$U" -- env HOME="$UHOME" XDG_RUNTIME_DIR="$XDG" \
		CONTAINERS_CONF="$WORK/containers.conf" "$@")
}
P=(podman --storage-driver vfs --runtime runc --cgroup-manager cgroupfs)
as_user "${P[@]}" import "$WORK/rootfs.tar" localhost/orh-e2e-bb:latest >/dev/null 2>"$WORK/import.err" ||
	cant_run "rootless podman import failed: $(tail -3 "$WORK/import.err")"

INSIDE='echo "uid $(id -u)"; echo "memlock $(ulimit -Sl) $(ulimit -Hl)"; for f in /dev/infiniband/*; do [ -e "$f" ] && stat -c "%n %F %t:%T" "$f"; done; sed -n "s/^NCCL_/conf:NCCL_/p" /etc/nccl.conf 2>/dev/null; true'
run_rootless() { # HOOKS-DIR|none [PODMAN-RUN-OPTION...]
	local hd=$1
	shift
	local args=("${P[@]}")
	[ "$hd" = none ] || args+=(--hooks-dir "$hd")
	RC=0
	# podman started with a soft memlock of 64 KiB, below the user's hard limit: what
	# the container gets beyond that is the hook's doing
	OUT=$(as_user sh -c 'ulimit -Sl 64 && exec "$@"' sh "${args[@]}" run --rm --network none \
		"$@" localhost/orh-e2e-bb /bin/sh -c "$INSIDE" 2>"$WORK/podman.err") || RC=$?
	ERR=$(tail -3 "$WORK/podman.err")
}
user_hard=$(as_user sh -c 'ulimit -Hl')
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)

# What a served container shows ($OUT), each check's name prefixed with $1: memlock the
# user's hard limit, soft and hard; the plan's device nodes; every plan setting in its
# /etc/nccl.conf.
check_served_rootless() {
	local n want
	check "${1}memlock is the user's hard limit, soft and hard ($user_hard)" \
		grep -qx "memlock $user_hard $user_hard" <<<"$OUT"
	for n in uverbs1 uverbs8 rdma_cm; do
		want=$(stat -c '%t:%T' "$WORK/node/dev/infiniband/$n")
		check "${1}/dev/infiniband/$n is in the container, $want" \
			grep -qx "/dev/infiniband/$n character special file $want" <<<"$OUT"
	done
	check_conf_has_plan "${1}/etc/nccl.conf has every plan setting"
}

# the control: no hook at all
run_rootless none
check "control: rootless podman runs a container without the hook (rc $RC: $ERR)" [ "$RC" = 0 ]
check "control: the container's memlock is podman's, 64 KiB soft ($user_hard hard)" \
	grep -qx "memlock 64 $user_hard" <<<"$OUT"
CONTROL=$OUT

# every hooks.d file, the default config (activation = always, memlock unlimited)
run_rootless "$WORK/hooks.d"
check "rootless podman starts a container with every hooks.d file (rc $RC: $ERR)" [ "$RC" = 0 ]
# (from a run whose container ran: a runtime that never got that far says nothing either)
no_rlimit_error() { inside_ran && ! grep -q 'error setting rlimit' "$WORK/podman.err"; }
check "no 'error setting rlimit' from the runtime" no_rlimit_error
check_served_rootless ""

# the files podman reads of the package by default, without precreate: the live hook alone
run_rootless "$WORK/hooks-usr.d"
check "without precreate: rootless podman starts the container (rc $RC: $ERR)" [ "$RC" = 0 ]
check_served_rootless "without precreate: "

# what the issue saw: precreate inside podman's user namespace asked for 2^64-1
python3 -c 'import json
print(json.dumps({"ociVersion": "1.0.2", "process": {"args": ["sh"], "env": ["PATH=/bin"]},
                  "linux": {"namespaces": [{"type": "mount"}]}}))' >"$WORK/spec.json"
chmod 644 "$WORK/spec.json"
as_user "${P[@]}" unshare sh -c "'$WORK/bin/oci-rdma-hook' --sysroot '$WORK/node' --config '$WORK/node.conf' precreate <'$WORK/spec.json'" \
	>"$WORK/pre.json" 2>"$WORK/pre.err"
want_bytes=$((user_hard * 1024))
[ "$user_hard" = unlimited ] && want_bytes=18446744073709551615
check "precreate in podman's user namespace asks for the user's hard limit ($want_bytes bytes), not more" \
	[ "$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print([(r["soft"], r["hard"]) for r in d["process"]["rlimits"] if r["type"] == "RLIMIT_MEMLOCK"])' "$WORK/pre.json")" = "[($want_bytes, $want_bytes)]" ]
check "... and says why" grep -q "no CAP_SYS_RESOURCE in the initial user namespace" "$WORK/pre.err"

# activation = annotation: a container that does not ask starts as without the hook
run_rootless "$WORK/hooks-ann.d"
check "annotation mode, not asked: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check "annotation mode, not asked: the container sees what the control saw" out_is "$CONTROL"
run_rootless "$WORK/hooks-ann.d" --annotation oci-rdma-hook/enable=true
check "annotation mode, asked: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check "annotation mode, asked: uverbs1 is there" grep -q "^/dev/infiniband/uverbs1 " <<<"$OUT"
check "annotation mode, asked: /etc/nccl.conf has the plan's NCCL_IB_GID_INDEX" \
	grep -qx "conf:$(grep '^NCCL_IB_GID_INDEX=' <<<"$PLAN")" <<<"$OUT"

finish
