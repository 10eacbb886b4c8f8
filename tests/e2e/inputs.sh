#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# What a container supplies cannot choose a path, a program or a setting the hook writes,
# and every input is bounded: over a limit is a clear error, never a crash or a hang.
#   - annotations: oci-rdma-hook/preset=../../x, a 1 MiB annotation (ours and another);
#   - process.env values with a newline, a CR or '=' never reach /etc/nccl.conf or
#     become entries of their own in the edited config.json;
#   - a container id that is a path never names a directory on the host;
#   - the OCI state (> 1 MiB, never-ending stdin, stdin left open), config.json
#     (> 16 MiB), the node config (> 256 KiB) over their limits;
#   - node config lines longer than libinih's 200-byte buffer: a comment ending in
#     "NCCL_NET_PLUGIN = /opt/evil.so" stays a comment, a line over 4093 bytes is an error
#     naming file and line (containers started by runc), a 1023-byte value is read whole.
#   - a device number sysfs names that is not an RDMA one (uverbs2/dev reading 1:11,
#     /dev/kmsg's) gives the container neither that node nor a grant for it (runc);
#   - a spec that lists /dev/infiniband/uverbs1 with other numbers is named in the log,
#     and the container gets the node's numbers (runc).
# The live hook is called directly (OCI state for a stand-in container, fake_ctr, as in
# security.sh);
# the runtime shim runs with /bin/true as its runtime; precreate reads stdin.
. "$(dirname "$0")/lib.sh"

need_root_runc
setup_work

make_rootfs "$WORK/base"
make_node seed001-roce.json "$WORK/node"
write_conf "$WORK/always.conf" "[containers]
activation = always"
write_conf "$WORK/failmode.conf" "[containers]
activation = annotation
on_error = fail
image_check = warn"
write_conf "$WORK/shim.conf" "[containers]
activation = always
runtime = /bin/true"
HOSTNET='c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]'
"$HOOK" --sysroot "$WORK/node" --config "$WORK/always.conf" env >"$WORK/plan.env"
ln -sf "$HOOK" "$WORK/oci-rdma-runtime"

state_of() { # BUNDLE [ID]: an OCI state for the stand-in container
	printf '{"ociVersion":"1.0.2","id":"%s","status":"creating","pid":%s,"bundle":"%s"}' \
		"${2:-orh-in-$$-$(basename "$1")}" "$SLEEPER" "$1"
}
# hook_direct BUNDLE CONF [ID]: createRuntime on BUNDLE; HRC, HLOG, HSECS, and
# BUNDLE/direct.mountinfo, the mounts of the stand-in container when the hook was done
hook_direct() {
	local b=$1 conf=$2 id=${3:-} t0
	fake_ctr "$(bundle_rootfs "$b")"
	HRC=0
	t0=$(date +%s)
	state_of "$b" "$id" | timeout 60 "$HOOK" --sysroot "$WORK/node" --config "$conf" \
		createRuntime 2>"$b/direct.log" || HRC=$?
	HSECS=$(($(date +%s) - t0))
	HLOG=$(cat "$b/direct.log")
	cat "/proc/$SLEEPER/mountinfo" >"$b/direct.mountinfo"
	stop_fake_ctr
}
fresh() { rm -rf "$WORK/$1"; cp -a "$WORK/base" "$WORK/$1"; }
untouched() { # ROOTFS: the hook did nothing there
	[ ! -e "$1/etc/nccl.conf" ] && [ ! -e "$1/dev/infiniband" ]
}
# only NAME=VALUE lines of the plan, or comment lines without '=', in ROOTFS's nccl.conf
conf_is_plan_only() {
	local l
	while IFS= read -r l; do
		case $l in
		\#*) [[ $l != *=* ]] || return 1 ;;
		*) grep -qxF -- "$l" "$WORK/plan.env" || return 1 ;;
		esac
	done <"$1/etc/nccl.conf"
	[ "$(grep -vc '^#' "$1/etc/nccl.conf")" = "$(wc -l <"$WORK/plan.env")" ]
}
# said PATTERN TEXT COMMAND...: TEXT (what a run of the hook wrote on stderr) holds PATTERN,
# and COMMAND succeeds. What a run left unchanged proves something only of a run that
# happened: each "nothing done" is checked beside the reason that run gave.
said() {
	local pat=$1 text=$2
	shift 2
	grep -q -- "$pat" <<<"$text" && "$@"
}
host_listing() {
	(cd "$WORK" && find . -path ./direct -prune -o -print |
		grep -v -e '/direct.log$' -e '/direct.mountinfo$' | sort)
}

