#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: podman (runc, cgroupfs) with a hooks.d directory holding the precreate
# registration; the spec edit must reach the container (rlimit, devices, and the plan's
# settings in /etc/nccl.conf through the nccl-conf hook it registers) and leave a variable
# the user set, the image's own nccl.conf lines, and a container that opts out, alone; a
# process started with podman exec sees the settings. Then with every shipped hooks.d file
# (precreate, createRuntime, poststop): the live hook is the one that writes the file.
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v podman >/dev/null 2>&1 || cant_run "podman not installed"
setup_work

spec_edit_node
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = []
EOF
export CONTAINERS_CONF="$WORK/containers.conf"

# The shipped registration, pointed at the build and the fake node.
hooks_d "$WORK/hooks.d" "$HOOK" "$WORK/node.conf" oci-rdma-hook-precreate
check "the shipped precreate registration: stage precreate, always, only PATH in its env" python3 -c '
import json, sys
h = json.load(open(sys.argv[1]))
assert h["stages"] == ["precreate"] and h["when"] == {"always": True}, h
assert [e.split("=")[0] for e in h["hook"]["env"]] == ["PATH"], h' \
	"${ORH_SRCDIR:-$(dirname "$0")/../..}/hooks.d/oci-rdma-hook-precreate.json.in"

podman_setup --hooks-dir "$WORK/hooks.d"

# What a container on this node gets (host network view).
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)
[ -n "$PLAN" ] || cant_run "the fake node gives an empty plan"

# (b) activated: the user's NCCL_IB_HCA kept, devices, memlock, the file.
run_podman -e NCCL_IB_HCA=mine
check "podman run with the precreate hook succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_spec_edit_inside
check "only one NCCL_IB_HCA in PID 1's environment" [ "$(grep -c '^env:NCCL_IB_HCA=' <<<"$OUT")" = 1 ]
check "NCCL_IB_TIMEOUT from the preset is in /etc/nccl.conf" grep -q '^conf:NCCL_IB_TIMEOUT=' <<<"$OUT"
check "uverbs0 (left out by the plan) is not given" out_lacks uverbs0

# (c) the image's own /etc/nccl.conf keeps its values
make_image_rootfs "$WORK/rootfs-img"
tar -C "$WORK/rootfs-img" -cf "$WORK/rootfs-img.tar" .
"${PODMAN[@]}" import "$WORK/rootfs-img.tar" localhost/orh-e2e-img:latest >/dev/null ||
	cant_run "podman import failed"
PODMAN_IMAGE=localhost/orh-e2e-img run_podman
check "image with its own nccl.conf: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_image_conf_kept "podman precreate"

# (d) podman exec sees the settings
exec_sees_plan() { # WHAT
	local rc=0
	"${PODMAN[@]}" run -d --name "orh-e2e-$$-x" --network none localhost/orh-e2e-bb sleep 600 \
		>/dev/null 2>"$WORK/podman.err" || rc=$?
	check "$1: podman run -d succeeds (rc $rc: $(cat "$WORK/podman.err"))" [ "$rc" = 0 ]
	RC=0
	OUT=$("${PODMAN[@]}" exec "orh-e2e-$$-x" /bin/sh -c "$INSIDE" 2>&1) || RC=$?
	check_conf_has_plan "$1: podman exec sees every plan setting in /etc/nccl.conf"
	"${PODMAN[@]}" rm -f -t 0 "orh-e2e-$$-x" >/dev/null 2>&1 || true
}
exec_sees_plan "precreate"

# (g) opted out: nothing changes.
run_podman --annotation oci-rdma-hook/enable=false
check "opted-out container runs (rc $RC: $ERR)" [ "$RC" = 0 ]
DEFAULT_ML=$(sed -n 's/^memlock //p' <<<"$OUT")
check_ran "opted-out container"
check "opted-out container has no NCCL setting" out_lacks 'NCCL_'
check "opted-out container has no RDMA device" out_lacks infiniband
check "opted-out container keeps the default memlock" out_lacks -x 'memlock 4096'

# (d) on_error = fail: a container that asked, with a preset the node does not know, is
# refused, and podman's own error says why (precreate's refusing hook, in runc's error).
cp "$WORK/node.conf" "$WORK/node.conf.saved"
printf '[containers]\non_error = fail\nimage_check = warn\n' >>"$WORK/node.conf"
run_podman --annotation oci-rdma-hook/enable=true --annotation oci-rdma-hook/preset=../../x
check "on_error=fail: a refused container does not run (rc $RC)" \
	bash -c '[ "$1" != 0 ] && ! grep -q "^memlock" <<<"$2"' _ "$RC" "$OUT"
check "on_error=fail: podman's error gives the reason (stderr: $ERR)" \
	grep -q "precreate: annotation 'oci-rdma-hook/preset': unknown preset '../../x'" <<<"$ERR"
