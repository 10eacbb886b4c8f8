#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The node's RDMA userspace given to an image that lacks it (image_supply = yes; src/decide/
# image_check.c decides, src/apply/supply.c applies), runc containers on a DGX-like node
# (eight mlx5 HCAs) whose root holds this machine's libibverbs, libnl and mlx5 provider:
# - an image with glibc and no libibverbs: the node's libibverbs, its libraries and the
#   provider mounted read-only at /run/oci-rdma-hook/lib, a driver file naming the provider
#   by path, the loader's entry and a rewritten ld.so.cache: NCCL's dlopen of libibverbs in
#   it (tests/e2e/dlprobe.c, on the image's own loader) loads the node's; the same through
#   the runtime shim, whose spec edit adds the mounts and whose nccl-conf stage rewrites
#   the cache; without image_supply it finds none (the control);
# - an image with libibverbs of the node's ABI and no mlx5 provider: only the provider and
#   its driver file, the image's own libibverbs and cache left as they are;
# - an image whose libibverbs is of another ABI, with its development link libibverbs.so
#   (which NCCL opens first): the whole stack, both names leading to the node's;
# - an image with its own provider for mlx5: nothing given.
. "$(dirname "$0")/lib.sh"
need_root_runc
setup_work

MKTREE="$ORH_SRCDIR/tests/mkimage_tree.py"
MULTI=usr/lib/x86_64-linux-gnu
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
ASK="$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true'}"
INSIDE='/bin/dlprobe; ls /run/oci-rdma-hook/lib 2>/dev/null | sed "s/^/lib /"
for f in /etc/libibverbs.d/oci-rdma-hook-*.driver /etc/ld.so.conf.d/00-oci-rdma-hook.conf; do
	[ -f "$f" ] && echo "file $f: $(cat "$f")"; done
[ -e /run/oci-rdma-hook/lib/libibverbs.so.1 ] && echo x 2>/dev/null >/run/oci-rdma-hook/lib/libibverbs.so.1 && echo "WRITABLE"
echo "memlock $(ulimit -l)"'

# the node: its devices, and this machine's rdma-core for mlx5 in its root
make_node dgx-h100.json "$WORK/node"
mkdir -p "$WORK/node/$MULTI/libibverbs" "$WORK/node/etc/libibverbs.d"
for l in libibverbs.so.1 libnl-3.so.200 libnl-route-3.so.200; do
	cp "$(readlink -f /$MULTI/$l)" "$WORK/node/$MULTI/$l"
done
cp "$(readlink -f /$MULTI/libibverbs/libmlx5-rdmav34.so)" "$WORK/node/$MULTI/libibverbs/libmlx5-rdmav34.so"
echo "driver mlx5" >"$WORK/node/etc/libibverbs.d/mlx5.driver"
write_conf "$WORK/supply.conf" "[containers]
image_check = warn
image_supply = yes"
write_conf "$WORK/plain.conf" "[containers]
image_check = warn"

# libs_given: the files of /run/oci-rdma-hook/lib the container listed, on one line
libs_given() { grep "^lib " <<<"$OUT" | tr '\n' ' '; }

# glibc_rootfs DIR: busybox with this machine's loader and libc, and the probe
glibc_rootfs() {
	make_rootfs "$1"
	mkdir -p "$1/lib64" "$1/$MULTI"
	cp "$(readlink -f /lib64/ld-linux-x86-64.so.2)" "$1/lib64/ld-linux-x86-64.so.2"
	cp "$(readlink -f /$MULTI/libc.so.6)" "$1/$MULTI/libc.so.6"
	cp "$DLPROBE" "$1/bin/dlprobe"
}

# 1. glibc, no libibverbs: the control, then supplied through the live hook
glibc_rootfs "$WORK/bare"
make_bundle "$WORK/b0" "$WORK/bare" "$WORK/node" "$WORK/plain.conf" "$INSIDE" "$ASK"
run_ctr "$WORK/b0"
check_ran "no libibverbs, image_supply not set"
check "no libibverbs, image_supply not set: NCCL's dlopen finds none" \
	grep -q "^libibverbs none" <<<"$OUT"
check "no libibverbs, image_supply not set: the warning stands" \
	grep -q "NCCL in this container will not use mlx5_0, .*: the image has no provider for mlx5" "$WORK/b0/hook.log"