# ---- 1. oci-rdma-hook/preset=../../x -----------------------------------------------
fresh r1
make_bundle "$WORK/b1" "$WORK/r1" "$WORK/node" "$WORK/always.conf" true \
	"$HOSTNET; c['annotations'] = {'oci-rdma-hook/preset': '../../x'}"
before=$(host_listing)
hook_direct "$WORK/b1" "$WORK/always.conf"
check "preset=../../x: on_error=warn exits 0" [ "$HRC" = 0 ]
check "preset=../../x: refused as an unknown preset, naming the annotation" \
	grep -q "annotation 'oci-rdma-hook/preset': unknown preset '../../x'" <<<"$HLOG"
check "preset=../../x: the container is left unchanged" \
	said "unknown preset '../../x'" "$HLOG" untouched "$WORK/r1"
check "preset=../../x: no file appeared anywhere under the work dir" \
	said "unknown preset '../../x'" "$HLOG" [ "$(host_listing)" = "$before" ]
make_bundle "$WORK/b1f" "$WORK/r1" "$WORK/node" "$WORK/failmode.conf" true \
	"$HOSTNET; c['annotations'] = {'oci-rdma-hook/enable': 'true', 'oci-rdma-hook/preset': '/usr/lib/x.so'}"
hook_direct "$WORK/b1f" "$WORK/failmode.conf"
check "preset=/usr/lib/x.so with on_error=fail and enable=true: exit 1" [ "$HRC" = 1 ]
check "preset=/usr/lib/x.so: the error names the annotation" grep -q "unknown preset '/usr/lib/x.so'" <<<"$HLOG"
check "preset=/usr/lib/x.so: the container is left unchanged" \
	said "unknown preset '/usr/lib/x.so'" "$HLOG" untouched "$WORK/r1"

# ---- 2. 1 MiB annotations ----------------------------------------------------------
fresh r2
make_bundle "$WORK/b2" "$WORK/r2" "$WORK/node" "$WORK/always.conf" true \
	"$HOSTNET; c['annotations'] = {'oci-rdma-hook/preset': 'roce' * 262144}"
hook_direct "$WORK/b2" "$WORK/always.conf"
check "1 MiB oci-rdma-hook/preset: exit 0 within 10 s" [ "$HRC" = 0 -a "$HSECS" -le 10 ]
check "1 MiB oci-rdma-hook/preset: refused as not acceptable" \
	grep -q "annotation 'oci-rdma-hook/preset': value is not acceptable" <<<"$HLOG"
check "1 MiB oci-rdma-hook/preset: not echoed into the log (log < 4 KiB)" \
	said "value is not acceptable" "$HLOG" [ "${#HLOG}" -lt 4096 ]
check "1 MiB oci-rdma-hook/preset: the container is left unchanged" \
	said "value is not acceptable" "$HLOG" untouched "$WORK/r2"
fresh r2b
make_bundle "$WORK/b2b" "$WORK/r2b" "$WORK/node" "$WORK/always.conf" true \
	"$HOSTNET; c['annotations'] = {'org.example/blob': 'A' * (1 << 20), 'oci-rdma-hook/enable': 'true'}"
hook_direct "$WORK/b2b" "$WORK/always.conf"
check "1 MiB unrelated annotation: ignored, the hook does its work" \
	bash -c '[ "$1" = 0 ] && grep -q "^NCCL_IB_HCA=" "$2/etc/nccl.conf"' _ "$HRC" "$WORK/r2b"