# strict means strict: one that asked and gets no usable port (the config's include names
# none of the node's HCAs) is refused with the reason; one that did not ask starts as it is
printf '[node]\ninclude = mlx5_99\n' >>"$WORK/node.conf"
run_podman --annotation oci-rdma-hook/enable=true
check "on_error=fail, asked, no usable port: refused, and podman's error says why (rc $RC: $ERR)" \
	bash -c '[ "$1" != 0 ] && ! grep -q "^memlock" <<<"$2" &&
		 grep -q "no usable RDMA port on this node (mlx5_0:1: not in the config.s include list" <<<"$3"' \
	_ "$RC" "$OUT" "$ERR"
run_podman --annotation oci-rdma-hook/enable=false
check "on_error=fail, no usable port, opted out: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "on_error=fail, no usable port, opted out"
mv "$WORK/node.conf.saved" "$WORK/node.conf"

# (e) every shipped hooks.d file: precreate sees the live createRuntime hook and poststop
# that podman added from hooks.d and registers no second one
hooks_d "$WORK/hooks.d" "$HOOK" "$WORK/node.conf" oci-rdma-hook oci-rdma-hook-poststop
run_podman -e NCCL_IB_HCA=mine
check "every hooks.d file: podman run succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_spec_edit_inside
PODMAN_IMAGE=localhost/orh-e2e-img run_podman
check_image_conf_kept "podman, every hooks.d file"
exec_sees_plan "every hooks.d file"
"${PODMAN[@]}" run -d --name "orh-e2e-$$-h" --network none localhost/orh-e2e-bb sleep 600 >/dev/null 2>&1
check "every hooks.d file: one createRuntime hook of ours in the container's spec, the live one" \
	[ "$("${PODMAN[@]}" inspect "orh-e2e-$$-h" --format '{{json .OCIConfigPath}}' | xargs cat | python3 -c 'import json, sys
d = json.load(sys.stdin)
print([h["args"][-1] for h in d.get("hooks", {}).get("createRuntime", []) if "oci-rdma-hook" in h["path"]])')" = "['createRuntime']" ]
"${PODMAN[@]}" rm -f -t 0 "orh-e2e-$$-h" >/dev/null 2>&1 || true

# (f) what podman reads of the package by default: the createRuntime and poststop files
# of /usr/share/containers/oci/hooks.d; precreate is in /etc/containers/oci/hooks.d, which
# podman's default hooks_dir does not list. The live hook alone gives it all.
rm -f "$WORK/hooks.d/oci-rdma-hook-precreate.json"
run_podman -e NCCL_IB_HCA=mine
check "without precreate: podman run succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_ran "without precreate"
check "without precreate: the user's NCCL_IB_HCA survives" grep -qx 'env:NCCL_IB_HCA=mine' <<<"$OUT"
conf_has_plan "without precreate: /etc/nccl.conf has every plan variable"
for n in uverbs1 uverbs8 rdma_cm; do
	want=$(stat -c '%t:%T' "$WORK/node/dev/infiniband/$n")
	check "without precreate: /dev/infiniband/$n is a character device $want" \
		grep -qx "/dev/infiniband/$n character special file $want" <<<"$OUT"
done
# the live hook raises memlock and never lowers it: podman's default (what the opted-out
# container got) is above the node's 4 MiB here, so it stays; a spec edit (precreate)
# sets the node's value exactly
got=$(sed -n 's/^memlock //p' <<<"$OUT")
above=no
[ "$DEFAULT_ML" = unlimited ] || [ "${DEFAULT_ML:-0}" -ge 4096 ] 2>/dev/null && above=yes
check "without precreate: memlock is podman's default $DEFAULT_ML, above the node's 4096, not lowered (memlock $got)" \
	[ -n "$got" -a "$got" = "$DEFAULT_ML" -a "$above" = yes ]
PODMAN_IMAGE=localhost/orh-e2e-img run_podman
check_image_conf_kept "podman without precreate"
exec_sees_plan "without precreate"

hooks_d "$WORK/hooks.d" "$HOOK" "$WORK/node.conf" oci-rdma-hook-precreate

# activation = annotation: `podman run -e OCI_RDMA_HOOK_ENABLE=true` asks as the
# annotation does (the hook reads the node config at every start)
printf '[containers]\nactivation = annotation\n' >>"$WORK/node.conf"
run_podman -e OCI_RDMA_HOOK_ENABLE=true
check "activation = annotation, -e OCI_RDMA_HOOK_ENABLE=true: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_served "-e OCI_RDMA_HOOK_ENABLE=true"
run_podman
check "activation = annotation, no request: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "no request"

"${PODMAN[@]}" rmi -f localhost/orh-e2e-bb localhost/orh-e2e-img >/dev/null 2>&1 || true
"${PODMAN[@]}" system reset -f >/dev/null 2>&1 || true
finish
