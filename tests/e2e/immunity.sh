#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The hook binary is immune to the dynamic loader's environment (LD_PRELOAD,
# LD_LIBRARY_PATH): it is linked statically (meson option `static`, default true), so
# no loader runs before main() and nothing is loaded later.
#
# A marker library whose constructor records which program loaded it is offered to the
# hook (a) in the hook's own environment, (b) in the container's config.json
# process.env, (c) in runc's environment, which a hook entry without `env` inherits. Fake
# libjansson/libcap/libinih/libseccomp/libc in an LD_LIBRARY_PATH directory carry the
# same constructor. No marker of oci-rdma-hook may ever appear, no file under those
# directories may be opened by it (strace), and the hook must still do its work.
# Control runs prove the marker works: a dynamic program does load it.
. "$(dirname "$0")/lib.sh"

need_root_runc
command -v cc >/dev/null 2>&1 || cant_run "no C compiler (cc)"
command -v readelf >/dev/null 2>&1 || cant_run "readelf (binutils) not installed"
command -v strace >/dev/null 2>&1 || cant_run "strace not installed"
setup_work

# Was this build configured static (the default)? A sanitizer build (-Dstatic=false)
# is dynamic on purpose: the loader checks are then not applicable.
BUILDDIR=$(cd "$(dirname "$HOOK")/.." && pwd)
STATIC_OPT=$(python3 - "$BUILDDIR/meson-info/intro-buildoptions.json" <<'EOF' 2>/dev/null || echo unknown
import json, sys
for o in json.load(open(sys.argv[1])):
    if o["name"] == "static":
        print("true" if o["value"] else "false")
EOF
)
interp() { readelf -lW "$1" 2>/dev/null | grep -q 'Requesting program interpreter\|INTERP'; }

if [ "$STATIC_OPT" = false ]; then
	echo "# build configured with -Dstatic=false (sanitizer build): loader checks not applicable"
	check "a -Dstatic=false build has a program interpreter (as configured)" interp "$HOOK"
	finish
	exit $?
fi

# ---- the binary has no program interpreter: the dynamic loader never runs ----------
# (of an ELF file readelf reads: it shows a file that is not one nothing either)
check "oci-rdma-hook has no PT_INTERP (readelf -l shows no INTERP)" \
	bash -c 'readelf -hW "$1" >/dev/null && ! readelf -lW "$1" | grep -q INTERP' _ "$HOOK"
check "oci-rdma-hook has no dynamic section (no DT_NEEDED)" \
	bash -c 'readelf -hW "$1" >/dev/null && ! readelf -dW "$1" | grep -q NEEDED' _ "$HOOK"
check "file(1) calls it statically linked" bash -c 'file -L "$1" | grep -q "statically linked"' _ "$HOOK"