# ---- 3. process.env values with newline, CR, '=' never reach nccl.conf ---------------
EVIL="c['process']['env'] += ['NCCL_IB_HCA=mlx5_1\\nNCCL_NET_PLUGIN=/tmp/evil.so', 'NCCL_SOCKET_IFNAME=a=b\\nLD_PRELOAD=/x', 'NCCL_IB_GID_INDEX=3\\r', 'NCCL_DEBUG=INFO\\n# oci-rdma-hook end\\nNCCL_NET=IB']"
fresh r3
make_bundle "$WORK/b3" "$WORK/r3" "$WORK/node" "$WORK/always.conf" true "$HOSTNET; $EVIL"
hook_direct "$WORK/b3" "$WORK/always.conf"
check "hostile process.env: the hook succeeds" [ "$HRC" = 0 ]
check "hostile process.env: nccl.conf holds exactly the plan lines and '='-free comments" \
	conf_is_plan_only "$WORK/r3"
check "hostile process.env: no NCCL_NET_PLUGIN/LD_PRELOAD/NCCL_NET line in nccl.conf (which holds the plan)" \
	bash -c 'grep -q "^NCCL_IB_HCA=" "$1/etc/nccl.conf" &&
		! grep -Eq "^(NCCL_NET_PLUGIN|LD_PRELOAD|NCCL_NET)=" "$1/etc/nccl.conf"' _ "$WORK/r3"
# the shim: the user's entries are kept byte for byte; only whole plan entries are added
cp "$WORK/b3/config.json" "$WORK/b3/config.orig"
SRC=0
OCI_RDMA_HOOK_CONFIG="$WORK/shim.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
	"$WORK/oci-rdma-runtime" create --bundle "$WORK/b3" x >/dev/null 2>&1 || SRC=$?
check "hostile process.env, shim: runs" [ "$SRC" = 0 ]
check "hostile process.env, shim: the user's entries unchanged, none added; one hook of ours writes nccl.conf" \
	python3 - "$WORK/b3/config.orig" "$WORK/b3/config.json" <<'EOF'
import json, sys
old = json.load(open(sys.argv[1]))
new = json.load(open(sys.argv[2]))
assert new["process"]["env"] == old["process"]["env"], "process.env changed"
# the bundle registers the live hook itself: the edit adds no nccl-conf beside it
hooks = [h["args"][-1] for h in new.get("hooks", {}).get("createRuntime", [])]
assert hooks.count("createRuntime") + hooks.count("nccl-conf") == 1, hooks
# and the shim did edit it: the plan's device nodes are there
assert "/dev/infiniband/uverbs1" in [d.get("path") for d in new["linux"].get("devices", [])], \
    "the shim did not edit config.json"
EOF
# '=' in a value the operator set is written as NCCL reads it (split at the first '=')
write_conf "$WORK/eq.conf" "[containers]
activation = always
[env]
NCCL_TEST_EQ = a=b=c"
fresh r3b
make_bundle "$WORK/b3b" "$WORK/r3b" "$WORK/node" "$WORK/eq.conf" true "$HOSTNET"
hook_direct "$WORK/b3b" "$WORK/eq.conf"
check "config value with '=': one line NCCL_TEST_EQ=a=b=c" \
	[ "$(grep -c '^NCCL_TEST_EQ=' "$WORK/r3b/etc/nccl.conf")" = 1 -a \
	  "$(grep '^NCCL_TEST_EQ=' "$WORK/r3b/etc/nccl.conf")" = "NCCL_TEST_EQ=a=b=c" ]

# ---- 4. a container id that is a path names no host directory ----------------------
fresh r4
printf 'NCCL_DEBUG=WARN\n' >"$WORK/r4/etc/nccl.conf"
make_bundle "$WORK/b4" "$WORK/r4" "$WORK/node" "$WORK/always.conf" true \
	"$HOSTNET; c['root']['readonly'] = True"