make_bundle "$WORK/b1" "$WORK/bare" "$WORK/node" "$WORK/supply.conf" "$INSIDE" "$ASK"
run_ctr "$WORK/b1"
echo "$OUT"
sed 's/^/# hook: /' "$WORK/b1/hook.log"
check_ran "no libibverbs, supplied (runc)"
check "supplied (runc): NCCL's dlopen loads the node's libibverbs from /run/oci-rdma-hook/lib" \
	grep -qx "libibverbs /run/oci-rdma-hook/lib/libibverbs.so.1" <<<"$OUT"
check "supplied (runc): its ibv_get_device_list runs (with libnl, given too; this kernel has no RDMA)" \
	grep -Eqx "devices ([0-9]+|none: .*)" <<<"$OUT"
check "supplied (runc): libibverbs, libnl-3, libnl-route-3 and the mlx5 provider, no more" \
	[ "$(libs_given)" = "lib libibverbs.so.1 lib libmlx5-rdmav34.so lib libnl-3.so.200 lib libnl-route-3.so.200 " ]
check "supplied (runc): a driver file names the provider by its path" \
	grep -qx "file /etc/libibverbs.d/oci-rdma-hook-mlx5.driver: driver /run/oci-rdma-hook/lib/libmlx5" <<<"$OUT"
check "supplied (runc): the loader's entry" \
	grep -qx "file /etc/ld.so.conf.d/00-oci-rdma-hook.conf: /run/oci-rdma-hook/lib" <<<"$OUT"
check "supplied (runc): the libraries are read-only in the container" \
	out_lacks -x "WRITABLE"
check "supplied (runc): the hook says so, and no image warning" \
	bash -c 'grep -q "the node.s RDMA userspace given: 4 files at /run/oci-rdma-hook/lib, 1 driver file and the loader.s entry (6 mounted, 0 already); /etc/ld.so.cache rewritten" "$1" && ! grep -q "will not use" "$1"' _ "$WORK/b1/hook.log"
check "supplied (runc): the glibc loader reads the rewritten cache (ldconfig -p)" \
	bash -c 'ldconfig -p -C "$1" | grep -q "libibverbs.so.1 (libc6,x86-64) => /run/oci-rdma-hook/lib/libibverbs.so.1"' _ "$WORK/bare/etc/ld.so.cache"

# 2. the same image through the runtime shim: mounts in the spec, the cache by its stage
ln -sf "$HOOK" "$WORK/oci-rdma-runtime"
glibc_rootfs "$WORK/bare2"
ID="orh-e2e-$$-shim"
make_bundle "$WORK/b2" "$WORK/bare2" "$WORK/node" "$WORK/supply.conf" "$INSIDE" "c.pop('hooks'); $ASK"
RC=0
OUT=$(OCI_RDMA_HOOK_CONFIG="$WORK/supply.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
	"$WORK/oci-rdma-runtime" run --bundle "$WORK/b2" "$ID" 2>"$WORK/b2.err" </dev/null) || RC=$?
"$WORK/oci-rdma-runtime" delete -f "$ID" >/dev/null 2>&1 || true
ERR=$(cat "$WORK/b2.err")
check_ran "no libibverbs, supplied (the shim)"
check "supplied (the shim): its spec holds the read-only mounts" \
	python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
m = {x["destination"]: x for x in c["mounts"]}
for d in ["/run/oci-rdma-hook/lib/libibverbs.so.1", "/run/oci-rdma-hook/lib/libmlx5-rdmav34.so",
          "/etc/libibverbs.d/oci-rdma-hook-mlx5.driver", "/etc/ld.so.conf.d/00-oci-rdma-hook.conf"]:
    assert d in m and "ro" in m[d]["options"] and m[d]["type"] == "bind", (d, m.get(d))' "$WORK/b2/config.json"
check "supplied (the shim): NCCL's dlopen loads the node's libibverbs" \
	grep -qx "libibverbs /run/oci-rdma-hook/lib/libibverbs.so.1" <<<"$OUT"

# 3. libibverbs of the node's ABI, with libnl, and no mlx5 provider: the provider alone
glibc_rootfs "$WORK/verbs"
for l in libibverbs.so.1 libnl-3.so.200 libnl-route-3.so.200; do
	cp "$(readlink -f /$MULTI/$l)" "$WORK/verbs/$MULTI/$l"
