#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The node's RDMA userspace (image_supply = yes; src/apply/supply.c) is made and written only
# on the container's own storage (docs/security.md, section 3): runc containers of an image
# of glibc without libibverbs, whose symlinks lead the supply's paths into a bind volume (a
# host directory, $VOL):
# - /etc/libibverbs.d -> /vol/ibd: no directory or driver file made in the volume;
# - /run -> /vol: no oci-rdma-hook/lib/ with empty mount points made in the volume;
# - /etc -> /vol/etc, the container of uid 1000: the volume's root-owned ld.so.cache is
#   not replaced;
# - /etc/libibverbs.d -> /vol/ibd with the volume rshared and rootfsPropagation shared: no
#   mount of ours in the host's mountinfo once the container is gone;
# each through the live hook, the first also through the runtime shim (its spec edit and
# its nccl-conf stage). Each time the container runs, the volume is left as it was, the
# hook's log and the record say why the supply is refused, naming the path and the mount,
# and nothing of the supply is left half-made in the container's root. A clean image gets
# the supply, as the control.
. "$(dirname "$0")/lib.sh"
need_root_runc
setup_work

MULTI=usr/lib/x86_64-linux-gnu
[ -e "/$MULTI/libibverbs.so.1" ] || cant_run "no libibverbs on this machine (/$MULTI)"
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
ASK="$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true'}"
AS1000='c["process"]["user"] = {"uid": 1000, "gid": 1000}'
INSIDE='echo started; ls /run/oci-rdma-hook/lib 2>/dev/null | sed "s/^/lib /"; echo "memlock $(ulimit -l)"'

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

# glibc_rootfs DIR: busybox with this machine's loader and libc, no libibverbs
glibc_rootfs() {
	rm -rf "$1"
	make_rootfs "$1"
	mkdir -p "$1/lib64" "$1/$MULTI"
	cp "$(readlink -f /lib64/ld-linux-x86-64.so.2)" "$1/lib64/ld-linux-x86-64.so.2"
	cp "$(readlink -f /$MULTI/libc.so.6)" "$1/$MULTI/libc.so.6"
}

# the volume: a host directory, and what it holds (names, kinds, modes, owners, inodes,
# contents)
VOL="$WORK/vol"
fresh_vol() {
	rm -rf "$VOL"
	mkdir -p "$VOL"
}
vol_state() {
	(cd "$VOL" && find . -printf '%p %y %m %U:%G %s %i\n' | sort &&
		find . -type f -exec sha256sum {} + | sort)
}
# volume DEST OPTION...: the spec edit that bind-mounts $VOL at DEST
volume() {
	local dest=$1
	shift
	printf 'c["mounts"].append({"destination": "%s", "type": "bind", "source": "%s", "options": %s})' \
		"$dest" "$VOL" "$(python3 -c 'import json, sys; print(json.dumps(["rbind"] + sys.argv[1:]))' "$@")"
}
# hook_log BUNDLE: what the hook logged for it
hook_log() { cat "$1/hook.log" 2>/dev/null || true; }
# the bundles of the live hook keep their state directory (no poststop hook), so that the
# record can be read once the container is gone; they are removed at the end
KEEP_STATE="c['hooks'].pop('poststop')"
RUN=/run/oci-rdma-hook
# record_refuses PATTERN [ID]: the record of container ID (the last run_ctr's) says the
# supply was not given, and why (its supply.why_not matches PATTERN, a Python regex)
record_refuses() {
	python3 - "$RUN/${2:-orh-e2e-$$-$CTR_N}/record.json" "$1" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        if isinstance(o.get("supply"), dict):
            return o["supply"]
        o = list(o.values())
    if isinstance(o, list):
        for v in o:
            f = find(v)
            if f:
                return f
s = find(r)
assert s and s["given"] is False, s
assert re.search(sys.argv[2], s["why_not"] or ""), s["why_not"]
EOF
}
# mounts_under DIR: the host's mounts under DIR
mounts_under() { awk -v p="$1/" 'index($5, p) == 1' /proc/self/mountinfo; }
# half_made ROOTFS: what of the supply is in the container's root: the directories and
# files it makes (mount points, the loader's entry)
half_made() {
	find "$1/run/oci-rdma-hook" "$1/etc/ld.so.conf.d" "$1/etc/ld.so.cache" \
		"$1"/etc/libibverbs.d/oci-rdma-hook-* 2>/dev/null || true
}