mkdir -p "$WORK/cwd"
for id in "../../../..$WORK/escape" "a/../../b" ".." "$(printf 'x%.0s' $(seq 300))"; do
	(cd "$WORK/cwd" && hook_direct "$WORK/b4" "$WORK/always.conf" "$id"
	 printf '%s\n%s\n' "$HRC" "$HLOG" >"$WORK/b4/res")
	HRC=$(head -1 "$WORK/b4/res")
	check "id '${id:0:40}': exit 0" [ "$HRC" = 0 ]
	check "id '${id:0:40}': no directory named after it under /run/oci-rdma-hook or $WORK" \
		said "no state directory (the container id cannot name one)" "$(cat "$WORK/b4/direct.log")" \
		bash -c '[ ! -e "$1/escape" ] && [ -z "$(ls -A "$1/cwd")" ] && ! ls -A /run/oci-rdma-hook 2>/dev/null | grep -qxF -- "$(basename "$2")"' \
		_ "$WORK" "$id"
	# (in the mount table of the stand-in container: its rootfs is mounted there)
	check "id '${id:0:40}': nothing was mounted over the image file" \
		bash -c 'grep -q " $1 " "$2/direct.mountinfo" && ! grep -q " $1/etc/nccl.conf " "$2/direct.mountinfo"' \
		_ "$WORK/r4" "$WORK/b4"
	check "id '${id:0:40}': the refusal is logged" grep -q "read-only rootfs and no state directory (the container id cannot name one)" "$WORK/b4/direct.log"
done
check "the image's nccl.conf on the read-only rootfs is untouched" \
	said "no state directory (the container id cannot name one)" "$(cat "$WORK/b4/direct.log")" \
	[ "$(cat "$WORK/r4/etc/nccl.conf")" = NCCL_DEBUG=WARN ]

# ---- 5. OCI state over 1 MiB, and a stdin that never ends -------------------------------
fresh r5
make_bundle "$WORK/b5" "$WORK/r5" "$WORK/node" "$WORK/always.conf" true "$HOSTNET"
fake_ctr "$WORK/r5"
python3 -c 'import json,sys; print(json.dumps({"ociVersion":"1.0.2","id":"orh-in-big","status":"creating","pid":int(sys.argv[1]),"bundle":sys.argv[2],"annotations":{"x":"A"*(1<<20)}}))' \
	"$SLEEPER" "$WORK/b5" >"$WORK/bigstate.json"
HRC=0
timeout 30 "$HOOK" --sysroot "$WORK/node" --config "$WORK/always.conf" createRuntime \
	<"$WORK/bigstate.json" 2>"$WORK/b5/big.log" || HRC=$?
stop_fake_ctr
check "state of $(stat -c %s "$WORK/bigstate.json") bytes (> 1 MiB): exit 0" [ "$HRC" = 0 ]
check "state > 1 MiB: a clear error" grep -q "reading the OCI state from stdin: File too large; nothing done" "$WORK/b5/big.log"
check "state > 1 MiB: nothing done" said "File too large; nothing done" "$(cat "$WORK/b5/big.log")" \
	untouched "$WORK/r5"
for src in "yes" "cat /dev/zero" "cat /dev/urandom"; do
	HRC=0
	t0=$(date +%s)
	# the hook stops reading at the limit; the writer then gets SIGPIPE
	$src 2>/dev/null | timeout 30 "$HOOK" --sysroot "$WORK/node" --config "$WORK/always.conf" \
		createRuntime 2>"$WORK/b5/inf.log" || HRC=$?
	secs=$(($(date +%s) - t0))
	check "never-ending stdin ($src): the hook stops in ${secs}s with exit 0 (not killed by timeout)" \
		[ "$HRC" = 0 -a "$secs" -le 10 ]
	check "never-ending stdin ($src): a clear error" \
		grep -q "reading the OCI state from stdin: File too large" "$WORK/b5/inf.log"
