#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The image checks (src/node/image.c, src/decide/image_check.c) with runc containers served
# by the live hook on a DGX-like node (the eight InfiniBand HCAs the plan gives): a busybox image gets the
# "no provider" warning for every device, in the hook's log, the record and `inspect`; an
# image with Debian's rdma-core layout (the host's own libibverbs, a provider for mlx5)
# gets "found" and no warning; NCCL from apt and from pip in a venv only PATH names are
# both recorded, pip's marked as the one PyTorch loads; under image_check = fail the busybox
# container that asked is refused with the reason, one that did not ask starts; with
# image_check = off nothing is read; the runtime shim serving a container alone checks
# the image in the bundle's root the same way, and podman's precreate leaves it to the
# nccl-conf stage it registers.
. "$(dirname "$0")/lib.sh"
need_root_runc
setup_work

RUN=/run/oci-rdma-hook
MKTREE="$ORH_SRCDIR/tests/mkimage_tree.py"
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
ASK="$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true'}"
INSIDE='echo "memlock $(ulimit -l)" >/tmp/out; sleep 60'
make_node dgx-h100.json "$WORK/node"
write_conf "$WORK/warn.conf" ""
write_conf "$WORK/fail.conf" "[containers]
image_check = fail"
write_conf "$WORK/off.conf" "[containers]
image_check = off"

# start NAME BUNDLE: run the container detached until its first line is written ($OUT)
start() {
	OUT=""
	runc run -d --bundle "$2" "$1" </dev/null >"$2.out" 2>&1 || true
	for _ in $(seq 1 50); do
		OUT=$(runc exec "$1" cat /tmp/out 2>/dev/null || true)
		inside_ran && break
		sleep 0.1
	done
}

# A busybox image given the node's HCAs: no libibverbs, so no provider for any of them.
make_rootfs "$WORK/busybox"
ID="orh-e2e-$$-bb"
make_bundle "$WORK/b1" "$WORK/busybox" "$WORK/node" "$WORK/warn.conf" "$INSIDE" "$ASK"
start "$ID" "$WORK/b1"
check_ran "busybox image"
check "busybox: the hook warns that NCCL will not use the HCAs, and what to install" \
	grep -q "NCCL in this container will not use mlx5_0, mlx5_1, .*mlx5_7: the image has no provider for mlx5 (it has no libibverbs.so.1 where its loader looks); install rdma-core's libibverbs" \
	"$WORK/b1/hook.log"
J=$("$HOOK" inspect "$ID" --json 2>&1 || true)
check "busybox: the record's image part (no libibverbs, every device missing, its cost)" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
i = r["image"]
assert i["libibverbs"] is None and i["abi"] is None, i
assert len(i["devices"]) == 8, i["devices"]
assert all(d["provider"] == "mlx5" and d["state"] == "missing: no libibverbs"
           for d in i["devices"]), i["devices"]
assert i["usable"] == 0 and i["nccl"] == [] and i["notes"] == [], i
assert 0 < i["opens"] <= 64, i["opens"]
assert any("will not use mlx5_0" in w for w in r["warnings"]), r["warnings"]' "$J"
TXT=$("$HOOK" inspect "$ID" 2>&1 || true)
check "busybox: inspect ID prints each device's state and the warning" \
	python3 -c 'import sys
t = sys.argv[1]
assert "image.devices[3].device: mlx5_3" in t, t
assert "image.devices[3].state: missing: no libibverbs" in t, t
assert "NCCL in this container will not use mlx5_0" in t, t' "$TXT"
runc delete -f "$ID" >/dev/null 2>&1 || true

# Debian's rdma-core (the host's libibverbs, a provider for mlx5 and its driver file),
# NCCL from apt and pip's in a venv that only PATH names.
make_rootfs "$WORK/deb"
python3 "$MKTREE" --real nccl "$WORK/deb"
ID="orh-e2e-$$-deb"
make_bundle "$WORK/b2" "$WORK/deb" "$WORK/node" "$WORK/warn.conf" "$INSIDE" \
	"$ASK; c['process']['env'] = ['PATH=/opt/venv/bin:/usr/bin:/bin']"
start "$ID" "$WORK/b2"
check_ran "Debian's rdma-core image"
J=$("$HOOK" inspect "$ID" --json 2>&1 || true)
check "rdma-core image: every device's provider found, with its paths" \
	python3 -c 'import json, sys
i = json.loads(sys.argv[1])["image"]
assert i["libibverbs"] == "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", i
assert i["found_by"] == "ld.so.cache" and i["abi"] == 34, i
assert len(i["devices"]) == 8 and i["usable"] == 8, i
d = i["devices"][0]
assert d["state"] == "found", d
assert d["library"] == "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so", d
assert d["config"] == "/etc/libibverbs.d/mlx5.driver", d' "$J"
check "rdma-core image: NCCL from apt and from pip, pip's the one PyTorch loads" \
	python3 -c 'import json, sys
n = json.loads(sys.argv[1])["image"]["nccl"]
pip = [c for c in n if c["from"] == "pip" and c["version"] == "2.28.9"]
apt = [c for c in n if c["from"] == "library"]
assert pip and pip[0]["pytorch"] and pip[0]["package"] == "nvidia_nccl_cu12", n
assert pip[0]["path"].startswith("/opt/venv/lib/python3.12/site-packages/"), n
assert apt and apt[0]["version"] == "2.28.3" and not apt[0]["pytorch"], n' "$J"
check "rdma-core image: no warning about the image" \
	bash -c '! grep -q "will not use" "$1"' _ "$WORK/b2/hook.log"
