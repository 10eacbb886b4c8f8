#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The record of what was done (record.json under /run/oci-rdma-hook/<id>) and `inspect`,
# with runc containers served by the live hook: a running container's record is listed
# and printed, and is gone once the container is deleted (poststop); a state directory of
# a container that is gone is swept, one of an unknown record version is not; a container
# with an id of every character runc accepts has its record, whose text from the image
# and the spec inspect and the log print escaped, and which inspect from another pid
# namespace leaves; a container whose memlock the spec caps below what
# RDMA needs starts with a warning under on_error = warn and is refused under fail; one
# given devices whose ports are all down likewise; one holding a GPU where GPUDirect RDMA
# cannot work gets a warning; podman's precreate path leaves the record of nccl-conf.
. "$(dirname "$0")/lib.sh"
need_root_runc
setup_work

RUN=/run/oci-rdma-hook
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
ASK="$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true'}"
make_node seed001-roce.json "$WORK/node"
write_conf "$WORK/warn.conf" "[node]
memlock = 4M"
write_conf "$WORK/fail.conf" "[node]
memlock = 4M
[containers]
on_error = fail
image_check = warn"
make_rootfs "$WORK/rootfs"

# A running container: listed by inspect, printed by id prefix, gone after delete. Its
# image's /etc/nccl.conf sets a GID index of its own, which stands in for the plan's.
ID="orh-e2e-$$-rec"
make_rootfs "$WORK/rootfs1"
printf '# the image\nNCCL_IB_GID_INDEX=7\n' >"$WORK/rootfs1/etc/nccl.conf"
make_bundle "$WORK/b1" "$WORK/rootfs1" "$WORK/node" "$WORK/warn.conf" \
	'echo "memlock $(ulimit -l)" >/tmp/out; sleep 60' "$ASK"
runc run -d --bundle "$WORK/b1" "$ID" </dev/null >"$WORK/b1.out" 2>&1 || true
for i in $(seq 1 50); do
	OUT=$(runc exec "$ID" cat /tmp/out 2>/dev/null || true)
	inside_ran && break
	sleep 0.1
done
check_ran "running container"
LIST=$("$HOOK" inspect 2>&1 || true)
check "inspect lists the running container as served by createRuntime, alive" \
	grep -Eq "^${ID:0:16} +createRuntime +requested .* yes$" <<<"$LIST"
J=$("$HOOK" inspect "${ID%-rec}-r" --json 2>&1 || true)
check "inspect ID-PREFIX --json: its record (stage, activation, the plan's HCAs, memlock after)" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["id"] == sys.argv[2] and r["stage"] == "createRuntime", r
assert r["activation"]["result"] == "requested" and r["alive"] is True
assert any(p["used"] and p["hca"] == "mlx5_1" for p in r["plan"]["ports"])
assert r["memlock"]["after"]["soft"] >= 4 << 20, r["memlock"]
assert r["nccl_conf"]["result"] == "written" and r["nccl_conf"]["added"] > 0
assert r["nccl_conf"]["image_lines_kept"] == ["NCCL_IB_GID_INDEX=7"], r["nccl_conf"]
assert r["time_ms"]["total"] > 0' "$J" "$ID"
check "the record is a root-owned file of mode 0644" \
	[ "$(stat -c '%U %a' "$RUN/$ID/record.json" 2>&1)" = "root 644" ]
runc delete -f "$ID" >/dev/null 2>&1 || true
check "after delete (poststop) the state directory is gone" [ ! -e "$RUN/$ID" ]
check "inspect ID of a deleted container fails" \
	sh -c '! "$1" inspect "$2" >/dev/null 2>&1' _ "$HOOK" "$ID"

# A stale directory: its record, written in this pid namespace, names a process that is
# gone (pid 1 with another start time); one that is not ours (a file of another name)
# keeps that file; a record of a format version this binary does not know is never swept.
PIDNS=$(stat -Lc %i /proc/self/ns/pid)
GONE_REC='{"version": 1, "pid": 1, "start_time": 1, "pid_ns": '$PIDNS'}'
mkdir -p "$RUN/orh-e2e-$$-stale" "$RUN/orh-e2e-$$-other" "$RUN/orh-e2e-$$-v99"
echo "$GONE_REC" >"$RUN/orh-e2e-$$-stale/record.json"
echo x >"$RUN/orh-e2e-$$-stale/nccl.conf"
echo "$GONE_REC" >"$RUN/orh-e2e-$$-other/record.json"
echo x >"$RUN/orh-e2e-$$-other/not-ours"
echo '{"version": 99, "pid": 1, "start_time": 1, "pid_ns": '$PIDNS'}' \
	>"$RUN/orh-e2e-$$-v99/record.json"