done
# stdin left open: silent, silent after part of a state, or a byte a second (which no
# wait for the next byte would end): the state read has its own bound of 5 s
partial=$(state_of "$WORK/b5" | head -c 40)
for how in silent partial drip; do
	HRC=0
	t0=$(date +%s%N)
	case $how in
	silent) exec 3< <(sleep 120) ;;
	partial) exec 3< <(printf '%s' "$partial"; sleep 120) ;;
	drip) exec 3< <(while :; do printf ' '; sleep 1; done) ;;
	esac
	writer=$!
	timeout 30 "$HOOK" --sysroot "$WORK/node" --config "$WORK/always.conf" createRuntime \
		<&3 2>"$WORK/b5/open.log" || HRC=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	exec 3<&-
	kill "$writer" 2>/dev/null || true
	echo "# stdin left open ($how): the hook ended after $ms ms"
	check "stdin left open ($how): the hook ends by itself within 5-7 s (${ms} ms), exit 0" \
		[ "$HRC" = 0 -a "$ms" -ge 4900 -a "$ms" -le 7000 ]
	check "stdin left open ($how): the error names the state read and its bound" \
		grep -q "createRuntime: reading the OCI state from stdin: stdin still open after 5 seconds" \
		"$WORK/b5/open.log"
	check "stdin left open ($how): nothing done" \
		said "stdin still open after 5 seconds" "$(cat "$WORK/b5/open.log")" untouched "$WORK/r5"
done
HRC=0
yes 2>/dev/null | timeout 60 "$HOOK" --config "$WORK/always.conf" precreate >"$WORK/pre.out" 2>"$WORK/pre.log" || HRC=$?
check "never-ending stdin (precreate): exit 1 (podman gets no config), not a timeout" [ "$HRC" = 1 ]
check "never-ending stdin (precreate): a clear error" grep -q "precreate: reading config.json from stdin: File too large" "$WORK/pre.log"
check "never-ending stdin (precreate): nothing written to stdout" \
	said "File too large" "$(cat "$WORK/pre.log")" [ ! -s "$WORK/pre.out" ]

# ---- 6. config.json over 16 MiB ---------------------------------------------------------
fresh r6
make_bundle "$WORK/b6" "$WORK/r6" "$WORK/node" "$WORK/always.conf" true \
	"$HOSTNET; c['annotations'] = {'org.example/blob': 'A' * (16 << 20)}"
size6=$(stat -c %s "$WORK/b6/config.json")
hook_direct "$WORK/b6" "$WORK/always.conf"
check "config.json of $size6 bytes (> 16 MiB), hook: exit 0" [ "$HRC" = 0 ]
check "config.json > 16 MiB, hook: a clear error naming the file" \
	grep -q "$WORK/b6/config.json': $size6 bytes, more than the limit of 16777216" <<<"$HLOG"
check "config.json > 16 MiB, hook: nothing done" \
	said "more than the limit of 16777216" "$HLOG" untouched "$WORK/r6"
sum6=$(sha256sum <"$WORK/b6/config.json")
SRC=0
OCI_RDMA_HOOK_CONFIG="$WORK/shim.conf" OCI_RDMA_HOOK_SYSROOT="$WORK/node" \
	"$WORK/oci-rdma-runtime" create --bundle "$WORK/b6" x >/dev/null 2>&1 || SRC=$?
check "config.json > 16 MiB, shim: the runtime is executed (exit 0)" [ "$SRC" = 0 ]
# (the shim says why on syslog only during create: that it went on to the runtime shows it ran)
check "config.json > 16 MiB, shim: config.json byte for byte unchanged" \
	bash -c '[ "$1" = 0 ] && [ "$(sha256sum <"$2")" = "$3" ]' _ "$SRC" "$WORK/b6/config.json" "$sum6"
check "config.json > 16 MiB, shim: no temporary file left" \
	bash -c '[ "$1" = 0 ] && [ -z "$(ls -A "$2" | grep orh)" ]' _ "$SRC" "$WORK/b6"
