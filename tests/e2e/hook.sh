#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: runc starts busybox containers with oci-rdma-hook as createRuntime hook on
# a fake node (tests/mknode.py --devnodes); every check is made from inside the
# container, or on the host files the hook must not touch.
. "$(dirname "$0")/lib.sh"

need_root_runc
setup_work

make_rootfs "$WORK/base"
fresh() { cp -a "$WORK/base" "$WORK/$1"; }
fresh rootfs
make_node seed001-roce.json "$WORK/node"
make_node nordma.json "$WORK/nordma"
write_conf "$WORK/always.conf" "[containers]
activation = always"
write_conf "$WORK/annot.conf" "[containers]
activation = annotation"
write_conf "$WORK/failmode.conf" "[containers]
activation = annotation
on_error = fail
image_check = warn"

HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
# an ungranted host node, bind-mounted in by the runtime: proves the cgroup denies
UNGRANTED="c['mounts'].append({'destination': '/ungranted', 'type': 'bind', 'source': '$WORK/node/dev/infiniband/uverbs0', 'options': ['bind']})"
INSIDE='for f in /dev/infiniband/*; do stat -c "%n %F %t:%T %a" $f; done; probe /dev/infiniband/uverbs1 /dev/infiniband/uverbs8 /dev/infiniband/rdma_cm /ungranted; echo "memlock $(ulimit -l)"; echo ---; cat /etc/nccl.conf'

hex() { printf '%x' "$1"; }
node_numbers() { stat -c '%t:%T' "$WORK/node/dev/infiniband/$1"; }
host_hard_kib=$(ulimit -Hl)

# ---- 1. an activated container on a RoCE node -------------------------------------
make_bundle "$WORK/b1" "$WORK/rootfs" "$WORK/node" "$WORK/always.conf" "$INSIDE" \
	"$HOSTNET; $UNGRANTED"
# start it with a low soft limit: the hook raises it as far as the hard limit allows
(ulimit -Sl 64 && run_ctr "$WORK/b1" && printf '%s\n' "$RC" "$OUT" >"$WORK/out1")
RC=$(head -1 "$WORK/out1"); OUT=$(tail -n +2 "$WORK/out1")
check "activated container starts (rc=$RC)" [ "$RC" = 0 ]
check_ran "activated container"
for d in uverbs1 uverbs2 uverbs8 rdma_cm; do
	check "/dev/infiniband/$d is a char device with the node's numbers, mode 0666" \
		grep -qx "/dev/infiniband/$d character special file $(node_numbers $d) 666" <<<"$OUT"
done
check "uverbs0 (front-end NIC, not in the plan) is not created" \
	out_lacks "/dev/infiniband/uverbs0 "
check "opening uverbs1 gives ENXIO (cgroup allows it)" \
	grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT"
check "opening uverbs8 gives ENXIO" grep -qx "/dev/infiniband/uverbs8 ENXIO" <<<"$OUT"
# rdma_cm is a misc device: an unregistered minor gives ENODEV, never EPERM when allowed
check "opening rdma_cm is allowed (ENXIO/ENODEV, not EPERM)" \
	grep -Eqx "/dev/infiniband/rdma_cm (ENXIO|ENODEV)" <<<"$OUT"
check "an ungranted node opens with EPERM (the cgroup is enforcing)" \
	grep -qx "/ungranted EPERM" <<<"$OUT"
check "memlock soft limit raised to the hard limit ($host_hard_kib KiB) from 64" \
	grep -qx "memlock $host_hard_kib" <<<"$OUT"
"$HOOK" --sysroot "$WORK/node" --config "$WORK/always.conf" env >"$WORK/env1"
check "the plan has NCCL settings" [ "$(wc -l <"$WORK/env1")" -ge 3 ]
while IFS= read -r line; do
	check "nccl.conf holds '$line'" grep -qxF "$line" <<<"${OUT#*---}"
done <"$WORK/env1"
# (in the file the container showed after its "---" line: one with the plan's NCCL_IB_HCA)
conf_comments_clean() {
	inside_ran && grep -q '^NCCL_IB_HCA=' <<<"${OUT#*---}" && ! grep -q '^#.*=' <<<"${OUT#*---}"
}
check "nccl.conf comment lines carry no '='" conf_comments_clean
check "hook log names the container" grep -q "container orh-e2e-$$-" "$WORK/b1/hook.log"