"$HOOK" inspect >/dev/null 2>&1 || true
check "inspect sweeps the state directory of a container that is gone" \
	[ ! -e "$RUN/orh-e2e-$$-stale" ]
check "the sweep leaves a file it did not make" [ -e "$RUN/orh-e2e-$$-other/not-ours" ]
check "the sweep leaves a record of a version it does not know" \
	[ -e "$RUN/orh-e2e-$$-v99/record.json" ]
rm -rf "$RUN/orh-e2e-$$-other" "$RUN/orh-e2e-$$-v99"

# A container whose id has every character runc accepts gets its record; text from its
# image (an /etc/nccl.conf line with ESC, BEL and CR) and its spec (an env value with a
# newline, quoted by a warning) is printed escaped by inspect and in the hook's log, and
# stays exact in --json. inspect from another pid namespace (its own /proc) leaves the
# running container's record, and cannot tell whether it is alive.
JOB="orh-e2e-$$-job+1.a_b-c"
make_rootfs "$WORK/rootfs-job"
printf 'NCCL_IB_GID_INDEX=3\033]0;pwned\007\rX\n' >"$WORK/rootfs-job/etc/nccl.conf"
make_bundle "$WORK/bj" "$WORK/rootfs-job" "$WORK/node" "$WORK/warn.conf" \
	'echo "memlock $(ulimit -l)" >/tmp/out; sleep 60' \
	"$ASK; c['process']['env'].append('OCI_RDMA_HOOK_ENABLE=yes' + chr(10) + 'forged: line')"
runc run -d --bundle "$WORK/bj" "$JOB" </dev/null >"$WORK/bj.out" 2>&1 || true
OUT=""
for i in $(seq 1 50); do
	OUT=$(runc exec "$JOB" cat /tmp/out 2>/dev/null || true)
	inside_ran && break
	sleep 0.1
done
check_ran "container $JOB"
check "container $JOB: its record is there while it runs" [ -f "$RUN/$JOB/record.json" ]
TXT=$("$HOOK" inspect "$JOB" 2>&1 || true)
check "inspect ID: the image's line and the env value print escaped" \
	python3 -c 'import sys
t = sys.argv[1]
assert "id: " + sys.argv[2] in t, t
assert "NCCL_IB_GID_INDEX=3\\x1b]0;pwned\\x07\\x0dX" in t, t
assert "yes\\x0aforged: line" in t, t
assert not any(c in t for c in "\x1b\x07\r"), repr(t)
assert not any(l.startswith("forged") for l in t.split("\n")), t' "$TXT" "$JOB"
J=$("$HOOK" inspect "$JOB" --json 2>&1 || true)
check "inspect ID --json: the same text, exact" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["nccl_conf"]["image_lines_kept"] == ["NCCL_IB_GID_INDEX=3\x1b]0;pwned\x07\rX"], r
assert any("yes\nforged: line" in w for w in r["warnings"]), r["warnings"]' "$J"
check "the hook's log: the env value escaped, no forged line" \
	bash -c 'grep -qF "yes\x0aforged: line" "$1" && ! grep -q "^forged" "$1"' _ "$WORK/bj/hook.log"
FOREIGN=$(unshare -p -f --mount-proc "$HOOK" inspect 2>&1 || true)
# the table's first 16 characters of the id, as a pattern: the id holds '+' and '.', which
# a pattern would read as operators (with a 3-digit pid the 16th character is the '+')
JOB_RE=$(printf '%s' "${JOB:0:16}" | sed 's/[][\.*^$+?(){}|]/\\&/g')
check "inspect in another pid namespace (unshare -p -f --mount-proc) lists it, alive unknown" \
	grep -Eq "^$JOB_RE +createRuntime +requested .* \?$" <<<"$FOREIGN"
check "inspect in another pid namespace leaves the running container's record" \
	[ -f "$RUN/$JOB/record.json" ]
check "inspect here still sees it alive" \
	grep -Eq "^$JOB_RE +createRuntime +requested .* yes$" <<<"$("$HOOK" inspect 2>&1)"
runc delete -f "$JOB" >/dev/null 2>&1 || true
check "after delete (poststop) its state directory is gone" [ ! -e "$RUN/$JOB" ]