# 0. the control: a clean image gets the supply (the live hook)
glibc_rootfs "$WORK/r0"
make_bundle "$WORK/b0" "$WORK/r0" "$WORK/node" "$WORK/supply.conf" "$INSIDE" "$ASK"
run_ctr "$WORK/b0"
check_ran "clean image (control)"
check "clean image (control): the node's libibverbs is given" \
	grep -qx "lib libibverbs.so.1" <<<"$OUT"

# 1. /etc/libibverbs.d -> /vol/ibd, /vol a read-write bind volume
glibc_rootfs "$WORK/r1"
mkdir "$WORK/r1/vol"
ln -s /vol/ibd "$WORK/r1/etc/libibverbs.d"
fresh_vol; V0=$(vol_state)
make_bundle "$WORK/b1" "$WORK/r1" "$WORK/node" "$WORK/supply.conf" "$INSIDE" "$ASK; $KEEP_STATE; $(volume /vol rw)"
run_ctr "$WORK/b1"
L=$(hook_log "$WORK/b1")
check_ran "/etc/libibverbs.d -> volume (live hook)"
check "/etc/libibverbs.d -> volume (live hook): nothing made in the host's directory" \
	[ "$(vol_state)" = "$V0" ]
check "/etc/libibverbs.d -> volume (live hook): the refusal names the path and the mount" \
	grep -q "the node's RDMA userspace: '/etc/libibverbs.d' leads onto another mount than the container's root filesystem (mount [0-9]* at '/vol')" <<<"$L"
check "/etc/libibverbs.d -> volume (live hook): the record says it is not given, and why" \
	record_refuses "not given: '/etc/libibverbs.d' leads onto another mount .*'/vol'"
check "/etc/libibverbs.d -> volume (live hook): nothing of the supply in the container" \
	bash -c '[ -z "$1" ] && ! grep -q "^lib " <<<"$2"' _ "$(half_made "$WORK/r1")" "$OUT"

# 1b. the same through the runtime shim: its spec edit adds no mount, its stage refuses
ln -sf "$HOOK" "$WORK/oci-rdma-runtime"
glibc_rootfs "$WORK/r1s"
mkdir "$WORK/r1s/vol"
ln -s /vol/ibd "$WORK/r1s/etc/libibverbs.d"
fresh_vol; V0=$(vol_state)
ID="orh-e2e-$$-shim"
make_bundle "$WORK/b1s" "$WORK/r1s" "$WORK/node" "$WORK/supply.conf" "$INSIDE" \
	"c.pop('hooks'); $ASK; $(volume /vol rw)"
RC=0
OUT=$(OCI_RDMA_HOOK_CONFIG="$WORK/supply.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
	"$WORK/oci-rdma-runtime" run --bundle "$WORK/b1s" "$ID" 2>"$WORK/b1s.err" </dev/null) || RC=$?
ERR=$(cat "$WORK/b1s.err")
check_ran "/etc/libibverbs.d -> volume (the shim)"
# (the shim logs to syslog alone during create: the record of its nccl-conf stage says why)
check "/etc/libibverbs.d -> volume (the shim): the stage's record says it is not given, and why" \
	record_refuses "not given: '/etc/libibverbs.d' leads onto another mount .*'/vol'" "$ID"
"$WORK/oci-rdma-runtime" delete -f "$ID" >/dev/null 2>&1 || true
check "/etc/libibverbs.d -> volume (the shim): nothing made in the host's directory" \
	[ "$(vol_state)" = "$V0" ]
check "/etc/libibverbs.d -> volume (the shim): its spec holds no mount of the supply" \
	python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
assert not [m for m in c["mounts"] if "oci-rdma-hook" in m["destination"]], c["mounts"]' "$WORK/b1s/config.json"
check "/etc/libibverbs.d -> volume (the shim): nothing of the supply in the container" \
	bash -c '[ -z "$1" ] && ! grep -q "^lib " <<<"$2"' _ "$(half_made "$WORK/r1s")" "$OUT"

# 2. /run -> /vol: the mount points of the libraries would be made in the volume
glibc_rootfs "$WORK/r2"
ln -s /vol "$WORK/r2/run"
fresh_vol; V0=$(vol_state)
make_bundle "$WORK/b2" "$WORK/r2" "$WORK/node" "$WORK/supply.conf" "$INSIDE" "$ASK; $KEEP_STATE; $(volume /vol rw)"
run_ctr "$WORK/b2"
L=$(hook_log "$WORK/b2")
check_ran "/run -> volume"
check "/run -> volume: no oci-rdma-hook/lib/ made in the host's directory" \
	[ "$(vol_state)" = "$V0" ]