# ---- 2. the image's own /etc/nccl.conf survives; a second run adds nothing twice -----
fresh rootfs2
printf 'NCCL_IB_TIMEOUT=14\nNCCL_DEBUG=INFO\n' >"$WORK/rootfs2/etc/nccl.conf"
make_bundle "$WORK/b2" "$WORK/rootfs2" "$WORK/node" "$WORK/always.conf" \
	'cat /etc/nccl.conf' "$HOSTNET"
run_ctr "$WORK/b2"
run_ctr "$WORK/b2"
check "second container with image nccl.conf starts" [ "$RC" = 0 ]
check "image lines come first, unchanged" \
	[ "$(printf '%s\n' "$OUT" | head -2)" = "$(printf 'NCCL_IB_TIMEOUT=14\nNCCL_DEBUG=INFO')" ]
check "the image's NCCL_IB_TIMEOUT is not defined a second time" \
	[ "$(grep -c '^NCCL_IB_TIMEOUT=' <<<"$OUT")" = 1 ]
check "plan values the image lacks are added" grep -q '^NCCL_IB_HCA=' <<<"$OUT"
check "a second run replaces its block instead of appending" \
	[ "$(grep -c '^# oci-rdma-hook begin' <<<"$OUT")" = 1 ]
check "NCCL_IB_HCA appears once after two runs" [ "$(grep -c '^NCCL_IB_HCA=' <<<"$OUT")" = 1 ]

# ---- 3. a container that is not activated is left unchanged -----------------------
fresh rootfs3
UNCHANGED='ls /dev/infiniband 2>&1; echo "memlock $(ulimit -l)"; cat /etc/nccl.conf 2>&1; true'
# check_unchanged LABEL ROOTFS: $OUT, of $UNCHANGED run with memlock 64 KiB, shows a
# container that ran (check_ran) left as it would be without the hook
no_conf_after_run() { inside_ran && [ ! -e "$1/etc/nccl.conf" ]; }
check_unchanged() {
	check_ran "$1"
	check "$1: no /dev/infiniband" grep -q "No such file" <<<"$(head -1 <<<"$OUT")"
	check "$1: memlock untouched" grep -qx "memlock 64" <<<"$OUT"
	check "$1: no nccl.conf in the rootfs" no_conf_after_run "$2"
}
make_bundle "$WORK/b3" "$WORK/rootfs3" "$WORK/node" "$WORK/annot.conf" "$UNCHANGED" "$HOSTNET"
(ulimit -Sl 64 && run_ctr "$WORK/b3" && printf '%s\n' "$RC" "$OUT" >"$WORK/out3")
OUT=$(tail -n +2 "$WORK/out3")
check "not activated: starts" [ "$(head -1 "$WORK/out3")" = 0 ]
check_unchanged "not activated" "$WORK/rootfs3"
check "not activated: logged" grep -q "not activated" "$WORK/b3/hook.log"
# enable=false opts out even when activation = always
make_bundle "$WORK/b3b" "$WORK/rootfs3" "$WORK/node" "$WORK/always.conf" "$UNCHANGED" \
	"$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'false'}"
run_ctr "$WORK/b3b"
check_ran "enable=false"
check "enable=false: no /dev/infiniband" grep -q "No such file" <<<"$(head -1 <<<"$OUT")"
check "enable=false: no nccl.conf" no_conf_after_run "$WORK/rootfs3"
# annotation mode with the annotation: activated
make_bundle "$WORK/b3c" "$WORK/rootfs3" "$WORK/node" "$WORK/annot.conf" "$UNCHANGED" \
	"$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true'}"
run_ctr "$WORK/b3c"
check "annotated container gets devices" grep -q uverbs1 <<<"$OUT"
rm -f "$WORK/rootfs3/etc/nccl.conf"
# the same request in process.env, where docker before API 1.43 and Kubernetes `env:`
# put it: activated under activation = annotation
make_bundle "$WORK/b3d" "$WORK/rootfs3" "$WORK/node" "$WORK/annot.conf" "$INSIDE" \
	"$HOSTNET; c['process']['env'].append('OCI_RDMA_HOOK_ENABLE=true')"