# Memlock capped by the spec below the need (1 MiB hard and soft): warn starts it with a
# warning; fail refuses a container that asked.
CAP="$ASK; c['process']['rlimits'] = [{'type': 'RLIMIT_MEMLOCK', 'hard': 1048576, 'soft': 1048576}]"
make_bundle "$WORK/b2" "$WORK/rootfs" "$WORK/node" "$WORK/warn.conf" \
	'echo "memlock $(ulimit -l)"' "$CAP"
run_ctr "$WORK/b2"
check_ran "capped memlock, on_error = warn"
check "capped memlock: the container sees 1 MiB (1024 KiB)" grep -qx 'memlock 1024' <<<"$OUT"
check "capped memlock: the hook warns that it is below what RDMA needs" \
	grep -q "memlock of the container's process is 1048576 bytes, below the 8388608 that RDMA needs" \
	"$WORK/b2/hook.log"
make_bundle "$WORK/b3" "$WORK/rootfs" "$WORK/node" "$WORK/fail.conf" \
	'echo "memlock $(ulimit -l)"' "$CAP"
run_ctr "$WORK/b3"
check "capped memlock, on_error = fail: the container that asked is refused (rc $RC)" \
	[ "$RC" != 0 -a -z "$OUT" ]
check "capped memlock, on_error = fail: the engine's error names the check" \
	grep -q "memlock check: memlock of the container's process is 1048576" <<<"$ERR$(cat "$WORK/b3/hook.log")"