runc delete -f "$ID" >/dev/null 2>&1 || true

# image_check = fail: the busybox container that asked is refused with the reason; one
# that did not ask (activation = always serves it) starts with the warning.
make_bundle "$WORK/b3" "$WORK/busybox" "$WORK/node" "$WORK/fail.conf" \
	'echo "memlock $(ulimit -l)"' "$ASK"
run_ctr "$WORK/b3"
check "image_check = fail: the busybox container that asked is refused (rc $RC)" \
	[ "$RC" != 0 -a -z "$OUT" ]
check "image_check = fail: the hook's error says why" \
	grep -q "image check: the image can use none of the RDMA devices given: NCCL in this container will not use mlx5_0.*failing the container (image_check=fail)" \
	"$WORK/b3/hook.log"
make_bundle "$WORK/b4" "$WORK/busybox" "$WORK/node" "$WORK/fail.conf" \
	'echo "memlock $(ulimit -l)"' "$HOSTNET"
run_ctr "$WORK/b4"
check_ran "image_check = fail, a container that did not ask"
check "image_check = fail, a container that did not ask: warned, not refused" \
	grep -q "NCCL in this container will not use mlx5_0" "$WORK/b4/hook.log"

# image_check = off: the image is not read.
make_bundle "$WORK/b5" "$WORK/busybox" "$WORK/node" "$WORK/off.conf" \
	'echo "memlock $(ulimit -l)"' "$ASK"
run_ctr "$WORK/b5"
check_ran "image_check = off"
check "image_check = off: no image warning (the hook ran: its summary line is there)" \
	bash -c 'grep -q "device nodes:" "$1" && ! grep -q "will not use" "$1"' _ "$WORK/b5/hook.log"
# The runtime shim serving a container alone (host network: no nccl-conf stage) reads the
# image in the bundle's root: its record holds the image part and the warning; under
# image_check = fail the container that asked is refused.
ln -sf "$HOOK" "$WORK/oci-rdma-runtime"
ID="orh-e2e-$$-shim"
make_bundle "$WORK/b6" "$WORK/busybox" "$WORK/node" "$WORK/warn.conf" "$INSIDE" \
	"c.pop('hooks'); $ASK"
OUT=""
OCI_RDMA_HOOK_CONFIG="$WORK/warn.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
	"$WORK/oci-rdma-runtime" run -d --bundle "$WORK/b6" "$ID" </dev/null >"$WORK/b6.out" 2>&1 || true
for _ in $(seq 1 50); do
	OUT=$(runc exec "$ID" cat /tmp/out 2>/dev/null || true)
	inside_ran && break
	sleep 0.1
done
check_ran "the shim, busybox image"
J=$("$HOOK" inspect "$ID" --json 2>&1 || true)
check "the shim: its record holds the image part and the warning" \
	python3 -c 'import json, sys
r = json.loads(sys.argv[1])
i = r["image"]
assert len(i["devices"]) == 8 and i["usable"] == 0, i
assert i["devices"][0]["state"] == "missing: no libibverbs", i
assert any("NCCL in this container will not use mlx5_0" in w for w in r["warnings"]), r' "$J"
"$WORK/oci-rdma-runtime" delete -f "$ID" >/dev/null 2>&1 || true
make_bundle "$WORK/b7" "$WORK/busybox" "$WORK/node" "$WORK/fail.conf" \
	'echo "memlock $(ulimit -l)"' "c.pop('hooks'); $ASK"
RC=0
OUT=$(OCI_RDMA_HOOK_CONFIG="$WORK/fail.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
	"$WORK/oci-rdma-runtime" run --bundle "$WORK/b7" "orh-e2e-$$-shim2" 2>"$WORK/b7.err" \
	</dev/null) || RC=$?
"$WORK/oci-rdma-runtime" delete -f "orh-e2e-$$-shim2" >/dev/null 2>&1 || true
check "the shim, image_check = fail: the container that asked is refused (rc $RC)" \
	[ "$RC" != 0 -a -z "$OUT" ]
check "the shim, image_check = fail: the error says why" \
	grep -q "image check: the image can use none of the RDMA devices given" "$WORK/b7.err"
# podman's precreate edits the spec before the root is mounted; the nccl-conf stage it
# registers (as an NRI plugin registers it) reads the image and records the check.
if command -v podman >/dev/null 2>&1; then
	hooks_d "$WORK/hooks.d" "$HOOK" "$WORK/warn.conf" oci-rdma-hook-precreate
	podman_setup --hooks-dir "$WORK/hooks.d"
	PID_=$("${PODMAN[@]}" run -d --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
		--network none --annotation oci-rdma-hook/enable=true \
		localhost/orh-e2e-bb /bin/sh -c "$INSIDE" 2>"$WORK/podman.err" || true)
	OUT=""
	for _ in $(seq 1 50); do
		OUT=$("${PODMAN[@]}" exec "$PID_" cat /tmp/out 2>/dev/null || true)
		inside_ran && break
		sleep 0.1
	done
	check_ran "podman precreate, busybox image"
	J=$("$HOOK" inspect "$PID_" --json 2>&1 || true)
	check "podman precreate: the nccl-conf stage's record holds the image check" \
		python3 -c 'import json, sys
r = json.loads(sys.argv[1])
assert r["stage"] == "nccl-conf", r
i = r["image"]
assert len(i["devices"]) == 8 and i["usable"] == 0, i
assert any("NCCL in this container will not use mlx5_0" in w for w in r["warnings"]), r' "$J"
	"${PODMAN[@]}" rm -f "$PID_" >/dev/null 2>&1 || true
fi
finish