run_ctr "$WORK/b3d"
check "OCI_RDMA_HOOK_ENABLE=true, activation = annotation: starts (rc=$RC)" [ "$RC" = 0 ]
check "... /dev/infiniband/uverbs1 is there with the node's numbers" \
	grep -qx "/dev/infiniband/uverbs1 character special file $(node_numbers uverbs1) 666" <<<"$OUT"
check "... and opens with ENXIO (the cgroup allows it)" grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT"
check "... /etc/nccl.conf holds the plan's NCCL_IB_HCA and the preset's NCCL_IB_TIMEOUT" \
	bash -c 'grep -q "^NCCL_IB_HCA=" <<<"$1" && grep -q "^NCCL_IB_TIMEOUT=" <<<"$1"' _ "${OUT#*---}"
rm -f "$WORK/rootfs3/etc/nccl.conf"
# ... with OCI_RDMA_HOOK_PRESET=none: the devices, and no tuned variable
make_bundle "$WORK/b3e" "$WORK/rootfs3" "$WORK/node" "$WORK/annot.conf" "$INSIDE" \
	"$HOSTNET; c['process']['env'] += ['OCI_RDMA_HOOK_ENABLE=true', 'OCI_RDMA_HOOK_PRESET=none']"
run_ctr "$WORK/b3e"
check "OCI_RDMA_HOOK_PRESET=none: uverbs1 is there" grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT"
check "... nccl.conf has NCCL_IB_HCA and no NCCL_IB_TIMEOUT" \
	bash -c 'grep -q "^NCCL_IB_HCA=" <<<"$1" && ! grep -q "^NCCL_IB_TIMEOUT=" <<<"$1"' _ "${OUT#*---}"
rm -f "$WORK/rootfs3/etc/nccl.conf"
# OCI_RDMA_HOOK_ENABLE=false opts out under activation = always
make_bundle "$WORK/b3f" "$WORK/rootfs3" "$WORK/node" "$WORK/always.conf" "$UNCHANGED" \
	"$HOSTNET; c['process']['env'].append('OCI_RDMA_HOOK_ENABLE=false')"
(ulimit -Sl 64 && run_ctr "$WORK/b3f" && printf '%s\n' "$RC" "$OUT" >"$WORK/out3f")
OUT=$(tail -n +2 "$WORK/out3f")
check "OCI_RDMA_HOOK_ENABLE=false: starts" [ "$(head -1 "$WORK/out3f")" = 0 ]
check_unchanged "OCI_RDMA_HOOK_ENABLE=false" "$WORK/rootfs3"
# a value that is neither true nor false: the container asked, so on_error = fail fails it
make_bundle "$WORK/b3g" "$WORK/rootfs3" "$WORK/node" "$WORK/failmode.conf" 'echo started' \
	"$HOSTNET; c['process']['env'].append('OCI_RDMA_HOOK_ENABLE=yes')"
run_ctr "$WORK/b3g"
check "OCI_RDMA_HOOK_ENABLE=yes, on_error=fail: the container does not start" \
	bash -c '[ "$1" != 0 ] && ! grep -q started <<<"$2"' _ "$RC" "$OUT"
check "... the log names the process.env entry" \
	grep -q "process.env entry 'OCI_RDMA_HOOK_ENABLE': value 'yes' is neither 'true' nor 'false'" \
	"$WORK/b3g/hook.log"
check "... no nccl.conf in the rootfs (of a hook that ran and refused)" \
	bash -c 'grep -q "process.env entry .OCI_RDMA_HOOK_ENABLE." "$1" && [ ! -e "$2" ]' _ \
	"$WORK/b3g/hook.log" "$WORK/rootfs3/etc/nccl.conf"