# Given a device whose every port is down (rule 8: the plan names only the given devices;
# rule 1 leaves out a port not ACTIVE): fail refuses the container that asked, warn starts
# it unchanged, both saying which ports are down.
echo "1: DOWN" >"$WORK/node/sys/class/infiniband/mlx5_3/ports/1/state"
MAJ=$((16#$(stat -c %t "$WORK/node/dev/infiniband/uverbs3"))) MIN=$((16#$(stat -c %T "$WORK/node/dev/infiniband/uverbs3")))
GIVE="$ASK; c['linux'].setdefault('devices', []).append({'path': '/dev/infiniband/uverbs3', 'type': 'c', 'major': $MAJ, 'minor': $MIN, 'fileMode': 438, 'uid': 0, 'gid': 0})"
DOWN_MSG="every port of the devices the container was given is down: mlx5_3:1 DOWN"
make_bundle "$WORK/b4" "$WORK/rootfs" "$WORK/node" "$WORK/fail.conf" \
	'echo "memlock $(ulimit -l)"' "$GIVE"
run_ctr "$WORK/b4"
check "given ports all down, on_error = fail: refused (rc $RC)" [ "$RC" != 0 -a -z "$OUT" ]
check "given ports all down, on_error = fail: the error names the ports" \
	grep -q "$DOWN_MSG; failing the container" "$WORK/b4/hook.log"
make_bundle "$WORK/b5" "$WORK/rootfs" "$WORK/node" "$WORK/warn.conf" \
	'echo "memlock $(ulimit -l)"; ls /dev/infiniband' "$GIVE"
run_ctr "$WORK/b5"
check_ran "given ports all down, on_error = warn"
check "given ports all down, on_error = warn: a warning naming the ports, the container unchanged" \
	grep -q "$DOWN_MSG; the container starts unchanged (on_error=warn)" "$WORK/b5/hook.log"
check "given ports all down, on_error = warn: no node but the given one" \
	out_is "memlock $(ulimit -l)
uverbs3"
echo "4: ACTIVE" >"$WORK/node/sys/class/infiniband/mlx5_3/ports/1/state"

# GPUDirect RDMA: a container holding a GPU (NVIDIA_VISIBLE_DEVICES) on a node with a
# 5.10 kernel and no peer-memory module gets a warning (and starts, under fail too); with
# nvidia_peermem loaded, none.
mkdir -p "$WORK/node/proc/sys/kernel"
echo "5.10.0-28-amd64" >"$WORK/node/proc/sys/kernel/osrelease"
GPU="$ASK; c['process']['env'].append('NVIDIA_VISIBLE_DEVICES=0')"
make_bundle "$WORK/b6" "$WORK/rootfs" "$WORK/node" "$WORK/fail.conf" \
	'echo "memlock $(ulimit -l)"' "$GPU"
run_ctr "$WORK/b6"
check_ran "GPUDirect unavailable, on_error = fail: the container starts"
check "GPUDirect unavailable: a warning naming the kernel" \
	grep -q "GPUDirect RDMA unavailable: .*kernel (5.10.0-28-amd64) is older than 5.12" \
	"$WORK/b6/hook.log"
mkdir -p "$WORK/node/sys/module/nvidia_peermem"
echo 1.0 >"$WORK/node/sys/module/nvidia_peermem/version"
make_bundle "$WORK/b7" "$WORK/rootfs" "$WORK/node" "$WORK/fail.conf" \
	'echo "memlock $(ulimit -l)"' "$GPU"
run_ctr "$WORK/b7"
check_ran "nvidia_peermem loaded"
check "nvidia_peermem loaded: no GPUDirect warning (the hook ran: its summary line is there)" \
	bash -c 'grep -q "device nodes:" "$1" && ! grep -q GPUDirect "$1"' _ "$WORK/b7/hook.log"

# A running container holding a GPU on that node, under nccl_fail_closed: its
# /etc/nccl.conf holds NCCL_NET=IB, and inspect ID prints the record's GPUDirect verdict
# (the peer-memory module; not DMA-BUF on 5.10) and the pin.
write_conf "$WORK/closed.conf" "[node]
memlock = 4M
[containers]
nccl_fail_closed = yes"
GID_="orh-e2e-$$-gdr"
make_bundle "$WORK/b8" "$WORK/rootfs" "$WORK/node" "$WORK/closed.conf" \
	'{ echo "memlock $(ulimit -l)"; cat /etc/nccl.conf; } >/tmp/out; sleep 60' "$GPU"
runc run -d --bundle "$WORK/b8" "$GID_" </dev/null >"$WORK/b8.out" 2>&1 || true
for i in $(seq 1 50); do
	OUT=$(runc exec "$GID_" cat /tmp/out 2>/dev/null || true)
	inside_ran && break
	sleep 0.1
done
check_ran "nccl_fail_closed, a GPU: running container"
check "nccl_fail_closed: the container's /etc/nccl.conf holds NCCL_NET=IB" \
	grep -qx "NCCL_NET=IB" <<<"$OUT"
INS=$("$HOOK" inspect "$GID_" 2>&1 || true)
check "inspect ID: nccl.gpudirect: peermem" grep -qx "nccl.gpudirect: peermem" <<<"$INS"
check "inspect ID: nccl.gpudirect_why names the module and the 5.10 kernel" \
	grep -q "^nccl.gpudirect_why: by the peer-memory module (nvidia_peermem); not DMA-BUF: the kernel (5.10.0-28-amd64) is older than 5.12" <<<"$INS"
check "inspect ID: nccl.net_pinned: true" grep -qx "nccl.net_pinned: true" <<<"$INS"
runc delete -f "$GID_" >/dev/null 2>&1 || true

# The spec-edit path (podman's precreate): the nccl-conf stage writes the record, with what
# the edit put into the spec; podman rm runs the poststop hook the edit registered.
if command -v podman >/dev/null 2>&1; then
	rm -rf "$WORK/node" "$WORK/rootfs"
	spec_edit_node
	hooks_d "$WORK/hooks.d" "$HOOK" "$WORK/node.conf" oci-rdma-hook-precreate
	podman_setup --hooks-dir "$WORK/hooks.d"
	# (a detached podman run sets RLIMIT_NOFILE and NPROC above this machine's hard limits)
	PID_=$("${PODMAN[@]}" run -d --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
		--network none --annotation oci-rdma-hook/enable=true \
		localhost/orh-e2e-bb /bin/sh -c 'echo "memlock $(ulimit -l)" >/tmp/out; sleep 60' \
		2>"$WORK/podman.err" || true)
	for i in $(seq 1 50); do
		OUT=$("${PODMAN[@]}" exec "$PID_" cat /tmp/out 2>/dev/null || true)
		inside_ran && break
		sleep 0.1
	done
	check_ran "podman precreate"
	check "podman precreate: the container sees the edit's memlock (4 MiB)" \
		grep -qx 'memlock 4096' <<<"$OUT"
	J=$("$HOOK" inspect "$PID_" --json 2>&1 || true)
	check "podman precreate: the record is nccl-conf's, with the spec's devices and memlock" \
		python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["stage"] == "nccl-conf" and "spec edit" in r["edited_by"], r
assert r["spec_devices"] == 9 and r["memlock"]["in_spec"] == 4 << 20, r
assert r["alive"] is True and r["nccl_conf"]["result"] == "written"' "$J"
	"${PODMAN[@]}" rm -f "$PID_" >/dev/null 2>&1 || true
	check "podman precreate: after rm (poststop) the state directory is gone" \
		[ -n "$PID_" -a ! -e "$RUN/$PID_" ]
fi
finish