# ---- the marker library and the fake libraries ----------------------------------------
MARKS="$WORK/marks"
mkdir -p "$MARKS" "$WORK/lib" "$WORK/fakelib" "$WORK/ctl"
cat >"$WORK/mark.c" <<EOF
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void orh_test_mark(void)
{
	char exe[PATH_MAX] = "", path[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *base;
	int fd;

	if (n > 0)
		exe[n] = '\0';
	base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	snprintf(path, sizeof(path), "%s/%s.%s.%d", "$MARKS", TAG, base, (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
}
/* a few names of the libraries a dynamic hook would need */
int json_object(void) { return 0; }
EOF
cc -shared -fPIC -DTAG='"preload"' -o "$WORK/lib/libmark.so" "$WORK/mark.c"
# LD_LIBRARY_PATH fakes: the names a dynamic oci-rdma-hook would look up
for so in libjansson.so.4 libcap.so.2 libinih.so.0 libibverbs.so.1 libnl-3.so.200; do
	cc -shared -fPIC -DTAG='"libpath"' -Wl,-soname,$so -o "$WORK/fakelib/$so" "$WORK/mark.c"
done
# libc and libseccomp fakes only for the direct run: runc itself links them
mkdir -p "$WORK/fakelib-all"
cp "$WORK/fakelib/"* "$WORK/fakelib-all/"
for so in libc.so.6 libseccomp.so.2; do
	cc -shared -fPIC -DTAG='"libpath"' -Wl,-soname,$so -o "$WORK/fakelib-all/$so" "$WORK/mark.c"
done

marks_of() { ls "$MARKS" | grep -F ".$1." || true; }
clear_marks() { rm -f "$MARKS"/*; }

# control: a dynamic program does load them (the marker mechanism works)
printf 'int json_object(void);\nint main(void) { return json_object(); }\n' >"$WORK/ctl/ctl.c"
cc -o "$WORK/ctl/ctl-dyn" "$WORK/ctl/ctl.c" -L"$WORK/fakelib" -l:libjansson.so.4 -Wl,-z,lazy
clear_marks
LD_PRELOAD="$WORK/lib/libmark.so" "$WORK/ctl/ctl-dyn" || true
LD_LIBRARY_PATH="$WORK/fakelib" "$WORK/ctl/ctl-dyn" || true
check "control: a dynamic program loads the LD_PRELOAD marker" [ -n "$(marks_of ctl-dyn | grep '^preload\.')" ]
check "control: a dynamic program loads a library from LD_LIBRARY_PATH" [ -n "$(marks_of ctl-dyn | grep '^libpath\.')" ]

make_rootfs "$WORK/base"
make_node seed001-roce.json "$WORK/node"
write_conf "$WORK/hook.conf" "[containers]
activation = always"
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
"$HOOK" --sysroot "$WORK/node" --config "$WORK/hook.conf" env >"$WORK/plan.env"

# direct_hook BUNDLE ENV...: the createRuntime hook on BUNDLE, for a stand-in container
# (fake_ctr), with ENV... added to a clean environment; under strace (opens and execs in
# $WORK/strace).
direct_hook() {
	local b=$1 e opts=()
	shift
	for e in "$@"; do opts+=(-E "$e"); done
	fake_ctr "$(bundle_rootfs "$b")"
	HRC=0
	printf '{"ociVersion":"1.0.2","id":"orh-imm-%s-%s","status":"creating","pid":%s,"bundle":"%s"}' \
		"$$" "$(basename "$b")" "$SLEEPER" "$b" |
		env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			strace "${opts[@]}" -f -qq -o "$WORK/strace" -e trace=open,openat,openat2,execve,uselib \
			"$HOOK" --sysroot "$WORK/node" --config "$WORK/hook.conf" createRuntime \
			2>"$b/direct.log" || HRC=$?
	stop_fake_ctr
}
plan_in() { # ROOTFS: its nccl.conf holds every plan line
	local l
	while IFS= read -r l; do grep -qxF "$l" "$1/etc/nccl.conf" || return 1; done <"$WORK/plan.env"
}
# (in the trace of a run: it holds the hook's execve)
no_lib_opened() {
	grep -q ' execve(' "$WORK/strace" &&
		! grep -E "$WORK/(lib|fakelib)" "$WORK/strace" | grep -v '^[0-9]* execve' | grep -q .
}
# hook_ran BUNDLE: the direct hook on BUNDLE exited 0 and logged its summary line (which
# names the container): what it did not load or print is then worth looking at
hook_ran() { [ "$HRC" = 0 ] && grep -q "container orh-imm-$$-$(basename "$1")" "$1/direct.log"; }
# no_marks_of PROGRAM: no marker file of PROGRAM
no_marks_of() { [ -z "$(marks_of "$1")" ]; }
# ctr_worked: the container's output ($OUT) shows the hook's work
ctr_worked() { grep -qx uverbs1 <<<"$OUT" && grep -q "^NCCL_IB_HCA=" <<<"$OUT"; }
# after CONDITION-FUNCTION [ARG] -- COMMAND...: both succeed
after() {
	local cond=("$1")
	shift
	while [ "$1" != -- ]; do cond+=("$1"); shift; done
	shift
	"${cond[@]}" && "$@"
}

# ---- (a) in the hook's own environment -----------------------------------------------
cp -a "$WORK/base" "$WORK/ra"
make_bundle "$WORK/ba" "$WORK/ra" "$WORK/node" "$WORK/hook.conf" true "$HOSTNET"
clear_marks
direct_hook "$WORK/ba" LD_PRELOAD="$WORK/lib/libmark.so" LD_LIBRARY_PATH="$WORK/fakelib-all" \
	LD_AUDIT="$WORK/lib/libmark.so" GCONV_PATH="$WORK/fakelib-all" LD_DEBUG=all
check "(a) LD_* in the hook's environment: the hook succeeds" [ "$HRC" = 0 ]
check "(a) the hook still works: nccl.conf has the plan" plan_in "$WORK/ra"
check "(a) the hook still works: uverbs1 created" [ -c "$WORK/ra/dev/infiniband/uverbs1" ]
check "(a) no marker from oci-rdma-hook" after hook_ran "$WORK/ba" -- no_marks_of oci-rdma-hook
check "(a) the hook opened nothing in the LD_PRELOAD/LD_LIBRARY_PATH directories" \
	after hook_ran "$WORK/ba" -- no_lib_opened
check "(a) the hook executed nothing" [ "$(grep -c ' execve(' "$WORK/strace")" = 1 ]
check "(a) LD_DEBUG printed nothing (no loader ran)" \
	after hook_ran "$WORK/ba" -- bash -c '! grep -qi "calling init\|symbol=\|file=" "$1"' _ "$WORK/ba/direct.log"

# the same for the runtime shim's config.json edit (its runtime: /bin/true)
write_conf "$WORK/shim.conf" "[containers]
activation = always
runtime = /bin/true"
make_bundle "$WORK/bs" "$WORK/ra" "$WORK/node" "$WORK/shim.conf" true "$HOSTNET"
ln -sf "$HOOK" "$WORK/oci-rdma-runtime"
clear_marks
SRC=0
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LD_PRELOAD="$WORK/lib/libmark.so" \
	LD_LIBRARY_PATH="$WORK/fakelib" OCI_RDMA_HOOK_CONFIG="$WORK/shim.conf" \
	OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
	"$WORK/oci-rdma-runtime" create --bundle "$WORK/bs" true >/dev/null 2>"$WORK/shim.err" || SRC=$?
check "(a) shim with LD_* in its environment: edits config.json and execs the runtime" \
	bash -c '[ "$1" = 0 ] && grep -q "\"RLIMIT_MEMLOCK\"" "$2/config.json"' _ "$SRC" "$WORK/bs"
shim_edited() { [ "$SRC" = 0 ] && grep -q '"RLIMIT_MEMLOCK"' "$WORK/bs/config.json"; }
check "(a) no marker from the shim (oci-rdma-hook)" after shim_edited -- no_marks_of oci-rdma-hook
# the shim hands its own environment (the caller's: containerd, docker) to the runtime
check "(a) control: the runtime the shim executed (dynamic /bin/true) loaded the marker" \
	[ -n "$(marks_of true)" ]

# ---- (b) in the container's config.json process.env ----------------------------------
cp -a "$WORK/base" "$WORK/rb"
INSIDE='ls /dev/infiniband; cat /etc/nccl.conf'
make_bundle "$WORK/bb" "$WORK/rb" "$WORK/node" "$WORK/hook.conf" "$INSIDE" \
	"$HOSTNET; c['process']['env'] += ['LD_PRELOAD=$WORK/lib/libmark.so', 'LD_LIBRARY_PATH=$WORK/fakelib-all', 'LD_AUDIT=$WORK/lib/libmark.so']"
clear_marks
run_ctr "$WORK/bb"
check "(b) LD_* in process.env: the container starts" [ "$RC" = 0 ]
check "(b) the hook still works: devices and nccl.conf inside" \
	bash -c 'grep -qx uverbs1 <<<"$1" && grep -q "^NCCL_IB_HCA=" <<<"$1"' _ "$OUT"
check "(b) no marker from oci-rdma-hook" after ctr_worked -- no_marks_of oci-rdma-hook
check "(b) no marker from any process on the host" after ctr_worked -- [ -z "$(ls "$MARKS")" ]
# the same spec through the direct hook under strace
clear_marks
direct_hook "$WORK/bb"
check "(b) direct: nothing opened in the directories process.env names" \
	after hook_ran "$WORK/bb" -- no_lib_opened
check "(b) direct: no marker" after hook_ran "$WORK/bb" -- [ -z "$(ls "$MARKS")" ]

# ---- (c) in runc's environment, inherited by a hook entry without `env` ---------------
cp -a "$WORK/base" "$WORK/rc"
make_bundle "$WORK/bc" "$WORK/rc" "$WORK/node" "$WORK/hook.conf" "$INSIDE" \
	"$HOSTNET; [h[0].pop('env', None) for h in c['hooks'].values()]; [h[0].__setitem__('path', '$HOOK') for h in c['hooks'].values()]"
check "(c) the hook entries have no env and run the binary itself" python3 - "$WORK/bc/config.json" "$HOOK" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
sys.exit(0 if all("env" not in h[0] and h[0]["path"] == sys.argv[2] for h in c["hooks"].values()) else 1)
EOF
clear_marks
RC=0
OUT=$(LD_PRELOAD="$WORK/lib/libmark.so" LD_LIBRARY_PATH="$WORK/fakelib" \
	runc run --bundle "$WORK/bc" "orh-e2e-$$-c" 2>"$WORK/runc-c.err" </dev/null) || RC=$?
runc delete -f "orh-e2e-$$-c" >/dev/null 2>&1 || true
check "(c) LD_* in runc's environment: the container starts" [ "$RC" = 0 ]
check "(c) the hook still works: devices and nccl.conf inside" \
	bash -c 'grep -qx uverbs1 <<<"$1" && grep -q "^NCCL_IB_HCA=" <<<"$1"' _ "$OUT"
check "(c) control: runc itself (dynamic) did load the marker" [ -n "$(marks_of runc)" ]
check "(c) no marker from oci-rdma-hook" after ctr_worked -- no_marks_of oci-rdma-hook

finish