# a Kubernetes pod sandbox (the pause container) is never served, even with
# activation = always and the annotation asking; containerd's and CRI-O's marks
for ann in "'io.kubernetes.cri.container-type': 'sandbox'" "'io.kubernetes.cri-o.ContainerType': 'sandbox'"; do
	make_bundle "$WORK/b3s" "$WORK/rootfs3" "$WORK/node" "$WORK/always.conf" "$UNCHANGED" \
		"$HOSTNET; c['annotations'] = {$ann, 'oci-rdma-hook/enable': 'true'}"
	cp "$WORK/b3s/config.json" "$WORK/b3s.before"
	(ulimit -Sl 64 && run_ctr "$WORK/b3s" && printf '%s\n' "$RC" "$OUT" >"$WORK/out3s")
	OUT=$(tail -n +2 "$WORK/out3s")
	check "pod sandbox ($ann): starts" [ "$(head -1 "$WORK/out3s")" = 0 ]
	check_unchanged "pod sandbox ($ann)" "$WORK/rootfs3"
	check "pod sandbox ($ann): config.json byte for byte (the container ran)" \
		bash -c 'grep -q "^memlock " <<<"$1" && cmp -s "$2" "$3"' _ "$OUT" "$WORK/b3s.before" \
		"$WORK/b3s/config.json"
	check "pod sandbox ($ann): the log says why" grep -q "a Kubernetes pod sandbox" "$WORK/b3s/hook.log"
done

# ---- 4. a node without RDMA changes nothing -----------------------------------------
fresh rootfs4
make_bundle "$WORK/b4" "$WORK/rootfs4" "$WORK/nordma" "$WORK/always.conf" "$UNCHANGED" "$HOSTNET"
(ulimit -Sl 64 && run_ctr "$WORK/b4" && printf '%s\n' "$RC" "$OUT" >"$WORK/out4")
OUT=$(tail -n +2 "$WORK/out4")
check "no RDMA: starts" [ "$(head -1 "$WORK/out4")" = 0 ]
check_unchanged "no RDMA" "$WORK/rootfs4"
check "no RDMA: logged" grep -q "no usable RDMA device" "$WORK/b4/hook.log"

# ---- 5. the spec's RLIMIT_MEMLOCK wins ----------------------------------------------
make_bundle "$WORK/b5" "$WORK/rootfs" "$WORK/node" "$WORK/always.conf" 'echo "memlock $(ulimit -l)"' \
	"$HOSTNET; c['process']['rlimits'] = [{'type': 'RLIMIT_MEMLOCK', 'soft': 131072, 'hard': 131072}]"
run_ctr "$WORK/b5"
check "spec RLIMIT_MEMLOCK (128 KiB) is kept" grep -qx "memlock 128" <<<"$OUT"

# ---- 6. read-only rootfs: generated file bind-mounted, removed at poststop ---------
fresh rootfs6
printf 'NCCL_DEBUG=WARN\n' >"$WORK/rootfs6/etc/nccl.conf"
sum6=$(sha256sum <"$WORK/rootfs6/etc/nccl.conf")
make_bundle "$WORK/b6" "$WORK/rootfs6" "$WORK/node" "$WORK/always.conf" \
	'cat /etc/nccl.conf; if echo x >>/etc/nccl.conf 2>/dev/null; then echo WRITABLE; else echo READ-ONLY; fi; ls /run/oci-rdma-hook 2>/dev/null; true' \
	"$HOSTNET; c['root']['readonly'] = True"
run_ctr "$WORK/b6"
check "read-only rootfs: starts" [ "$RC" = 0 ]
check "read-only rootfs: image line kept" grep -qx "NCCL_DEBUG=WARN" <<<"$OUT"
check "read-only rootfs: plan values visible" grep -q "^NCCL_IB_HCA=" <<<"$OUT"
check "read-only rootfs: the mounted file is read-only" grep -qx READ-ONLY <<<"$OUT"
check "read-only rootfs: image file on the host untouched (the container ran)" \
	bash -c 'grep -qx READ-ONLY <<<"$1" && [ "$(sha256sum <"$2")" = "$3" ]' _ "$OUT" \
	"$WORK/rootfs6/etc/nccl.conf" "$sum6"