HRC=0
timeout 60 "$HOOK" --config "$WORK/always.conf" precreate <"$WORK/b6/config.json" >"$WORK/pre6.out" 2>"$WORK/pre6.log" || HRC=$?
check "config.json > 16 MiB, precreate: exit 1 with a clear error" \
	bash -c '[ "$1" = 1 ] && grep -q "File too large" "$2"' _ "$HRC" "$WORK/pre6.log"

# ---- 7. the node config over 256 KiB --------------------------------------------------
{ printf '[containers]\nactivation = always\n'; for i in $(seq 1 12000); do printf '# padding line %05d ......\n' "$i"; done; } >"$WORK/big.conf"
bigsize=$(stat -c %s "$WORK/big.conf")
RC7=0
"$HOOK" --sysroot "$WORK/node" --config "$WORK/big.conf" env >/dev/null 2>"$WORK/big-env.log" || RC7=$?
check "config file of $bigsize bytes (> 256 KiB), env: exit 2" [ "$RC7" = 2 ]
check "config file > 256 KiB, env: a clear error" grep -q "big.conf: larger than 262144 bytes" "$WORK/big-env.log"
fresh r7
make_bundle "$WORK/b7" "$WORK/r7" "$WORK/node" "$WORK/big.conf" true "$HOSTNET"
hook_direct "$WORK/b7" "$WORK/big.conf"
check "config file > 256 KiB, hook: exit 0, container left unchanged" \
	bash -c '[ "$1" = 0 ] && grep -q "larger than 262144 bytes; container left unchanged" <<<"$2"' _ "$HRC" "$HLOG"
check "config file > 256 KiB, hook: nothing done" \
	said "larger than 262144 bytes" "$HLOG" untouched "$WORK/r7"
HRC=0
"$HOOK" --config "$WORK/big.conf" precreate <"$WORK/b7/config.json" >"$WORK/pre7.out" 2>/dev/null || HRC=$?
check "config file > 256 KiB, precreate: the spec passes through unchanged" \
	bash -c '[ "$1" = 0 ] && cmp -s "$2" "$3"' _ "$HRC" "$WORK/pre7.out" "$WORK/b7/config.json"


# ---- 8. node config lines longer than libinih's buffer, with real runc ----------------
# libinih's own buffer is 200 bytes: the tail of a longer comment used to be parsed as a
# line of its own. A 229-byte comment must stay a comment; a line over the hook's limit
# (4093 bytes) makes the whole config an error naming the file and the line.
comment_conf() { # FILE PAD: '# ', PAD x's, then NCCL_NET_PLUGIN = /opt/evil.so in [env]
	{ printf '[containers]\nactivation = always\n[env]\nNCCL_DEBUG = WARN\n# '
	  printf 'x%.0s' $(seq "$2"); printf 'NCCL_NET_PLUGIN = /opt/evil.so\n'; } >"$1"
}
# what $INSIDE8 printed: /etc/nccl.conf, then "---", then PID 1's NCCL_* environment; a
# container that ran printed the "---" line, and every check of its output needs it
nccl_conf_of() { printf '%s\n' "${OUT%%---*}"; }
ran8() { grep -qx -- --- <<<"$OUT"; }
no_plugin() { ran8 && ! grep -q NCCL_NET_PLUGIN <<<"$OUT"; }
started_with_plan() {
	[ "$RC" = 0 ] && ran8 && nccl_conf_of | grep -q "^NCCL_IB_HCA=" &&
		nccl_conf_of | grep -qx "NCCL_DEBUG=WARN"
}
started_unchanged() { [ "$RC" = 0 ] && ran8 && [ -z "$(nccl_conf_of)" ] && untouched "$1"; }
# precreate's output: one hook of ours that writes nccl.conf with that config (the bundle's
# own live hook, so no nccl-conf beside it), process.env as the user gave it; and that
# config's plan (what the hook writes) has NCCL_DEBUG=WARN and no NCCL_NET_PLUGIN
precreate_env_ok() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert not any(e.startswith("NCCL_") for e in d["process"]["env"]), d["process"]["env"]
h = [h for h in d["hooks"]["createRuntime"] if h["args"][-1] in ("nccl-conf", "createRuntime")]
assert len(h) == 1 and sys.argv[2] in h[0]["args"], h' "$1" "$2" &&
		"$HOOK" --sysroot "$WORK/node" --config "$2" env 2>/dev/null | grep -qx "NCCL_DEBUG=WARN" &&
		! "$HOOK" --sysroot "$WORK/node" --config "$2" env 2>/dev/null | grep -q "^NCCL_NET_PLUGIN"
}
comment_conf "$WORK/longcomment.conf" 197
comment_conf "$WORK/hugecomment.conf" 5000
value1023=$(printf 'v%.0s' $(seq 1023))
write_conf "$WORK/value1023.conf" "[containers]
activation = always
[env]
NCCL_TEST_VALUE = $value1023"
INSIDE8='cat /etc/nccl.conf 2>/dev/null; echo ---; tr "\0" "\n" </proc/1/environ | grep "^NCCL_" || true'