done
SUM=$(md5sum <"$WORK/verbs/$MULTI/libibverbs.so.1")
make_bundle "$WORK/b3" "$WORK/verbs" "$WORK/node" "$WORK/supply.conf" "$INSIDE" "$ASK"
run_ctr "$WORK/b3"
check_ran "the image's libibverbs, no provider"
check "provider alone: NCCL's dlopen loads the image's own libibverbs" \
	grep -qx "libibverbs /$MULTI/libibverbs.so.1" <<<"$OUT"
check "provider alone: only the mlx5 provider is given" \
	[ "$(libs_given)" = "lib libmlx5-rdmav34.so " ]
check "provider alone: its driver file, and no loader entry" \
	bash -c 'grep -q "^file /etc/libibverbs.d/oci-rdma-hook-mlx5.driver" <<<"$1" && ! grep -q "00-oci-rdma-hook.conf" <<<"$1"' _ "$OUT"
check "provider alone: the image's ld.so.cache is not written" [ ! -e "$WORK/verbs/etc/ld.so.cache" ]
check "provider alone: the image's libibverbs is the same file" \
	[ "$(md5sum <"$WORK/verbs/$MULTI/libibverbs.so.1")" = "$SUM" ]

# 4. an image whose libibverbs is of another private ABI (25), with its development link
# libibverbs.so, which NCCL opens first: the node's whole stack, and the rewritten cache
# leads both names to it
glibc_rootfs "$WORK/old"
printf 'IBVERBS_1.1 { global: ibv_get_device_list; local: *; };\nIBVERBS_PRIVATE_25 { };\n' >"$WORK/old.map"
printf 'void *ibv_get_device_list(int *n) { (void)n; return 0; }\n' >"$WORK/old.c"
cc -shared -fPIC -o "$WORK/old/$MULTI/libibverbs.so.1.5.25.0" -Wl,-soname,libibverbs.so.1 \
	-Wl,--version-script="$WORK/old.map" "$WORK/old.c"
ln -s libibverbs.so.1.5.25.0 "$WORK/old/$MULTI/libibverbs.so.1"
ln -s libibverbs.so.1 "$WORK/old/$MULTI/libibverbs.so"
mkdir -p "$WORK/old/etc/libibverbs.d"
echo "driver mlx5" >"$WORK/old/etc/libibverbs.d/mlx5.driver"
make_bundle "$WORK/b5" "$WORK/old" "$WORK/node" "$WORK/plain.conf" "$INSIDE" "$ASK"
run_ctr "$WORK/b5"
check_ran "libibverbs of ABI 25 with its libibverbs.so, image_supply not set"
check "ABI 25, image_supply not set: NCCL's dlopen(\"libibverbs.so\") takes the image's own" \
	grep -qx "libibverbs /$MULTI/libibverbs.so" <<<"$OUT"
make_bundle "$WORK/b6" "$WORK/old" "$WORK/node" "$WORK/supply.conf" "$INSIDE" "$ASK"
run_ctr "$WORK/b6"
check_ran "libibverbs of ABI 25 with its libibverbs.so, supplied"
check "ABI 25, supplied: NCCL's dlopen(\"libibverbs.so\") loads the node's libibverbs" \
	grep -qx "libibverbs /run/oci-rdma-hook/lib/libibverbs.so.1" <<<"$OUT"
check "ABI 25, supplied: the whole stack given" \
	[ "$(libs_given)" = "lib libibverbs.so.1 lib libmlx5-rdmav34.so lib libnl-3.so.200 lib libnl-route-3.so.200 " ]

# 5. an image with its own mlx5 provider (Debian's layout): nothing given
make_rootfs "$WORK/deb"
python3 "$MKTREE" debian "$WORK/deb"
make_bundle "$WORK/b4" "$WORK/deb" "$WORK/node" "$WORK/supply.conf" \
	'ls /run/oci-rdma-hook/lib 2>/dev/null | sed "s/^/lib /"; ls /etc/libibverbs.d; echo "memlock $(ulimit -l)"' "$ASK"
run_ctr "$WORK/b4"
check_ran "an image with its own provider"
check "its own provider: nothing given (no /run/oci-rdma-hook/lib, no driver file of ours)" \
	bash -c '! grep -q "^lib \|oci-rdma-hook" <<<"$1" && grep -q "^mlx5.driver" <<<"$1"' _ "$OUT"
check "its own provider: the hook gave nothing" \
	bash -c 'grep -q "device nodes:" "$1" && ! grep -q "RDMA userspace given" "$1"' _ "$WORK/b4/hook.log"
finish
