#!/usr/bin/env bash
# Black-box tests of the oci-rdma-hook binary on the sample nodes: detect, env, exit codes.
set -u
HOOK=${ORH_HOOK:?run through meson test}
SRC=${ORH_SRCDIR:?run through meson test}
work=$(mktemp -d /dev/shm/orh-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
PASSES=0 FAILS=0
# ok, not_ok, check DESCRIPTION COMMAND...: the TAP lines of every shell test
. "$SRC/tests/tap.sh"

# not_ok_diag DESCRIPTION TEXT: not_ok, with TEXT under it as TAP diagnostics
not_ok_diag() {
	not_ok "$1"
	printf '%s\n' "$2" | sed 's/^/#   /'
}
# same EXPECTED ACTUAL: the two texts are equal; else their diff, as TAP diagnostics
same() {
	[ "$1" == "$2" ] && return 0
	diff <(printf '%s\n' "$1") <(printf '%s\n' "$2") | sed 's/^/#   /'
	return 1
}
node() { python3 "$SRC/tests/mknode.py" "$SRC/tests/nodes/$1.json" "$work/$1" >/dev/null && echo "$work/$1"; }

seed=$(node seed001-roce)
erdma=$(node erdma)
nordma=$(node nordma)
mixed=$(node mixed)
ib=$(node ib)

# env on the seed 001 node: exactly these lines, nothing else on stdout
check "env seed001" same "NCCL_IB_HCA==mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1
NCCL_IB_GID_INDEX=3
NCCL_SOCKET_IFNAME==eth0
NCCL_IB_TIMEOUT=22
NCCL_IB_QPS_PER_CONNECTION=8" "$("$HOOK" --sysroot "$seed" env 2>/dev/null)"

# detect lists the same rows as show_gids in seed 001
rows_ok=1
while read -r line; do
	n=$(wc -w <<<"$line")
	key=$(awk '{print $1, $2, $3}' <<<"$line")
	got=$("$HOOK" --sysroot "$seed" detect 2>/dev/null | awk -v k="$key" '$1" "$2" "$3 == k' |
		awk -v n="$n" '{ s=""; if ($5 ~ /^v[12]$/) { cnt=n } else { cnt=n }
			for (i = 1; i <= cnt; i++) s = s (i > 1 ? " " : "") $i; print s }')
	[ "$got" == "$line" ] || { rows_ok=0; not_ok_diag "detect row '$line'" "got '$got'"; }
done <"$SRC/tests/nodes/seed001-roce.show_gids"
[ $rows_ok = 1 ] && ok "detect seed001 rows match show_gids ($(wc -l <"$SRC/tests/nodes/seed001-roce.show_gids") rows)"

out=$("$HOOK" --sysroot "$seed" detect 2>/dev/null)
grep -q '^mlx5_0 .*left out: front-end NIC: eth0 carries the default route' <<<"$out" &&
	ok "detect marks the front-end NIC" || not_ok "detect marks the front-end NIC"

check "env eRDMA" same "NCCL_IB_HCA==rocep26s0:1
NCCL_IB_GID_INDEX=1
NCCL_SOCKET_IFNAME==eth0
NCCL_IB_QPS_PER_CONNECTION=8
NCCL_MIN_NCHANNELS=16
NCCL_NET_PLUGIN=none" "$("$HOOK" --sysroot "$erdma" env 2>/dev/null)"
"$HOOK" --sysroot "$erdma" detect 2>/dev/null | grep -q '^rocep156s0 .*left out: port state DOWN' &&
	ok "detect eRDMA marks the DOWN port" || not_ok "detect eRDMA marks the DOWN port"

check "env InfiniBand" same "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1
NCCL_SOCKET_IFNAME==eth0" "$("$HOOK" --sysroot "$ib" env 2>/dev/null)"

out=$("$HOOK" --sysroot "$nordma" env 2>/dev/null); rc=$?
[ $rc = 0 ] && [ -z "$out" ] && ok "env on a node without RDMA prints nothing" || not_ok_diag "env no RDMA" "rc=$rc out=$out"

# an unseen node: differing GID indices, EFA, DOWN mlx5_10
out=$("$HOOK" --sysroot "$mixed" env 2>"$work/err")
grep -q '^NCCL_IB_HCA==mlx5_0:1,mlx5_1:1$' <<<"$out" && ! grep -q NCCL_IB_GID_INDEX <<<"$out" &&
	grep -q '^NCCL_IB_ROCE_VERSION_NUM=2$' <<<"$out" && grep -q '^NCCL_IB_ADDR_FAMILY=AF_INET$' <<<"$out" &&
	ok "env mixed node: per-device GID selection" || not_ok_diag "env mixed node" "$out"
"$HOOK" --sysroot "$mixed" env --explain 2>&1 >/dev/null | grep -q 'warning: no single GID index fits every port (mlx5_0:1=5, mlx5_1:1=3)' &&
	ok "env --explain names the ports and indices" || not_ok "env --explain warning"

# --explain goes to stderr only (stdout: the plan, not empty on this node)
out=$("$HOOK" --sysroot "$seed" env 2>/dev/null)
[ -n "$out" ] && [ "$("$HOOK" --sysroot "$seed" env --explain 2>/dev/null)" == "$out" ] &&
	ok "env --explain keeps stdout clean" || not_ok_diag "env --explain keeps stdout clean" "env: '$out'"
"$HOOK" --sysroot "$seed" env --explain 2>&1 >/dev/null | grep -q '^NCCL_IB_GID_INDEX=3  <- rule 4' &&
	ok "env --explain gives the rule" || not_ok "env --explain gives the rule"

# the config changes the plan; its lines are named
cat >"$work/lingjun.conf" <<'CONF'
[node]
preset = roce

[env]
NCCL_IB_TC = 136
NCCL_IB_SL = 5
NCCL_IB_QPS_PER_CONNECTION =
CONF
out=$("$HOOK" --config "$work/lingjun.conf" --sysroot "$seed" env 2>/dev/null)
grep -q '^NCCL_IB_TC=136$' <<<"$out" && grep -q '^NCCL_IB_SL=5$' <<<"$out" && ! grep -q QPS <<<"$out" &&
	ok "config [env] sets and removes" || not_ok_diag "config [env]" "$out"
"$HOOK" --config "$work/lingjun.conf" --sysroot "$seed" env --explain 2>&1 >/dev/null | grep -q "NCCL_IB_TC=136  <- $work/lingjun.conf:5" &&
	ok "explain names the config line" || not_ok "explain names the config line"

# the image checks' keys: accepted, a bad value refused naming the file, line and key
printf '[containers]\nimage_check = fail\nnccl_min = 2.19.3\n' >"$work/image.conf"
out=$("$HOOK" --config "$work/image.conf" --sysroot "$seed" env 2>&1)
grep -q '^NCCL_IB_HCA=' <<<"$out" && ok "config image_check = fail, nccl_min = 2.19.3: accepted" ||
	not_ok_diag "config image_check = fail, nccl_min = 2.19.3: accepted" "$out"
printf '[containers]\n\nimage_check = strict\n' >"$work/image-bad.conf"
rc=0
out=$("$HOOK" --config "$work/image-bad.conf" --sysroot "$seed" env 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q "image-bad.conf:3: \[containers\] key 'image_check': 'strict' is not warn, fail or off" <<<"$out" &&
	ok "config image_check = strict: refused (exit 2), naming file, line and key" ||
	not_ok_diag "config image_check = strict: refused (exit $rc)" "$out"
printf '[containers]\nnccl_min = 2.x\n' >"$work/nccl-bad.conf"
rc=0
out=$("$HOOK" --config "$work/nccl-bad.conf" --sysroot "$seed" env 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q "nccl-bad.conf:2: \[containers\] key 'nccl_min': '2.x' is not a version X.Y or X.Y.Z" <<<"$out" &&
	ok "config nccl_min = 2.x: refused (exit 2), naming file, line and key" ||
	not_ok_diag "config nccl_min = 2.x: refused (exit $rc)" "$out"

# sysroot from the config file
printf '[node]\nsysroot = %s\n' "$erdma" >"$work/sysroot.conf"
"$HOOK" --config "$work/sysroot.conf" env 2>/dev/null | grep -q '^NCCL_IB_HCA==rocep26s0:1$' &&
	ok "config sysroot" || not_ok "config sysroot"

# exit codes and messages
printf '[node]\npreset = auto\nbogus = 1\n' >"$work/bad.conf"
err=$("$HOOK" --config "$work/bad.conf" --sysroot "$seed" env 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && grep -q "$work/bad.conf:3: \[node\] key 'bogus': unknown key" <<<"$err" &&
	ok "bad config: exit 2 naming file, line, key" || not_ok_diag "bad config" "rc=$rc $err"

# a comment longer than libinih's own 200-byte buffer is one comment: its tail is never
# parsed as a line of its own; a line over the limit is refused whole, naming it
{ printf '[containers]\nactivation = always\n[env]\n# '; printf 'x%.0s' $(seq 197)
  printf 'NCCL_NET_PLUGIN = /opt/evil.so\n'; } >"$work/longcomment.conf"
out=$("$HOOK" --config "$work/longcomment.conf" --sysroot "$seed" env 2>&1); rc=$?
[ $rc = 0 ] && grep -q '^NCCL_IB_HCA=' <<<"$out" && ! grep -q NCCL_NET_PLUGIN <<<"$out" &&
	ok "a 229-byte comment ending in NCCL_NET_PLUGIN stays a comment" ||
	not_ok_diag "a 229-byte comment ending in NCCL_NET_PLUGIN stays a comment" "rc=$rc $out"
{ printf '[containers]\nactivation = always\n[env]\n# '; printf 'x%.0s' $(seq 4100)
  printf 'NCCL_NET_PLUGIN = /opt/evil.so\n'; } >"$work/hugecomment.conf"
out=$("$HOOK" --config "$work/hugecomment.conf" --sysroot "$seed" env 2>"$work/hugecomment.err")
rc=$?
err=$(cat "$work/hugecomment.err")
[ $rc = 2 ] && [ -z "$out" ] && grep -q "$work/hugecomment.conf:4: line longer than 4093 bytes" <<<"$err" &&
	ok "a 4132-byte comment ending in NCCL_NET_PLUGIN: exit 2 naming file and line" ||
	not_ok_diag "a 4132-byte comment ending in NCCL_NET_PLUGIN" "rc=$rc out=$out $err"
{ printf '[env]\n# '; printf 'x%.0s' $(seq 4091); printf '\nNCCL_OK = 1\n'; } >"$work/maxline.conf"
"$HOOK" --config "$work/maxline.conf" --sysroot "$seed" env 2>/dev/null | grep -qx 'NCCL_OK=1' &&
	ok "a line of 4093 bytes is read" || not_ok "a line of 4093 bytes is read"
{ printf '[env]\n# '; printf 'x%.0s' $(seq 4092); printf '\nNCCL_OK = 1\n'; } >"$work/overline.conf"
err=$("$HOOK" --config "$work/overline.conf" --sysroot "$seed" env 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && grep -q "$work/overline.conf:2: line longer than 4093 bytes" <<<"$err" &&
	ok "a line of 4094 bytes: exit 2 naming file and line" || not_ok_diag "a line of 4094 bytes" "rc=$rc $err"
value=$(printf 'v%.0s' $(seq 1023))
printf '[env]\nNCCL_TEST_VALUE = %s\n' "$value" >"$work/value1023.conf"
"$HOOK" --config "$work/value1023.conf" --sysroot "$seed" env 2>/dev/null |
	grep -qx "NCCL_TEST_VALUE=$value" &&
	ok "a 1023-byte [env] value is planned whole" || not_ok "a 1023-byte [env] value is planned whole"
"$HOOK" --config "$work/missing.conf" env >/dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok "missing --config file: exit 2" || not_ok "missing --config: rc=$rc"
"$HOOK" frobnicate >/dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok "unknown command: exit 2" || not_ok "unknown command: rc=$rc"
"$HOOK" --sysroot "$seed" env --bogus >/dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok "unknown env option: exit 2" || not_ok "unknown env option: rc=$rc"
"$HOOK" >/dev/null 2>&1; rc=$?
[ $rc = 2 ] && ok "no command: exit 2" || not_ok "no command: rc=$rc"
"$HOOK" --sysroot /nonexistent env >/dev/null 2>&1; rc=$?
[ $rc = 1 ] && ok "unreadable sysroot: exit 1" || not_ok "unreadable sysroot: rc=$rc"

# detect --json is valid JSON with the same facts
json=$("$HOOK" --sysroot "$seed" detect --json 2>/dev/null)
[ "$(jq -r '.devices[1].ports[0].gids[3].ipv4' <<<"$json")" == "25.11.128.2" ] &&
	[ "$(jq -r '.devices[0].ports[0].used' <<<"$json")" == "false" ] &&
	[ "$(jq -r '.env[1].value' <<<"$json")" == "3" ] &&
	[ "$(jq -r '.gid_index' <<<"$json")" == "3" ] &&
	[ "$(jq -r '.gid_per_device' <<<"$json")" == "false" ] &&
	ok "detect --json" || not_ok "detect --json"

# detect shows the decision a container on the host network gets (it reads every GID
# entry, env only those the plan asks for): on every sample node, the same variables,
# the same ports used or left out and why, and the same GID index
for f in "$SRC"/tests/nodes/*.json; do
	n=$(basename "$f" .json)
	t=$work/all/$n
	python3 "$SRC/tests/mknode.py" "$f" "$t" >/dev/null || { not_ok "detect = env on $n: mknode"; continue; }
	json=$("$HOOK" --sysroot "$t" detect --json 2>/dev/null)
	vars=$("$HOOK" --sysroot "$t" env 2>/dev/null)
	ports=$("$HOOK" --sysroot "$t" env --explain 2>&1 >/dev/null | grep -E '^# [^ ]+:[0-9]+ (used|left out): ')
	# two empty sides are alike whatever the commands did: where a side is empty (nordma:
	# no port, no variable), both are shown to be, next to what proves each command ran
	if [ -n "$vars" ]; then
		check "detect = env on $n: the variables" same "$vars" \
			"$(jq -r '.env[] | "\(.name)=\(.value)"' <<<"$json")"
	else
		check "detect = env on $n: no variable on either side, and env --explain says why" same \
			"detect --json env: 0; env --explain: no usable RDMA port" \
			"detect --json env: $(jq '.env | length' <<<"$json"); env --explain: $("$HOOK" --sysroot "$t" env --explain 2>&1 >/dev/null | sed -n 's/^# \(no usable RDMA port\): containers are left unchanged$/\1/p')"
	fi
	if [ -n "$ports" ]; then
		check "detect = env on $n: every port's choice" same "$ports" \
			"$(jq -r '.devices[] | .name as $d | .ports[] |
				"# \($d):\(.port) \(if .used then "used" else "left out" end): \(.reason)"' <<<"$json")"
	else
		check "detect = env on $n: no port on either side, under detect's table header" same \
			"detect --json ports: 0; detect: its header" \
			"detect --json ports: $(jq '[.devices[].ports[]] | length' <<<"$json"); detect: $("$HOOK" --sysroot "$t" detect 2>/dev/null | grep -qE '^DEV +PORT +INDEX ' && echo its header)"
	fi
done

# detect --verbs: no provider or driver here; it says so and carries on
out=$("$HOOK" --sysroot "$seed" detect --verbs 2>/dev/null); rc=$?
[ $rc = 0 ] && grep -q '^libibverbs: ' <<<"$out" && grep -q '^mlx5_8 ' <<<"$out" &&
	ok "detect --verbs reports and carries on" || not_ok_diag "detect --verbs" "rc=$rc"

# The hook links neither libibverbs nor the libnl it brings, nor libcap: their
# constructors would run at every container start, before the hook confines itself (libcap's
# makes a system call for each capability bit it probes). detect --verbs runs the build
# that has libibverbs, oci-rdma-hook-verbs (next to the hook in a build tree).
if nm "$HOOK" 2>/dev/null | grep -q ' T main$'; then
	linked=$(nm "$HOOK" | grep -E ' (ibv_get_device_list|rtnl_link_register_info|nl_socket_alloc|_libcap_initialize|cap_get_proc)$')
	check "the hook links no libibverbs, no libnl and no libcap" same "" "$linked"
else
	not_ok_diag "the hook links no libibverbs, no libnl and no libcap" "no symbols in $HOOK to look at"
fi
note=$("$HOOK" --sysroot "$seed" detect --json --verbs 2>/dev/null | jq -r '.verbs.note // .verbs.available')
# Whether this build makes oci-rdma-hook-verbs is its configuration (meson's targets, and
# the option that decided it), not whether a file happens to be there.
verbs_build=$(python3 -c 'import json, sys
info = sys.argv[1] + "/meson-info/"
opt = [o["value"] for o in json.load(open(info + "intro-buildoptions.json")) if o["name"] == "verbs"]
built = any(t["name"] == "oci-rdma-hook-verbs" for t in json.load(open(info + "intro-targets.json")))
print("yes" if built else "no", opt[0] if opt else "?")' "${ORH_BUILDDIR:-}" 2>/dev/null) ||
	verbs_build="unknown ?"
read -r verbs_built verbs_opt <<<"$verbs_build"
case $verbs_built in
yes)
	if [ ! -x "$(dirname "$HOOK")/oci-rdma-hook-verbs" ]; then
		not_ok_diag "detect --json --verbs runs oci-rdma-hook-verbs" \
			"the build is configured with it (-Dverbs=$verbs_opt, libibverbs found), but $(dirname "$HOOK")/oci-rdma-hook-verbs is not there"
	elif [[ "$note" != "no libibverbs in this binary"* ]]; then
		ok "detect --json --verbs is answered by libibverbs, in oci-rdma-hook-verbs ($note)"
	else
		not_ok_diag "detect --json --verbs runs oci-rdma-hook-verbs" "$note"
	fi
	;;
no)
	ok "detect --json --verbs: # SKIP this build is configured without oci-rdma-hook-verbs (-Dverbs=$verbs_opt: libibverbs not found or disabled); the hook answers '$note'"
	;;
*)
	not_ok_diag "detect --json --verbs: the build's configuration cannot be read" \
		"no meson-info under ORH_BUILDDIR='${ORH_BUILDDIR:-}' (run through meson test)"
	;;
esac
mkdir "$work/alone" && cp "$HOOK" "$work/alone/oci-rdma-hook"
out=$("$work/alone/oci-rdma-hook" --sysroot "$seed" detect --verbs 2>/dev/null); rc=$?
[ $rc = 0 ] && grep -q '^libibverbs: no libibverbs in this binary, and no oci-rdma-hook-verbs (/' <<<"$out" &&
	grep -q '^mlx5_8 ' <<<"$out" &&
	ok "detect --verbs without oci-rdma-hook-verbs says so and carries on" ||
	not_ok_diag "detect --verbs without oci-rdma-hook-verbs" "rc=$rc $(grep libibverbs <<<"$out")"

# a device number sysfs names that is not RDMA's (/dev/kmsg's): refused in env and detect
kmsg=$work/kmsg
cp -a "$seed" "$kmsg"
echo 1:11 >"$kmsg/sys/class/infiniband_verbs/uverbs2/dev"
check "env: a device whose uverbs/dev reads 1:11 is not in NCCL_IB_HCA" same \
	"NCCL_IB_HCA==mlx5_1:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_8:1" \
	"$("$HOOK" --sysroot "$kmsg" env 2>/dev/null | grep '^NCCL_IB_HCA=')"
# (one run's explanation: its warning, its device lines, and none of them 1:11)
out=$("$HOOK" --sysroot "$kmsg" env --explain 2>&1 >/dev/null)
grep -q "^warning: skipping '$kmsg/sys/class/infiniband_verbs/uverbs2/dev': 1:11 is not" <<<"$out" &&
	grep -q '^# device .* c 231:193$' <<<"$out" && ! grep -q '^# device .* c 1:11$' <<<"$out" &&
	ok "env --explain: uverbs2/dev 1:11 refused with a warning, no 1:11 device" ||
	not_ok_diag "env --explain: uverbs2/dev 1:11" "$out"
"$HOOK" --sysroot "$kmsg" detect --json 2>/dev/null |
	jq -e '([.devices[] | select(.name == "mlx5_2") | .uverbs] == [null]) and
	       ([.. | objects | select(.major? == 1)] | length == 0)' >/dev/null &&
	ok "detect --json: no 1:11 anywhere" || not_ok "detect --json: no 1:11 anywhere"

# ---- env --spec: the decision for the container of a config.json -----------------------
spec() { # FILE JSON-PROCESS-ENV JSON-DEVICES JSON-ANNOTATIONS
	printf '{"ociVersion":"1.0.2","process":{"args":["sh"],"env":%s},"linux":{"devices":%s},"annotations":%s}\n' \
		"$2" "$3" "$4" >"$1"
}
spec "$work/given.json" '["PATH=/bin"]' \
	'[{"path":"/dev/infiniband/uverbs3","type":"c","major":231,"minor":195},{"path":"/dev/infiniband/rdma_cm","type":"c","major":10,"minor":58}]' '{}'
check "env --spec: a container given uverbs3 gets mlx5_3's port alone (rule 8)" same \
	"NCCL_IB_HCA==mlx5_3:1" "$("$HOOK" --sysroot "$seed" env --spec "$work/given.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
"$HOOK" --sysroot "$seed" env --explain --spec "$work/given.json" 2>&1 >/dev/null |
	grep -qx '# mlx5_1:1 left out: rule 8: not given to this container (it holds other RDMA devices)' &&
	ok "env --explain --spec: the ports not given are named with rule 8" ||
	not_ok "env --explain --spec: the ports not given are named with rule 8"
"$HOOK" --sysroot "$seed" env --explain --spec "$work/given.json" 2>&1 >/dev/null |
	grep -c '^# device ' | grep -qx 2 && ok "env --explain --spec: two device nodes, uverbs3 and rdma_cm" ||
	not_ok "env --explain --spec: two device nodes"
# the decision whole: every verdict the appliers act on
check "env --explain --spec: activation, memlock, its check, sysfs view, checks" same \
	"# activation: default (always)
# memlock: unlimited
# memlock check: the container's soft limit is held to 8388608 bytes; below it a warning
# sysfs view: 1 of 9 devices kept: mlx5_3
# checks: GPUDirect, GID and ports pass" \
	"$("$HOOK" --sysroot "$seed" env --explain --spec "$work/given.json" 2>&1 >/dev/null |
		grep -E '^# (activation|memlock|sysfs view|check)' |
		sed 's/^# sysfs view [0-9a-f]\{16\}:/# sysfs view:/')"
# the same container as docker --device maps it: another path, the same numbers
spec "$work/renamed.json" '["PATH=/bin"]' \
	'[{"path":"/dev/infiniband/uverbs0","type":"c","major":231,"minor":195}]' '{}'
check "env --spec: devices are matched by number, not by path" same \
	"NCCL_IB_HCA==mlx5_3:1" "$("$HOOK" --sysroot "$seed" env --spec "$work/renamed.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
spec "$work/sandbox.json" '["PATH=/bin"]' '[]' '{"io.kubernetes.cri.container-type":"sandbox","oci-rdma-hook/enable":"true"}'
# (nothing, from a run that exited 0 and says why: a failed one prints nothing too)
out=$("$HOOK" --sysroot "$seed" env --spec "$work/sandbox.json" 2>/dev/null); rc=$?
why=$("$HOOK" --sysroot "$seed" env --explain --spec "$work/sandbox.json" 2>&1 >/dev/null |
	grep -c '^# not activated: a Kubernetes pod sandbox')
check "env --spec: a pod sandbox gets nothing (exit 0, and --explain says why)" same "rc 0: '', why: 1" \
	"rc $rc: '$out', why: $why"
"$HOOK" --sysroot "$seed" env --explain --spec "$work/sandbox.json" 2>&1 |
	grep -qx '# not activated: a Kubernetes pod sandbox: never served; the container is left unchanged' &&
	ok "env --explain --spec: says why a sandbox is not served" || not_ok "env --explain --spec: sandbox"
"$HOOK" --sysroot "$seed" env --explain --spec "$work/sandbox.json" 2>&1 |
	grep -qx '# activation: skip (sandbox)' &&
	ok "env --explain --spec: a sandbox's reason code" || not_ok "env --explain --spec: its reason"
printf '[containers]\nactivation = devices\n' >"$work/devices.conf"
spec "$work/plain.json" '["PATH=/bin"]' '[]' '{}'
out=$("$HOOK" --sysroot "$seed" --config "$work/devices.conf" env --spec "$work/plain.json" 2>/dev/null); rc=$?
why=$("$HOOK" --sysroot "$seed" --config "$work/devices.conf" env --explain --spec "$work/plain.json" 2>&1 |
	grep -cx '# not activated: activation = devices, and the container holds no RDMA device node; the container is left unchanged')
check "activation = devices: a container without RDMA nodes gets nothing (exit 0, and --explain says why)" same \
	"rc 0: '', why: 1" "rc $rc: '$out', why: $why"
check "activation = devices: a container holding uverbs3 is served" same "NCCL_IB_HCA==mlx5_3:1" \
	"$("$HOOK" --sysroot "$seed" --config "$work/devices.conf" env --spec "$work/given.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
"$HOOK" --sysroot "$seed" env --spec "$work/missing.json" >/dev/null 2>"$work/err"
check "env --spec: a missing file is an error naming it" same "1 yes" \
	"$? $(grep -q "missing.json" "$work/err" && echo yes)"
# rule 10 on a node with InfiniBand and RoCE ports: one fabric
mf=$(node mixed-fabric)
check "rule 10: NCCL_IB_HCA holds the larger group, the RoCE ports" same "NCCL_IB_HCA==mlx5_1:1,mlx5_2:1,mlx5_3:1" \
	"$("$HOOK" --sysroot "$mf" env 2>/dev/null | grep '^NCCL_IB_HCA=')"
"$HOOK" --sysroot "$mf" env --explain 2>&1 >/dev/null | grep -q "^warning: the usable ports are InfiniBand (1) and Ethernet (3): .*left out: mlx5_4:1$" &&
	ok "rule 10: a warning names the port left out" || not_ok "rule 10: a warning names the port left out"
printf '[node]\nlink_layer = infiniband\n' >"$work/ib.conf"
check "rule 10: link_layer = infiniband picks the InfiniBand port" same "NCCL_IB_HCA==mlx5_4:1" \
	"$("$HOOK" --sysroot "$mf" --config "$work/ib.conf" env 2>/dev/null | grep '^NCCL_IB_HCA=')"

# detect on GPU nodes: the GPUs in PCI bus order, the NICs nearest to each, the topology
dgx=$(node dgx-h100)
out=$("$HOOK" --sysroot "$dgx" detect 2>"$work/dgx.err")
check "detect dgx-h100: GPU rows" same \
"0    0000:18:00.0  GPU-efc0520c-e2ee-e86d-8193-ef5cca3213fb  0     0    mlx5_0,mlx5_1
1    0000:1b:00.0  GPU-3b6d1f2a-58c4-4e0b-9d71-0a2c6e8f4b13  1     0    mlx5_0,mlx5_1
2    0000:3a:00.0  GPU-8c2f4a61-0d3e-4b7a-a5c9-71e2f03d6a48  2     0    mlx5_2,mlx5_3
3    0000:3d:00.0  GPU-d41a7e90-6b2c-4f85-8e3d-2c9b5a1f7e06  3     0    mlx5_2,mlx5_3
4    0000:9a:00.0  GPU-5e9c3b27-a1f4-4d62-b08e-93f6c7d2e415  4     1    mlx5_4,mlx5_5
5    0000:9d:00.0  GPU-a7f20d84-3c9e-4b51-86d2-e4b1a0c95f7d  5     1    mlx5_4,mlx5_5
6    0000:ba:00.0  GPU-1c8e6f35-9a2d-4e7b-bc40-5d3a8f2e9c61  6     1    mlx5_6,mlx5_7
7    0000:bd:00.0  GPU-f60b2d9a-7e13-4c8f-a2d5-0b9e4c7a3f28  7     1    mlx5_6,mlx5_7" \
	"$(grep -E '^[0-9] +0000:' <<<"$out")"
check "detect dgx-h100: GPU 2's topology row" same \
	"GPU2   NODE    NODE    PIX     PIX     SYS     SYS     SYS     SYS     NODE    SYS" \
	"$(grep '^GPU2 ' <<<"$out")"
check "detect dgx-h100: no warning but rule 10's (mlx5_9 is Ethernet)" same \
	"warning: the usable ports are InfiniBand (8) and Ethernet (1): NCCL_IB_HCA holds the InfiniBand ones (the larger group); left out: mlx5_9:1" \
	"$(cat "$work/dgx.err")"
json=$("$HOOK" --sysroot "$dgx" detect --json 2>/dev/null)
jq -e '(.gpus | length == 8) and (.gpus[2].pci == "0000:3a:00.0") and (.gpus[2].minor == 2)
       and (.gpus[2].nearest == ["mlx5_2", "mlx5_3"]) and (.gpus[2].topology.mlx5_2 == "PIX")
       and (.gpus[2].topology.mlx5_4 == "SYS") and (.gpus[6].numa_node == 1)
       and ([.devices[] | select(.name == "mlx5_2") | .pci_path] ==
            ["devices/pci0000:37/0000:37:01.0/0000:38:00.0/0000:39:01.0/0000:3b:00.0"])' \
	<<<"$json" >/dev/null && ok "detect --json dgx-h100: gpus and pci_path" ||
	not_ok_diag "detect --json dgx-h100" "$(jq -c '.gpus[2]' <<<"$json")"
printf '[node]\nnic_affinity = numa\n' >"$work/numa.conf"
check "detect dgx-h100, nic_affinity = numa: GPU 5's NICs are its NUMA node's" same \
	"5    0000:9d:00.0  GPU-a7f20d84-3c9e-4b51-86d2-e4b1a0c95f7d  5     1    mlx5_4,mlx5_5,mlx5_6,mlx5_7" \
	"$("$HOOK" --sysroot "$dgx" --config "$work/numa.conf" detect 2>/dev/null | grep '^5  ')"
seedgpu=$(node seed001-gpu)
"$HOOK" --sysroot "$seedgpu" detect --json 2>/dev/null |
	jq -e '[.gpus[] | [.index, .minor, (.nearest | join(","))]] ==
	       [[0,2,"mlx5_1,mlx5_2"],[1,3,"mlx5_1,mlx5_2"],[2,0,"mlx5_3,mlx5_4"],
	        [3,1,"mlx5_3,mlx5_4"],[4,6,"mlx5_5,mlx5_6"],[5,7,"mlx5_5,mlx5_6"],
	        [6,4,"mlx5_7,mlx5_8"],[7,5,"mlx5_7,mlx5_8"]]' >/dev/null &&
	ok "detect --json seed001-gpu: indexes in bus order, minors as the driver gave them" ||
	not_ok "detect --json seed001-gpu"
# a node without GPUs: no GPU section, an empty list (in a detect that shows its devices)
out=$("$HOOK" --sysroot "$seed" detect 2>/dev/null)
grep -q '^mlx5_1 ' <<<"$out" && ! grep -q '^GPU ' <<<"$out" &&
	[ "$("$HOOK" --sysroot "$seed" detect --json 2>/dev/null | jq -c .gpus)" == "[]" ] &&
	ok "detect without GPUs: no GPU section" || not_ok "detect without GPUs"
# the driver holds no GPU: one warning, no GPU rows
rm -r "$dgx/proc/driver"
out=$("$HOOK" --sysroot "$dgx" detect 2>&1 >/dev/null)
grep -q "^warning: 8 NVIDIA GPU(s) in sysfs ('$dgx/sys/bus/pci/devices/0000:18:00.0', ...) but no '$dgx/proc/driver/nvidia/gpus'" <<<"$out" &&
	"$HOOK" --sysroot "$dgx" detect 2>/dev/null | grep -q '^mlx5_0 ' &&
	! "$HOOK" --sysroot "$dgx" detect 2>/dev/null | grep -q '^GPU ' &&
	ok "detect: GPUs the driver does not hold get a warning" || not_ok_diag "detect: driver not loaded" "$out"

# ---- rule 9: the NICs nearest to the GPUs a container was given (dgx-h100) -----------------
dgx=$work/dgx9
python3 "$SRC/tests/mknode.py" "$SRC/tests/nodes/dgx-h100.json" "$dgx" >/dev/null
gspec() { printf '{"ociVersion":"1.0.2","process":{"args":["sh"],"env":["PATH=/bin"%s]},"linux":{"devices":[%s]}}\n' "$2" "$3" >"$1"; }
gspec "$work/g23.json" ',"NVIDIA_VISIBLE_DEVICES=2,3"' ''
check "rule 9: NVIDIA_VISIBLE_DEVICES=2,3 gets the NICs of their PCIe switch" same "NCCL_IB_HCA==mlx5_2:1,mlx5_3:1" \
	"$("$HOOK" --sysroot "$dgx" env --spec "$work/g23.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
"$HOOK" --sysroot "$dgx" env --explain --spec "$work/g23.json" 2>&1 >/dev/null | grep -q '^# mlx5_0:1 left out: rule 9: ' &&
	ok "rule 9: env --explain names rule 9 for the NICs left out" || not_ok "rule 9: env --explain"
gspec "$work/g04.json" ',"NVIDIA_VISIBLE_DEVICES=GPU-efc0520c-e2ee-e86d-8193-ef5cca3213fb,4"' ''
check "rule 9: a UUID and an index on two switches get both switches' NICs" same \
	"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_4:1,mlx5_5:1" \
	"$("$HOOK" --sysroot "$dgx" env --spec "$work/g04.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
gspec "$work/gnodes.json" '' '{"path":"/dev/nvidia6","type":"c","major":195,"minor":6},{"path":"/dev/nvidiactl","type":"c","major":195,"minor":255}'
check "rule 9: /dev/nvidia6 in linux.devices (a device plugin) gets GPU 6's NICs" same "NCCL_IB_HCA==mlx5_6:1,mlx5_7:1" \
	"$("$HOOK" --sysroot "$dgx" env --spec "$work/gnodes.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
all8="NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
gspec "$work/gall.json" ',"NVIDIA_VISIBLE_DEVICES=all"' ''
check "rule 9: all GPUs get every NIC" same "$all8" \
	"$("$HOOK" --sysroot "$dgx" env --spec "$work/gall.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
gspec "$work/gbad.json" ',"NVIDIA_VISIBLE_DEVICES=2,9"' ''
check "rule 9: a GPU the node does not have gets every NIC" same "$all8" \
	"$("$HOOK" --sysroot "$dgx" env --spec "$work/gbad.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
"$HOOK" --sysroot "$dgx" env --explain --spec "$work/gbad.json" 2>&1 >/dev/null | grep -q '^warning: .*9' &&
	ok "rule 9: ... with a warning naming it" || not_ok "rule 9: ... with a warning naming it"
printf '[node]\nnic_affinity = none\n' >"$work/noaff.conf"
check "rule 9: nic_affinity = none gives every NIC" same "$all8" \
	"$("$HOOK" --sysroot "$dgx" --config "$work/noaff.conf" env --spec "$work/g23.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
printf '[node]\nnic_affinity = numa\n' >"$work/numa.conf"
check "rule 9: nic_affinity = numa gives NUMA 0's NICs" same "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1" \
	"$("$HOOK" --sysroot "$dgx" --config "$work/numa.conf" env --spec "$work/g23.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"
gspec "$work/gdev.json" ',"NVIDIA_VISIBLE_DEVICES=2,3"' '{"path":"/dev/infiniband/uverbs6","type":"c","major":231,"minor":198}'
check "rule 8 before rule 9: a container holding uverbs6 gets mlx5_6 whatever its GPUs" same "NCCL_IB_HCA==mlx5_6:1" \
	"$("$HOOK" --sysroot "$dgx" env --spec "$work/gdev.json" 2>/dev/null | grep '^NCCL_IB_HCA=')"

# GPUDirect RDMA and nccl_fail_closed on the gdr-* sample nodes (a container holding the GPU)
gspec "$work/gone.json" ',"NVIDIA_VISIBLE_DEVICES=0"' ''
for n in gdr-peermem gdr-dmabuf gdr-none; do
	t=$(node $n)
	case $n in
	gdr-peermem) want='^# GPUDirect RDMA: peermem, by the peer-memory module (memory_peers/nv_mem)' ;;
	gdr-dmabuf) want='^# GPUDirect RDMA: dmabuf, by DMA-BUF: kernel 6.8.0-49-generic, the NVIDIA open kernel module 580.159.04' ;;
	gdr-none) want='^# GPUDirect RDMA: none, no peer-memory module is loaded .*the kernel (5.10.0-28-amd64) is older than 5.12' ;;
	esac
	"$HOOK" --sysroot "$t" env --explain --spec "$work/gone.json" 2>&1 >/dev/null | grep -q "$want" &&
		ok "env --explain on $n: the GPUDirect verdict" || not_ok "env --explain on $n: the GPUDirect verdict"
done
"$HOOK" --sysroot "$work/gdr-dmabuf" env --explain --spec "$work/gone.json" 2>&1 >/dev/null |
	grep -q '^# GPUDirect facts: kernel 6.8.0-49-generic; NVIDIA driver 580.159.04, open kernel module; peer memory: memory_peers/nv_mem no, memory_peers/nv_mem_nc no, module nvidia_peermem no$' &&
	ok "env --explain: the GPUDirect facts as read" || not_ok "env --explain: the GPUDirect facts as read"
printf '[containers]\nnccl_fail_closed = yes\n' >"$work/closed.conf"
check "nccl_fail_closed: NCCL_NET=IB where the plan gives RDMA" same "NCCL_NET=IB" \
	"$("$HOOK" --sysroot "$work/gdr-dmabuf" --config "$work/closed.conf" env --spec "$work/gone.json" 2>/dev/null | grep '^NCCL_NET=')"
check "without it: no NCCL_NET" same "" \
	"$("$HOOK" --sysroot "$work/gdr-dmabuf" env --spec "$work/gone.json" 2>/dev/null | grep '^NCCL_NET=')"
check "nccl_fail_closed on a node without RDMA: nothing at all" same "" \
	"$("$HOOK" --sysroot "$nordma" --config "$work/closed.conf" env 2>/dev/null)"

echo "# $PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]