fresh r8
make_bundle "$WORK/b8" "$WORK/r8" "$WORK/node" "$WORK/longcomment.conf" "$INSIDE8" "$HOSTNET"
run_ctr "$WORK/b8"
check "229-byte comment ending in NCCL_NET_PLUGIN, runc: the container starts with the plan" \
	started_with_plan
check "229-byte comment ending in NCCL_NET_PLUGIN, runc: the container gets no NCCL_NET_PLUGIN" \
	no_plugin
# (in the log of a hook that ran: it names the container)
check "229-byte comment: the hook logs no config error" \
	bash -c 'grep -q "container orh-e2e-$2-" "$1" && ! grep -q "longcomment.conf:" "$1"' _ \
	"$WORK/b8/hook.log" "$$"
HRC=0
"$HOOK" --sysroot "$WORK/node" --config "$WORK/longcomment.conf" precreate \
	<"$WORK/b8/config.json" >"$WORK/pre8.out" 2>/dev/null || HRC=$?
check "229-byte comment, precreate: exit 0" \
	bash -c '[ "$1" = 0 ]' _ "$HRC"
check "229-byte comment, precreate: edited, no NCCL_* in process.env, the plan has no NCCL_NET_PLUGIN" \
	precreate_env_ok "$WORK/pre8.out" "$WORK/longcomment.conf"

fresh r8b
make_bundle "$WORK/b8b" "$WORK/r8b" "$WORK/node" "$WORK/hugecomment.conf" "$INSIDE8" "$HOSTNET"
run_ctr "$WORK/b8b"
check "5032-byte comment ending in NCCL_NET_PLUGIN, runc: the container starts unchanged" \
	started_unchanged "$WORK/r8b"
check "5032-byte comment ending in NCCL_NET_PLUGIN, runc: the container gets no NCCL_NET_PLUGIN" \
	no_plugin
check "5032-byte comment, runc: the hook reports the config error naming file and line" \
	grep -q "$WORK/hugecomment.conf:5: line longer than 4093 bytes; container left unchanged" \
	"$WORK/b8b/hook.log"
HRC=0
"$HOOK" --sysroot "$WORK/node" --config "$WORK/hugecomment.conf" precreate \
	<"$WORK/b8b/config.json" >"$WORK/pre8b.out" 2>"$WORK/pre8b.log" || HRC=$?
check "5032-byte comment, precreate: the spec passes through unchanged" \
	bash -c '[ "$1" = 0 ] && cmp -s "$2" "$3"' _ "$HRC" "$WORK/pre8b.out" "$WORK/b8b/config.json"
check "5032-byte comment, precreate: the error names file and line" \
	grep -q "hugecomment.conf:5: line longer than 4093 bytes" "$WORK/pre8b.log"