check "read-only rootfs: logged as bind-mounted" grep -q "bind-mounted from /run/oci-rdma-hook/" "$WORK/b6/hook.log"
# the file the log names (a run that wrote none names none, and fails here)
gen6=$(sed -n 's#.*bind-mounted from \(/run/oci-rdma-hook/[^ ,;]*\).*#\1#p' "$WORK/b6/hook.log" | head -1)
check "poststop removed the generated file (${gen6:-none named in the log})" \
	bash -c '[ -n "$1" ] && [ ! -e "$1" ] && ! ls /run/oci-rdma-hook/orh-e2e-'$$'-* >/dev/null 2>&1' _ "$gen6"

# ---- 7. no CAP_MKNOD (as in a user namespace): host nodes are bind-mounted ---------
if command -v capsh >/dev/null 2>&1; then
	HOOK_PREFIX="capsh --drop=cap_mknod -- -c 'exec \"\$0\" \"\$@\"'" \
		make_bundle "$WORK/b7" "$WORK/rootfs" "$WORK/node" "$WORK/always.conf" "$INSIDE" \
		"$HOSTNET; $UNGRANTED"
	run_ctr "$WORK/b7"
	check "no CAP_MKNOD: starts" [ "$RC" = 0 ]
	check "no CAP_MKNOD: uverbs1 is the host node" \
		grep -qx "/dev/infiniband/uverbs1 character special file $(node_numbers uverbs1) 666" <<<"$OUT"
	check "no CAP_MKNOD: uverbs1 opens with ENXIO" grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT"
	check "no CAP_MKNOD: nodes were bound, not created" grep -q "0 created, 0 already there, 9 bound" "$WORK/b7/hook.log"
else
	not_ok "capsh (libcap2-bin) missing: bind-mount fallback not tested"
fi

# ---- 8. on_error: fail fails a container that asked; warn starts it ----------------
fresh rootfs8
mkfifo "$WORK/rootfs8/etc/nccl.conf"
make_bundle "$WORK/b8" "$WORK/rootfs8" "$WORK/node" "$WORK/failmode.conf" 'echo started' \
	"$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true'}"
run_ctr "$WORK/b8"
check "on_error=fail: a requested container whose setup fails does not start" \
	bash -c '[ "$1" != 0 ] && ! grep -q started <<<"$2"' _ "$RC" "$OUT"
make_bundle "$WORK/b8b" "$WORK/rootfs8" "$WORK/node" "$WORK/always.conf" 'echo started' "$HOSTNET"
run_ctr "$WORK/b8b"
check "on_error=warn: the same failure starts the container" grep -qx started <<<"$OUT"
check "on_error=warn: the failure is logged" grep -q "not a regular file" "$WORK/b8b/hook.log"
# the hook registered directly (its stderr is runc's to read): runc's error gives the reason
make_bundle "$WORK/b8c" "$WORK/rootfs8" "$WORK/node" "$WORK/failmode.conf" 'echo started' \
	"$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true'}; c['hooks']['createRuntime'][0]['path'] = '$HOOK'"
run_ctr "$WORK/b8c"
check "on_error=fail: runc's error gives the reason (stderr: $ERR)" \
	bash -c '[ "$1" != 0 ] && grep -q "/etc/nccl.conf.*not a regular file.*on_error=fail" <<<"$2"' _ "$RC" "$ERR"

# ---- 9. prestart behaves as createRuntime -------------------------------------------
fresh rootfs9
make_bundle "$WORK/b9" "$WORK/rootfs9" "$WORK/node" "$WORK/always.conf" "$INSIDE" \
	"$HOSTNET; h = c['hooks'].pop('createRuntime'); h[0]['args'][-1] = 'prestart'; c['hooks']['prestart'] = h"
run_ctr "$WORK/b9"
check "prestart: uverbs1 present and allowed" grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT"
check "prestart: nccl.conf written" grep -q "^NCCL_IB_HCA=" <<<"$OUT"
check "prestart: logged" grep -q "device nodes" "$WORK/b9/hook.log"