check "/run -> volume: the refusal names the path and the mount" \
	grep -q "the node's RDMA userspace: '/run/oci-rdma-hook/lib' leads onto another mount than the container's root filesystem (mount [0-9]* at '/vol')" <<<"$L"
check "/run -> volume: the record says it is not given, and why" \
	record_refuses "not given: '/run/oci-rdma-hook/lib' leads onto another mount .*'/vol'"
check "/run -> volume: nothing of the supply in the container" \
	bash -c '[ -z "$1" ] && ! grep -q "^lib " <<<"$2"' _ "$(half_made "$WORK/r2")" "$OUT"

# 3. /etc -> /vol/etc, the container of uid 1000: the volume's root-owned ld.so.cache
glibc_rootfs "$WORK/r3"
mv "$WORK/r3/etc" "$WORK/r3/etc.image"
mkdir "$WORK/r3/vol"
ln -s /vol/etc "$WORK/r3/etc"
fresh_vol; cp -a "$WORK/r3/etc.image" "$VOL/etc"
printf 'the volume owner'"'"'s cache\n' >"$VOL/etc/ld.so.cache"
chown 0:0 "$VOL/etc/ld.so.cache" "$VOL/etc"
chmod 644 "$VOL/etc/ld.so.cache"
V0=$(vol_state)
make_bundle "$WORK/b3" "$WORK/r3" "$WORK/node" "$WORK/supply.conf" "$INSIDE" \
	"$ASK; $AS1000; $KEEP_STATE; $(volume /vol rw)"
run_ctr "$WORK/b3"
L=$(hook_log "$WORK/b3")
check_ran "/etc -> volume, uid 1000"
check "/etc -> volume, uid 1000: the volume's ld.so.cache and /etc are left as they were" \
	[ "$(vol_state)" = "$V0" ]
check "/etc -> volume, uid 1000: the refusal names the path and the mount" \
	grep -q "the node's RDMA userspace: '/etc/libibverbs.d' leads onto another mount than the container's root filesystem (mount [0-9]* at '/vol')" <<<"$L"
check "/etc -> volume, uid 1000: the record says it is not given, and why" \
	record_refuses "not given: '/etc/libibverbs.d' leads onto another mount .*'/vol'"
check "/etc -> volume, uid 1000: nothing of the supply in the container" \
	bash -c '[ -z "$1" ] && ! grep -q "^lib " <<<"$2"' _ "$(half_made "$WORK/r3")" "$OUT"

# 4. /etc/libibverbs.d -> /vol/ibd, the volume rshared and rootfsPropagation shared, the
# host's directory a shared mount (as a volume of shared propagation is): a mount made in
# the container would reach the host's mount namespace, and stay there
glibc_rootfs "$WORK/r4"
mkdir "$WORK/r4/vol"
ln -s /vol/ibd "$WORK/r4/etc/libibverbs.d"
fresh_vol
mount --bind "$VOL" "$VOL"
mount --make-shared "$VOL"
V0=$(vol_state)
make_bundle "$WORK/b4" "$WORK/r4" "$WORK/node" "$WORK/supply.conf" "$INSIDE" \
	"$ASK; $KEEP_STATE; $(volume /vol rw rshared); c['linux']['rootfsPropagation'] = 'shared'"
run_ctr "$WORK/b4"
L=$(hook_log "$WORK/b4")
LEFT="$(mounts_under "$VOL")$(mounts_under "$WORK/r4")"
check_ran "shared volume and root"
check "shared volume and root: no mount of the container's left in the host's mountinfo" \
	[ -z "$LEFT" ]
check "shared volume and root: nothing made in the host's directory" \
	[ "$(vol_state)" = "$V0" ]
check "shared volume and root: the refusal names the path and the mount" \
	grep -q "the node's RDMA userspace: '/etc/libibverbs.d' leads onto another mount than the container's root filesystem (mount [0-9]* at '/vol')" <<<"$L"
check "shared volume and root: the record says it is not given, and why" \
	record_refuses "not given: '/etc/libibverbs.d' leads onto another mount .*'/vol'"
check "shared volume and root: nothing of the supply in the container" \
	bash -c '[ -z "$1" ] && ! grep -q "^lib " <<<"$2"' _ "$(half_made "$WORK/r4")" "$OUT"
# the leftovers of a failure here must not outlive the test
for m in $(mounts_under "$VOL" | awk '{print $5}' | sort -r) $(mounts_under "$WORK/r4" | awk '{print $5}' | sort -r); do
	umount -l "$m" 2>/dev/null || true
done
umount -l "$VOL" 2>/dev/null || true
rm -rf "$RUN"/orh-e2e-$$-*
finish