fresh r8c
make_bundle "$WORK/b8c" "$WORK/r8c" "$WORK/node" "$WORK/value1023.conf" "$INSIDE8" "$HOSTNET"
run_ctr "$WORK/b8c"
check "1023-byte [env] value, runc: nccl.conf holds it whole" \
	bash -c '[ "$1" = 0 ] && grep -qx "NCCL_TEST_VALUE=$2" <<<"$3"' _ "$RC" "$value1023" "$OUT"

# ---- 9. a device number from sysfs that is not an RDMA one: /dev/kmsg's ----------------
# /dev/testkmsg is listed in the spec but not allowed: only a grant of the hook lets the
# container open it. It is opened write-only and nothing is written (a read open needs
# CAP_SYSLOG whatever the grant: that would prove nothing).
cp -a "$WORK/node" "$WORK/kmsgnode"
echo 1:11 >"$WORK/kmsgnode/sys/class/infiniband_verbs/uverbs2/dev"
fresh r10
make_bundle "$WORK/b10" "$WORK/r10" "$WORK/kmsgnode" "$WORK/always.conf" \
	'for f in /dev/infiniband/*; do stat -c "%n %t:%T" "$f"; done; probe /dev/infiniband/uverbs2; if (: >/dev/testkmsg) 2>/dev/null; then echo "testkmsg opened"; else echo "testkmsg denied"; fi' \
	"$HOSTNET; c['linux'].setdefault('devices', []).append({'path': '/dev/testkmsg', 'type': 'c', 'major': 1, 'minor': 11, 'fileMode': 0o600, 'uid': 0, 'gid': 0})"
run_ctr "$WORK/b10"
check "uverbs2/dev reads 1:11: the container starts (rc $RC)" [ "$RC" = 0 ]
# (among the nodes of a container that ran and was given some: uverbs1's line)
check "uverbs2/dev reads 1:11: no node under /dev/infiniband is 1:11" \
	bash -c 'grep -qx "/dev/infiniband/uverbs1 e7:c1" <<<"$1" && ! grep -q " 1:b$" <<<"$1"' _ "$OUT"
check "uverbs2/dev reads 1:11: /dev/infiniband/uverbs2 is not made" \
	grep -qx "/dev/infiniband/uverbs2 ENOENT" <<<"$OUT"
check "uverbs2/dev reads 1:11: no grant for 1:11 (the container cannot open /dev/kmsg's numbers)" \
	grep -qx "testkmsg denied" <<<"$OUT"
check "uverbs2/dev reads 1:11: the other devices are made (uverbs1 231:193, rdma_cm)" \
	bash -c 'grep -qx "/dev/infiniband/uverbs1 e7:c1" <<<"$1" && grep -q "^/dev/infiniband/rdma_cm " <<<"$1"' _ "$OUT"
check "uverbs2/dev reads 1:11: the refusal is logged, naming the file and the value" \
	grep -q "kmsgnode/sys/class/infiniband_verbs/uverbs2/dev': 1:11 is not" "$WORK/b10/hook.log"

# ---- 10. a spec that lists a node the hook makes, with other numbers ---------------------
fresh r11
make_bundle "$WORK/b11" "$WORK/r11" "$WORK/node" "$WORK/always.conf" \
	'stat -c "%n %t:%T" /dev/infiniband/uverbs1' \
	"$HOSTNET; c['linux'].setdefault('devices', []).append({'path': '/dev/infiniband/uverbs1', 'type': 'c', 'major': 231, 'minor': 250, 'fileMode': 0o666, 'uid': 0, 'gid': 0})"
run_ctr "$WORK/b11"
check "uverbs1 listed in the spec as 231:250: the container starts (rc $RC)" [ "$RC" = 0 ]
check "uverbs1 listed as 231:250: the container gets the node's 231:193" \
	grep -qx "/dev/infiniband/uverbs1 e7:c1" <<<"$OUT"
check "uverbs1 listed as 231:250: the log names the path, the spec's numbers and the node's" \
	grep -q "/dev/infiniband/uverbs1.*231:250.*231:193" "$WORK/b11/hook.log"

finish