# ---- 10. a rootfs on a read-only mount (EROFS): bind-mount path ----------------------
fresh rootfs10
printf 'NCCL_DEBUG=WARN\n' >"$WORK/rootfs10/etc/nccl.conf"
if mount --bind "$WORK/rootfs10" "$WORK/rootfs10" &&
	mount -o remount,bind,ro "$WORK/rootfs10"; then
	make_bundle "$WORK/b10" "$WORK/rootfs10" "$WORK/node" "$WORK/always.conf" \
		'cat /etc/nccl.conf' "$HOSTNET"
	run_ctr "$WORK/b10"
	check "EROFS: starts" [ "$RC" = 0 ]
	check "EROFS: image line and plan values visible" \
		bash -c 'grep -qx NCCL_DEBUG=WARN <<<"$1" && grep -q "^NCCL_IB_HCA=" <<<"$1"' _ "$OUT"
	check "EROFS: image file untouched (the container saw the plan)" \
		bash -c 'grep -q "^NCCL_IB_HCA=" <<<"$1" && [ "$(cat "$2")" = NCCL_DEBUG=WARN ]' _ "$OUT" \
		"$WORK/rootfs10/etc/nccl.conf"
	check "EROFS: the generated file was bind-mounted" grep -q "bind-mounted from" "$WORK/b10/hook.log"
	umount "$WORK/rootfs10"
else
	not_ok "EROFS: could not make a read-only bind mount"
fi

# ---- rule 9: a container given GPUs 2 and 3 of a DGX-H100-like node -----------------------
# (NVIDIA_VISIBLE_DEVICES=2,3, as a GPU device plugin sets it): the NICs of their PCIe switch,
# mlx5_2 and mlx5_3, their nodes and grants, and nothing of the other six
make_node dgx-h100.json "$WORK/dgx"
cp -a "$WORK/rootfs" "$WORK/rootfs-gpu"
rm -f "$WORK/rootfs-gpu/etc/nccl.conf"
GPUIN='ls /dev/infiniband | tr "\n" " "; echo; probe /ungranted-dgx; sed -n "s/^NCCL_IB_HCA=/HCA=/p" /etc/nccl.conf'
make_bundle "$WORK/bg" "$WORK/rootfs-gpu" "$WORK/dgx" "$WORK/always.conf" "$GPUIN" \
	"$HOSTNET; c['process']['env'].append('NVIDIA_VISIBLE_DEVICES=2,3'); c['mounts'].append({'destination': '/ungranted-dgx', 'type': 'bind', 'source': '$WORK/dgx/dev/infiniband/uverbs0', 'options': ['bind']})"
run_ctr "$WORK/bg"
check "GPUs 2,3 (dgx-h100): the container starts (rc $RC)" [ "$RC" = 0 ]
check "GPUs 2,3: /dev/infiniband holds rdma_cm, uverbs2 and uverbs3 alone" \
	grep -qx "rdma_cm uverbs2 uverbs3 " <<<"$OUT"
check "GPUs 2,3: NCCL_IB_HCA is mlx5_2 and mlx5_3, the NICs of their PCIe switch" \
	grep -qx "HCA==mlx5_2:1,mlx5_3:1" <<<"$OUT"
check "GPUs 2,3: uverbs0 (mlx5_0, another switch) is not granted (EPERM)" \
	grep -qx "/ungranted-dgx EPERM" <<<"$OUT"

# ---- rule 10: one fabric on a node with InfiniBand and RoCE ports ------------------------
make_node mixed-fabric.json "$WORK/mf"
cp -a "$WORK/rootfs" "$WORK/rootfs-mf"
rm -f "$WORK/rootfs-mf/etc/nccl.conf"
make_bundle "$WORK/bmf" "$WORK/rootfs-mf" "$WORK/mf" "$WORK/always.conf" \
	'ls /dev/infiniband | tr "\n" " "; echo; sed -n "s/^NCCL_IB_HCA=/HCA=/p" /etc/nccl.conf' "$HOSTNET"
run_ctr "$WORK/bmf"
check "mixed fabrics: the container starts (rc $RC)" [ "$RC" = 0 ]
check "mixed fabrics: NCCL_IB_HCA holds the RoCE ports alone, the larger group" \
	grep -qx "HCA==mlx5_1:1,mlx5_2:1,mlx5_3:1" <<<"$OUT"
check "mixed fabrics: no node of the InfiniBand HCA (uverbs4)" \
	grep -qx "rdma_cm uverbs1 uverbs2 uverbs3 " <<<"$OUT"
check "mixed fabrics: the log names the port left out" grep -q "left out: mlx5_4:1" "$WORK/bmf/hook.log"

finish
