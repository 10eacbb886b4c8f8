#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Black-box tests of the spec-edit commands: precreate (config.json on stdin), the
# runtime shim (a fake runtime records how it was executed) and cdi. No root needed.
# Environment: ORH_HOOK (the built binary), ORH_SRCDIR (the source tree).
set -u
HOOK=${ORH_HOOK:?}
SRC=${ORH_SRCDIR:?}
T=$(mktemp -d /tmp/orh-spec-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$SRC/tests/tap.sh"
# jq-less JSON queries: pyq FILE EXPR (EXPR sees the document as d)
pyq() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
export -f pyq
# A check whose command is several, joined with &&, runs them in `bash -c '...'` (pyq is
# exported for it): a `check ... A && B` would check A alone and run B unchecked.

python3 "$SRC/tests/mknode.py" "$SRC/tests/nodes/seed001-roce.json" "$T/node" >/dev/null || exit 1
python3 "$SRC/tests/mknode.py" "$SRC/tests/nodes/nordma.json" "$T/nordma" >/dev/null || exit 1
printf '[node]\nmemlock = unlimited\n[containers]\nadd_ipc_lock = yes\nruntime = %s\n' \
	"$T/fake-runc" >"$T/node.conf"
printf '[containers]\nactivation = annotation\non_error = fail\nruntime = %s\n' \
	"$T/fake-runc" >"$T/strict.conf"
printf '[containers]\nactivation = sometimes\n' >"$T/broken.conf"
cat >"$T/fake-runc" <<EOF
#!/bin/sh
printf '%s\n' "\$0" "\$@" >"$T/fake-runc.args"
EOF
chmod 755 "$T/fake-runc"

# A spec as podman proposes it, with an unlimited rlimit jansson cannot hold natively.
cat >"$T/spec.json" <<'EOF'
{"ociVersion":"1.0.2","process":{"args":["sh"],"env":["PATH=/bin","NCCL_IB_HCA=mine"],
 "rlimits":[{"type":"RLIMIT_NOFILE","hard":18446744073709551615,"soft":1048576}],
 "capabilities":{"bounding":["CAP_CHOWN"],"effective":["CAP_CHOWN"],"permitted":["CAP_CHOWN"]}},
 "linux":{"resources":{"devices":[{"allow":false,"access":"rwm"}]},"namespaces":[{"type":"mount"}]},
 "annotations":{"io.example":"x"}}
EOF
sed 's/"io.example":"x"/"oci-rdma-hook\/enable":"false"/' "$T/spec.json" >"$T/optout.json"
sed 's/"io.example":"x"/"oci-rdma-hook\/enable":"true"/' "$T/spec.json" >"$T/optin.json"
sed 's/"io.example":"x"/"oci-rdma-hook\/enable":"yes"/' "$T/spec.json" >"$T/badann.json"

H=("$HOOK" --sysroot "$T/node" --config "$T/node.conf")

# ---- precreate --------------------------------------------------------------------
"${H[@]}" precreate <"$T/spec.json" >"$T/out.json" 2>"$T/err"
check "precreate exits 0" [ $? = 0 ]
check "precreate prints valid JSON" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out.json"
check "precreate keeps the user's NCCL_IB_HCA" \
	[ "$(pyq "$T/out.json" '[e for e in d["process"]["env"] if e.startswith("NCCL_IB_HCA=")]')" = "['NCCL_IB_HCA=mine']" ]
check "precreate puts no NCCL setting of the plan into PID 1's environment" \
	[ "$(pyq "$T/out.json" '[e for e in d["process"]["env"] if e.startswith("NCCL_")]')" = "['NCCL_IB_HCA=mine']" ]
# the settings reach /etc/nccl.conf through the nccl-conf hook, run from this binary with
# the config and sysroot the edit used; poststop removes what a read-only root needed
self_hooks() {
	python3 -c 'import json, os, sys
print(json.dumps({"createRuntime": [{"path": os.path.realpath(sys.argv[1]),
  "args": ["oci-rdma-hook"] + sys.argv[2:] + ["nccl-conf"], "timeout": 30}],
  "poststop": [{"path": os.path.realpath(sys.argv[1]),
  "args": ["oci-rdma-hook"] + sys.argv[2:] + ["poststop"], "timeout": 30}]}, sort_keys=True))' \
		"$HOOK" "$@"
}
spec_hooks() { pyq "$1" 'json.dumps(d.get("hooks"), sort_keys=True)'; }
check "precreate registers this binary's nccl-conf and poststop hooks, with --config and --sysroot" \
	[ "$(spec_hooks "$T/out.json")" = "$(self_hooks --config "$T/node.conf" --sysroot "$T/node")" ]
if capsh --has-p=cap_sys_resource 2>/dev/null; then
	check "precreate adds RLIMIT_MEMLOCK unlimited as 2^64-1" \
		grep -q '{"type":"RLIMIT_MEMLOCK","hard":18446744073709551615,"soft":18446744073709551615}' "$T/out.json"
else
	echo "# no CAP_SYS_RESOURCE here: the unlimited memlock case is checked below, clamped"
fi
# A runtime without CAP_SYS_RESOURCE cannot raise a hard limit: the edit asks only for
# what it can grant (the current hard limit), so the container still starts.
hard=$(ulimit -Hl)
if [ "$hard" != unlimited ] && command -v capsh >/dev/null; then
	# root drops the capability; a user without it (a package build) runs the edit as is
	nocap=(capsh --drop=cap_sys_resource --)
	capsh --has-p=cap_sys_resource 2>/dev/null || nocap=(bash)
	"${nocap[@]}" -c 'out=$1; shift; "$@" precreate <"$0" >"$out.clamped" 2>"$out.clamped.err"' \
		"$T/spec.json" "$T/out.json" "${H[@]}"
	check "precreate without CAP_SYS_RESOURCE clamps RLIMIT_MEMLOCK to the hard limit" \
		grep -q "{\"type\":\"RLIMIT_MEMLOCK\",\"hard\":$((hard * 1024)),\"soft\":$((hard * 1024))}" "$T/out.json.clamped"
	check "precreate says why it clamped" grep -q "RLIMIT_MEMLOCK lowered to the hard limit" "$T/out.json.clamped.err"
fi
check "precreate keeps the big RLIMIT_NOFILE value" \
	grep -q '{"type":"RLIMIT_NOFILE","hard":18446744073709551615,"soft":1048576}' "$T/out.json"
check "precreate adds 9 devices and 9 allow rules after the deny-all" \
	[ "$(pyq "$T/out.json" '(len(d["linux"]["devices"]), len(d["linux"]["resources"]["devices"]), d["linux"]["resources"]["devices"][0]["allow"])')" = "(9, 10, False)" ]
check "precreate adds CAP_IPC_LOCK (add_ipc_lock = yes)" \
	[ "$(pyq "$T/out.json" '[("CAP_IPC_LOCK" in d["process"]["capabilities"][s]) for s in ("bounding","effective","permitted")]')" = "[True, True, True]" ]
"${H[@]}" precreate <"$T/out.json" >"$T/out2.json" 2>/dev/null
# (two documents that cannot be read would compare equal: the edit's must hold its hooks)
check "precreate is idempotent (its output fed back comes out unchanged)" \
	bash -c 'a=$(pyq "$1" "json.dumps(d, sort_keys=True)") && [ "$a" = "$(pyq "$2" "json.dumps(d, sort_keys=True)")" ] &&
		grep -q "\"nccl-conf\"" <<<"$a"' _ "$T/out2.json" "$T/out.json"

"${H[@]}" precreate <"$T/optout.json" >"$T/out.json" 2>/dev/null
check "precreate: an opted-out spec comes back byte for byte" cmp -s "$T/optout.json" "$T/out.json"
"$HOOK" --sysroot "$T/nordma" --config "$T/node.conf" precreate <"$T/spec.json" >"$T/out.json" 2>/dev/null
check "precreate: a node without RDMA returns the spec byte for byte" cmp -s "$T/spec.json" "$T/out.json"
"$HOOK" --sysroot "$T/node" --config "$T/broken.conf" precreate <"$T/spec.json" >"$T/out.json" 2>"$T/err"
check "precreate: a broken config passes the spec through (exit 0)" \
	bash -c '[ "$1" = 0 ] && cmp -s "$2" "$3"' _ $? "$T/spec.json" "$T/out.json"
check "precreate: the broken config is reported" grep -q "activation" "$T/err"
"${H[@]}" precreate <"$T/badann.json" >"$T/out.json" 2>"$T/err"
check "precreate: a bad annotation under on_error=warn passes through" \
	bash -c '[ "$1" = 0 ] && cmp -s "$2" "$3"' _ $? "$T/badann.json" "$T/out.json"
check "precreate: the bad annotation is named" grep -q "oci-rdma-hook/enable" "$T/err"
# podman shows a failing precreate hook's exit status alone: a refused spec comes back with
# a first createRuntime hook that fails it, the reason on its stderr (runc's error shows it)
sed 's/"io.example":"x"/"oci-rdma-hook\/enable":"yes"},"hooks":{"createRuntime":[{"path":"\/bin\/true"}]/' \
	"$T/spec.json" >"$T/badann-hooks.json"
for f in badann badann-hooks; do
	"$HOOK" --sysroot "$T/node" --config "$T/strict.conf" precreate <"$T/$f.json" >"$T/out.json" 2>"$T/err"
	check "precreate ($f): a bad annotation under on_error=fail hands back a refusing spec (exit 0)" [ $? = 0 ]
	check "precreate ($f): ... whose first createRuntime hook is 'oci-rdma-hook refuse REASON'" \
		[ "$(pyq "$T/out.json" '(d["hooks"]["createRuntime"][0]["path"], d["hooks"]["createRuntime"][0]["args"][:2])')" = "('$(readlink -f "$HOOK")', ['oci-rdma-hook', 'refuse'])" ]
	check "precreate ($f): ... the reason names the annotation and on_error" \
		grep -q "precreate: annotation 'oci-rdma-hook/enable': value 'yes' is neither.*(on_error=fail)" \
		<<<"$(pyq "$T/out.json" 'd["hooks"]["createRuntime"][0]["args"][2]')"
	check "precreate ($f): ... and the spec is otherwise the input" \
		[ "$(pyq "$T/out.json" 'd["hooks"]["createRuntime"].pop(0) and json.dumps(d if d["hooks"]["createRuntime"] else {k: v for k, v in d.items() if k != "hooks"}, sort_keys=True)')" = "$(pyq "$T/$f.json" 'json.dumps(d, sort_keys=True)')" ]
done
check "precreate: the hook of the input is kept after the refusing one" \
	[ "$(pyq "$T/out.json" 'd["hooks"]["createRuntime"][1]')" = "{'path': '/bin/true'}" ]
reason=$(pyq "$T/out.json" 'd["hooks"]["createRuntime"][0]["args"][2]')
echo '{"ociVersion":"1.0.2","id":"c","pid":1,"bundle":"/"}' | "$HOOK" refuse "$reason" 2>"$T/err"
check "refuse: exits 1" [ $? = 1 ]
check "refuse: the reason is on stderr" [ "$(cat "$T/err")" = "oci-rdma-hook: error: $reason" ]
"$HOOK" --config "$T/broken.conf" refuse "$reason" </dev/null 2>/dev/null
check "refuse: reads no config: exits 1 with a broken one too" [ $? = 1 ]
"$HOOK" --sysroot "$T/node" --config "$T/strict.conf" precreate <"$T/spec.json" >"$T/out.json" 2>/dev/null
check "precreate: activation = annotation leaves an unannotated spec alone" cmp -s "$T/spec.json" "$T/out.json"
"$HOOK" --sysroot "$T/node" --config "$T/strict.conf" precreate <"$T/optin.json" >"$T/out.json" 2>/dev/null
check "precreate: activation = annotation edits an annotated spec" grep -q '"nccl-conf"' "$T/out.json"
sed 's/"io.example":"x"/"io.kubernetes.cri.container-type":"sandbox","oci-rdma-hook\/enable":"true"/' "$T/spec.json" >"$T/sandbox.json"
"${H[@]}" precreate <"$T/sandbox.json" >"$T/out.json" 2>/dev/null
check "precreate: a pod sandbox (containerd's mark) comes back byte for byte, even asking" cmp -s "$T/sandbox.json" "$T/out.json"
sed 's/"io.example":"x"/"io.kubernetes.cri-o.ContainerType":"sandbox"/' "$T/spec.json" >"$T/sandbox2.json"
"${H[@]}" precreate <"$T/sandbox2.json" >"$T/out.json" 2>/dev/null
check "precreate: a pod sandbox (CRI-O's mark) comes back byte for byte" cmp -s "$T/sandbox2.json" "$T/out.json"
echo '{"process":' | "${H[@]}" precreate >"$T/out.json" 2>/dev/null
check "precreate: malformed JSON is passed through unchanged" [ "$(cat "$T/out.json")" = '{"process":' ]
"${H[@]}" precreate extra </dev/null >/dev/null 2>&1
check "precreate: an extra argument is a usage error (exit 2)" [ $? = 2 ]

# A spec that already lists a node the plan makes, with other numbers: the entry is kept
# as the user wrote it, the grant is for the node's numbers, and the mismatch is named.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
d["linux"]["devices"] = [{"path":"/dev/infiniband/uverbs1","type":"c","major":231,"minor":250}]
json.dump(d, open(sys.argv[2], "w"))' "$T/spec.json" "$T/othernum.json"
"${H[@]}" precreate <"$T/othernum.json" >"$T/out.json" 2>"$T/err"
check "precreate: uverbs1 listed as 231:250 is kept as listed" \
	[ "$(pyq "$T/out.json" '[(e["major"], e["minor"]) for e in d["linux"]["devices"] if e["path"] == "/dev/infiniband/uverbs1"]')" = "[(231, 250)]" ]
check "precreate: ... the grant is for the node's 231:193" \
	[ "$(pyq "$T/out.json" '[r["minor"] for r in d["linux"]["resources"]["devices"] if r.get("major") == 231 and r["minor"] in (193, 250)]')" = "[193]" ]
check "precreate: ... and a warning names the path, the spec's numbers and the node's" \
	grep -q "'/dev/infiniband/uverbs1' .*231:250.*231:193" "$T/err"

# A device number sysfs names that is not an RDMA one (here /dev/kmsg's) reaches no spec
# edit and no CDI spec: discovery refuses it with a warning naming the file and value.
cp -a "$T/node" "$T/kmsgnode"
echo 1:11 >"$T/kmsgnode/sys/class/infiniband_verbs/uverbs2/dev"
"$HOOK" --sysroot "$T/kmsgnode" --config "$T/node.conf" precreate <"$T/spec.json" >"$T/out.json" 2>"$T/err"
check "precreate: uverbs2/dev reading 1:11 gives no 1:11 device and no 1:11 grant" \
	[ "$(pyq "$T/out.json" '[e for e in d["linux"]["devices"] + d["linux"]["resources"]["devices"] if e.get("major") == 1]')" = "[]" ]
check "precreate: ... the other devices are still added" \
	[ "$(pyq "$T/out.json" 'sorted(e["path"] for e in d["linux"]["devices"])[:2]')" = "['/dev/infiniband/rdma_cm', '/dev/infiniband/uverbs1']" ]
check "precreate: ... and the refusal names the file and the value" \
	grep -q "uverbs2/dev': 1:11 is not" "$T/err"
"$HOOK" --sysroot "$T/kmsgnode" --config "$T/node.conf" cdi >"$T/cdi-kmsg.json" 2>"$T/err"
check "cdi: uverbs2/dev reading 1:11 gives no 1:11 device node" \
	[ "$(pyq "$T/cdi-kmsg.json" '[n for x in d["devices"] for n in x["containerEdits"].get("deviceNodes", []) if n.get("major") == 1]')" = "[]" ]
check "cdi: ... and says why" grep -q "uverbs2/dev': 1:11 is not" "$T/err"

# ---- runtime shim -----------------------------------------------------------------
ln -s "$HOOK" "$T/oci-rdma-runtime"
mkdir -p "$T/bundle"
shim() { OCI_RDMA_HOOK_CONFIG=$1 OCI_RDMA_HOOK_SYSROOT=$T/node "$T/oci-rdma-runtime" "${@:2}"; }

cp "$T/spec.json" "$T/bundle/config.json"
chmod 0640 "$T/bundle/config.json"
shim "$T/node.conf" --root /run/x --log "$T/log.json" --log-format json create --bundle "$T/bundle" --pid-file "$T/pid" c1 2>"$T/err"
check "shim create exits with the runtime's status" [ $? = 0 ]
check "shim passes every argument to the runtime, in order" \
	[ "$(tr '\n' ' ' <"$T/fake-runc.args")" = "$T/fake-runc --root /run/x --log $T/log.json --log-format json create --bundle $T/bundle --pid-file $T/pid c1 " ]
check "shim create edits config.json" grep -q '"nccl-conf"' "$T/bundle/config.json"
check "shim: no NCCL setting of the plan in PID 1's environment" \
	[ "$(pyq "$T/bundle/config.json" '[e for e in d["process"]["env"] if e.startswith("NCCL_")]')" = "['NCCL_IB_HCA=mine']" ]
check "shim keeps config.json's mode" [ "$(stat -c %a "$T/bundle/config.json")" = 640 ]
check "shim leaves no temporary file" [ "$(ls -A "$T/bundle")" = config.json ]
check "shim writes nothing to stderr on success" [ ! -s "$T/err" ]

cp "$T/sandbox.json" "$T/bundle/config.json"
shim "$T/node.conf" create -b "$T/bundle" c2s 2>/dev/null
check "shim: a pod sandbox's config.json stays byte for byte" cmp -s "$T/sandbox.json" "$T/bundle/config.json"
cp "$T/optout.json" "$T/bundle/config.json"
shim "$T/node.conf" create -b "$T/bundle" c2 2>/dev/null
check "shim: an opted-out config.json stays byte for byte" cmp -s "$T/optout.json" "$T/bundle/config.json"
cp "$T/spec.json" "$T/bundle/config.json"
shim "$T/node.conf" --root=/run/y run --bundle="$T/bundle" -d c3 2>/dev/null
check "shim run --bundle=DIR edits config.json" grep -q '"nccl-conf"' "$T/bundle/config.json"
cp "$T/spec.json" "$T/bundle/config.json"
(cd "$T/bundle" && shim "$T/node.conf" create c4 2>/dev/null)
check "shim create without --bundle uses the working directory" grep -q '"nccl-conf"' "$T/bundle/config.json"
cp "$T/spec.json" "$T/bundle/config.json"
shim "$T/node.conf" --log "$T/bundle" state c5 2>/dev/null
check "shim passes other commands through untouched" cmp -s "$T/spec.json" "$T/bundle/config.json"
check "shim: state reached the runtime" [ "$(sed -n 4p "$T/fake-runc.args")" = state ]
# A broken config falls back to the defaults (runtime = runc, the real one): only the
# bundle is checked here.
shim "$T/broken.conf" create --bundle "$T/bundle" c6 >/dev/null 2>&1
check "shim: a broken config leaves config.json alone" cmp -s "$T/spec.json" "$T/bundle/config.json"
cp "$T/badann.json" "$T/bundle/config.json"
shim "$T/strict.conf" create --bundle "$T/bundle" c7 2>"$T/err"
check "shim: on_error=fail with a bad annotation fails before the runtime" [ $? = 1 ]
check "shim: the failure is on stderr" grep -q "oci-rdma-hook/enable" "$T/err"
check "shim: ... and config.json is unchanged" cmp -s "$T/badann.json" "$T/bundle/config.json"
# containerd and docker report the last error of runc's --log file: the shim appends its
# reason there, in the format asked for, after what is already there
echo '{"level":"info","msg":"earlier","time":"2024-01-01T00:00:00Z"}' >"$T/log.json"
shim "$T/strict.conf" --root /run/x --log "$T/log.json" --log-format json create \
	--bundle "$T/bundle" c7j 2>/dev/null
check "shim: on_error=fail with --log-format json exits 1" [ $? = 1 ]
check "shim: ... appends one runc JSON error line with the reason" python3 - "$T/log.json" <<'PY'
import datetime, json, re, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "" and len(lines) == 3, lines
e = json.loads(lines[1])
assert sorted(e) == ["level", "msg", "time"] and e["level"] == "error", e
assert re.fullmatch(r"oci-rdma-runtime: annotation 'oci-rdma-hook/enable': value 'yes' is "
                    r"neither .*; failing the container \(on_error=fail\)", e["msg"]), e
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", e["time"]), e
t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
assert abs((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()) < 60, e
assert lines[1] == json.dumps(e, sort_keys=True, separators=(",", ":")), lines[1]
PY
check "shim: ... the mode of a log it creates is 0600" bash -c \
	'rm -f "$1/new.log"; OCI_RDMA_HOOK_CONFIG=$1/strict.conf OCI_RDMA_HOOK_SYSROOT=$1/node \
	"$1/oci-rdma-runtime" --log "$1/new.log" create --bundle "$1/bundle" c7m 2>/dev/null
	[ "$(stat -c %a "$1/new.log")" = 600 ]' _ "$T"
check "shim: ... runc's text format without --log-format json" \
	grep -Eqx 'time="[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z" level=error msg="oci-rdma-runtime: annotation .oci-rdma-hook/enable.: value .yes. is neither .*; failing the container \(on_error=fail\)"' "$T/new.log"
ln -sf "$T/elsewhere.log" "$T/link.log"
shim "$T/strict.conf" --log "$T/link.log" --log-format json create --bundle "$T/bundle" c7l 2>"$T/err"
check "shim: a --log that is a symbolic link is not followed, and the refusal stands" \
	bash -c '[ "$1" = 1 ] && [ ! -e "$2" ]' _ $? "$T/elsewhere.log"
check "shim: ... the reason is still on stderr" grep -q "oci-rdma-hook/enable" "$T/err"
mkfifo "$T/fifo.log"
timeout 10 bash -c 'OCI_RDMA_HOOK_CONFIG=$1/strict.conf OCI_RDMA_HOOK_SYSROOT=$1/node \
	"$1/oci-rdma-runtime" --log "$1/fifo.log" create --bundle "$1/bundle" c7f 2>/dev/null' _ "$T"
check "shim: a --log FIFO nobody reads does not hold the refusal up (exit 1)" [ $? = 1 ]
cp "$T/spec.json" "$T/bundle/config.json"
printf '[containers]\nruntime = %s\n' "$T/oci-rdma-runtime" >"$T/loop.conf"
shim "$T/loop.conf" state c8 2>"$T/err"
check "shim refuses to execute itself" bash -c '[ "$1" = 1 ] && grep -q "itself" "$2"' _ $? "$T/err"
printf '[containers]\nruntime = no-such-runtime-orh\n' >"$T/missing.conf"
PATH=$T:$PATH shim "$T/missing.conf" state c9 2>"$T/err"
check "shim looks the runtime up in its fixed PATH only" \
	bash -c '[ "$1" = 1 ] && grep -q "not found" "$2"' _ $? "$T/err"
: >"$T/log.json"
shim "$T/missing.conf" --log "$T/log.json" --log-format json delete c9 2>/dev/null
check "shim: a runtime not found is reported in runc's --log file too" \
	[ "$(pyq "$T/log.json" 'd["msg"]')" = "oci-rdma-runtime: runtime 'no-such-runtime-orh' not found in /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" ]
cp "$T/spec.json" "$T/bundle/config.json"
"${H[@]}" runtime create --bundle "$T/bundle" c10 2>/dev/null
check "oci-rdma-hook runtime ARGS works like the shim" grep -q '"nccl-conf"' "$T/bundle/config.json"
cp "$T/spec.json" "$T/bundle/config.json"
OCI_RDMA_HOOK_CONFIG=$T/node.conf OCI_RDMA_HOOK_SYSROOT=$T/kmsgnode "$T/oci-rdma-runtime" \
	create --bundle "$T/bundle" c11 2>/dev/null
check "shim: uverbs2/dev reading 1:11 gives no 1:11 device and no 1:11 grant, the rest is added" \
	[ "$(pyq "$T/bundle/config.json" '([e for e in d["linux"]["devices"] + d["linux"]["resources"]["devices"] if e.get("major") == 1], len(d["linux"]["devices"]))')" = "([], 8)" ]

# ---- opt-in through process.env ----------------------------------------------------
# A spec as containerd's CRI plugin writes it for a Kubernetes pod container: the pod's
# `env:` in process.env, CRI annotations only (pod annotations do not reach it), the
# pod's network namespace by path. With activation = annotation the variable
# OCI_RDMA_HOOK_ENABLE=true asks, as the annotation would.
cri_spec() { # FILE [ENV-ENTRY...]: the CRI spec with these entries added to process.env
	python3 - "$@" <<'EOF'
import json, sys
path, extra = sys.argv[1], sys.argv[2:]
d = {"ociVersion": "1.1.0",
     "process": {"user": {"uid": 0, "gid": 0, "additionalGids": [0]},
                 "args": ["/bin/sh", "-c", "train"], "cwd": "/",
                 "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                         "HOSTNAME=trainer-0", "NCCL_IB_HCA=mine"] + extra +
                        ["KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"],
                 "capabilities": {"bounding": ["CAP_CHOWN"], "effective": ["CAP_CHOWN"],
                                  "permitted": ["CAP_CHOWN"]},
                 "apparmorProfile": "cri-containerd.apparmor.d", "oomScoreAdj": 1000},
     "root": {"path": "rootfs"},
     "mounts": [{"destination": "/proc", "type": "proc", "source": "proc",
                 "options": ["nosuid", "noexec", "nodev"]}],
     "annotations": {"io.kubernetes.cri.container-name": "trainer",
                     "io.kubernetes.cri.container-type": "container",
                     "io.kubernetes.cri.image-name": "registry.example/trainer:1",
                     "io.kubernetes.cri.sandbox-id": "5d1f0c0a9b",
                     "io.kubernetes.cri.sandbox-name": "trainer-0",
                     "io.kubernetes.cri.sandbox-namespace": "default"},
     "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]},
               "cgroupsPath": "kubepods-besteffort-pod1.slice:cri-containerd:5d1f0c0a9b",
               "namespaces": [{"type": "pid"}, {"type": "ipc", "path": "/proc/1/ns/ipc"},
                              {"type": "uts", "path": "/proc/1/ns/uts"}, {"type": "mount"},
                              {"type": "network", "path": "/var/run/netns/cni-orh-absent"}]}}
json.dump(d, open(path, "w"), indent=2)
EOF
}
cri_spec "$T/cri.json"
cri_spec "$T/cri-optin.json" OCI_RDMA_HOOK_ENABLE=true
cri_spec "$T/cri-preset.json" OCI_RDMA_HOOK_ENABLE=true OCI_RDMA_HOOK_PRESET=none
cri_spec "$T/cri-bad.json" OCI_RDMA_HOOK_ENABLE=yes
cri_spec "$T/cri-badpreset.json" OCI_RDMA_HOOK_ENABLE=true OCI_RDMA_HOOK_PRESET=../../x
cri_spec "$T/cri-optout.json" OCI_RDMA_HOOK_ENABLE=false
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["annotations"]["oci-rdma-hook/enable"] = "false"
json.dump(d, open(sys.argv[2], "w"))' "$T/cri-optin.json" "$T/cri-conflict.json"
printf '[containers]\nactivation = annotation\nrequest_env = no\n' >"$T/noenv.conf"
S=("$HOOK" --sysroot "$T/node" --config "$T/strict.conf")

"${S[@]}" precreate <"$T/cri-optin.json" >"$T/out.json" 2>"$T/err"
check "precreate, CRI spec, activation = annotation: OCI_RDMA_HOOK_ENABLE=true exits 0" [ $? = 0 ]
check "... adds the 9 devices and their allow rules" \
	[ "$(pyq "$T/out.json" '(len(d["linux"]["devices"]), len(d["linux"]["resources"]["devices"]))')" = "(9, 10)" ]
check "... registers the nccl-conf hook that writes the plan's settings" \
	[ "$(spec_hooks "$T/out.json")" = "$(self_hooks --config "$T/strict.conf" --sysroot "$T/node")" ]
check "... leaves the pod's env as it was, the request among it" \
	[ "$(pyq "$T/out.json" 'd["process"]["env"]')" = "$(pyq "$T/cri-optin.json" 'd["process"]["env"]')" ]
"${S[@]}" precreate <"$T/cri.json" >"$T/out.json" 2>/dev/null
check "precreate, CRI spec without the variable: byte for byte" cmp -s "$T/cri.json" "$T/out.json"
"${S[@]}" precreate <"$T/cri-bad.json" >"$T/out.json" 2>"$T/err"
check "precreate: OCI_RDMA_HOOK_ENABLE=yes under on_error=fail hands back a refusing spec (exit 0)" \
	bash -c '[ "$1" = 0 ] && [ "$(pyq "$2" "d[\"hooks\"][\"createRuntime\"][0][\"args\"][1]")" = refuse ]' \
	_ $? "$T/out.json"
check "... naming the process.env entry and the value" \
	grep -q "process.env entry 'OCI_RDMA_HOOK_ENABLE': value 'yes' is neither 'true' nor 'false'" "$T/err"
"${H[@]}" precreate <"$T/cri-bad.json" >"$T/out.json" 2>"$T/err"
check "precreate: the same under on_error=warn passes the spec through" \
	bash -c '[ "$1" = 0 ] && cmp -s "$2" "$3"' _ $? "$T/cri-bad.json" "$T/out.json"
"${S[@]}" precreate <"$T/cri-badpreset.json" >"$T/out.json" 2>"$T/err"
check "precreate: OCI_RDMA_HOOK_PRESET=../../x is refused as an unknown preset (a refusing spec)" \
	bash -c '[ "$1" = 0 ] && grep -q "process.env entry .OCI_RDMA_HOOK_PRESET.: unknown preset .\.\./\.\./x." "$2" &&
		[ "$(pyq "$3" "d[\"hooks\"][\"createRuntime\"][0][\"args\"][1]")" = refuse ]' _ $? "$T/err" "$T/out.json"
"${H[@]}" precreate <"$T/cri-optout.json" >"$T/out.json" 2>/dev/null
check "precreate, activation = always: OCI_RDMA_HOOK_ENABLE=false opts out, byte for byte" \
	cmp -s "$T/cri-optout.json" "$T/out.json"
"${S[@]}" precreate <"$T/cri-conflict.json" >"$T/out.json" 2>"$T/err"
check "precreate: the annotation enable=false wins over OCI_RDMA_HOOK_ENABLE=true" \
	cmp -s "$T/cri-conflict.json" "$T/out.json"
check "... and the conflict is named" \
	grep -q "process.env entry 'OCI_RDMA_HOOK_ENABLE=true' ignored: the annotation 'oci-rdma-hook/enable=false' is set, and wins" "$T/err"
"$HOOK" --sysroot "$T/node" --config "$T/noenv.conf" precreate <"$T/cri-optin.json" >"$T/out.json" 2>"$T/err"
check "precreate, request_env = no: the variable does not ask, byte for byte" \
	cmp -s "$T/cri-optin.json" "$T/out.json"
check "... and says why" grep -q "ignored: the node config has request_env = no" "$T/err"

# request_scope = allocated under on_error = fail: a request from a container that holds no
# uverbs node is the node's policy, not a failure: it starts unchanged, with a warning
printf '[containers]\nactivation = annotation\nrequest_scope = allocated\non_error = fail\nruntime = %s\n' \
	"$T/fake-runc" >"$T/allocated.conf"
A=("$HOOK" --sysroot "$T/node" --config "$T/allocated.conf")
"${A[@]}" precreate <"$T/cri-optin.json" >"$T/out.json" 2>"$T/err"
check "precreate, request_scope = allocated, on_error = fail: OCI_RDMA_HOOK_ENABLE=true with no device exits 0" \
	[ $? = 0 ]
check "... byte for byte (no refusing hook)" cmp -s "$T/cri-optin.json" "$T/out.json"
check "... with a warning naming the request and request_scope" \
	grep -q "process.env entry 'OCI_RDMA_HOOK_ENABLE=true' not served: request_scope = allocated" "$T/err"
cp "$T/cri-optin.json" "$T/bundle/config.json"
rm -f "$T/fake-runc.args"
shim "$T/allocated.conf" create --bundle "$T/bundle" c14 2>"$T/err"
# (during create the shim's warnings go to syslog only: its stderr may be the container's)
check "shim, the same: config.json byte for byte, the runtime ran (create c14), nothing on stderr" \
	bash -c 'cmp -s "$1" "$2" && [ "$(sed -n 2p "$3")" = create ] && grep -qx c14 "$3" && [ ! -s "$4" ]' \
	_ "$T/cri-optin.json" "$T/bundle/config.json" "$T/fake-runc.args" "$T/err"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["linux"]["devices"] = [{"path": "/dev/infiniband/uverbs3", "type": "c", "major": 231, "minor": 195}]
json.dump(d, open(sys.argv[2], "w"))' "$T/cri-optin.json" "$T/cri-held.json"
"${A[@]}" precreate <"$T/cri-held.json" >"$T/out.json" 2>"$T/err"
check "precreate, request_scope = allocated: the request of a container holding uverbs3 adds rdma_cm only" \
	[ "$(pyq "$T/out.json" '[e["path"] for e in d["linux"]["devices"]]')" = "['/dev/infiniband/uverbs3', '/dev/infiniband/rdma_cm']" ]
"${A[@]}" env --spec "$T/cri-held.json" >"$T/out.txt" 2>/dev/null
check "... and NCCL_IB_HCA names mlx5_3 only" grep -qx 'NCCL_IB_HCA==mlx5_3:1' "$T/out.txt"

# env --spec: the same decision, and why
"${S[@]}" env --explain --spec "$T/cri-preset.json" >"$T/out.txt" 2>&1
check "env --spec, CRI spec: activated, naming the variable that asked" \
	grep -qx '# activated: the container asked (OCI_RDMA_HOOK_ENABLE=true in process.env)' "$T/out.txt"
check "... and the preset it picked" grep -qx '# preset: none' "$T/out.txt"
"${H[@]}" env --explain --spec "$T/cri-optout.json" >"$T/out.txt" 2>&1
check "env --spec: OCI_RDMA_HOOK_ENABLE=false is named as an opt-out" \
	grep -q '^# not activated: the container opted out (OCI_RDMA_HOOK_ENABLE=false in process.env)' "$T/out.txt"
"${H[@]}" env --explain --spec "$T/optout.json" >"$T/out.txt" 2>&1
check "env --spec: the annotation enable=false is named as an opt-out" \
	grep -q '^# not activated: the container opted out (oci-rdma-hook/enable=false)' "$T/out.txt"

cp "$T/cri-optin.json" "$T/bundle/config.json"
rm -f "$T/fake-runc.args"
shim "$T/strict.conf" create --bundle "$T/bundle" c12 2>"$T/err"
check "shim, CRI spec, activation = annotation: OCI_RDMA_HOOK_ENABLE=true is served" \
	[ "$(pyq "$T/bundle/config.json" '(len(d["linux"]["devices"]), [h["args"][-1] for h in d["hooks"]["createRuntime"]])')" = "(9, ['nccl-conf'])" ]
check "... and the runtime ran (create c12)" \
	bash -c '[ "$(sed -n 2p "$1")" = create ] && grep -qx c12 "$1"' _ "$T/fake-runc.args"
cp "$T/cri.json" "$T/bundle/config.json"
shim "$T/strict.conf" create --bundle "$T/bundle" c13 2>/dev/null
check "shim, CRI spec without the variable: config.json byte for byte" \
	cmp -s "$T/cri.json" "$T/bundle/config.json"
cp "$T/cri-bad.json" "$T/bundle/config.json"
shim "$T/strict.conf" create --bundle "$T/bundle" c14 2>"$T/err"
check "shim: OCI_RDMA_HOOK_ENABLE=yes under on_error=fail fails before the runtime" \
	bash -c '[ "$1" = 1 ] && grep -q "process.env entry .OCI_RDMA_HOOK_ENABLE." "$2"' _ $? "$T/err"
check "... and config.json is unchanged" cmp -s "$T/cri-bad.json" "$T/bundle/config.json"

# ---- cdi --------------------------------------------------------------------------
"${H[@]}" cdi >"$T/cdi.json"
check "cdi prints the spec" [ "$(pyq "$T/cdi.json" '(d["cdiVersion"], d["kind"])')" = "('0.5.0', 'rdma.oci-rdma-hook.io/hca')" ]
check "cdi: one device per chosen HCA, then all" \
	[ "$(pyq "$T/cdi.json" '" ".join(x["name"] for x in d["devices"])')" = "mlx5_1 mlx5_2 mlx5_3 mlx5_4 mlx5_5 mlx5_6 mlx5_7 mlx5_8 all" ]
check "cdi: a device holds its uverbs node and rdma_cm" \
	[ "$(pyq "$T/cdi.json" '[n["path"] for n in d["devices"][2]["containerEdits"]["deviceNodes"]]')" = "['/dev/infiniband/uverbs3', '/dev/infiniband/rdma_cm']" ]
check "cdi: no env edit anywhere (it would replace the user's values and fix the host's interface)" \
	[ "$(pyq "$T/cdi.json" '[x for x in [d["containerEdits"]] + [e["containerEdits"] for e in d["devices"]] if "env" in x]')" = "[]" ]
# the spec-wide createRuntime hook that gives memlock (CDI has no rlimit edit) and writes
# /etc/nccl.conf: this binary, with the config and sysroot the spec came from, made absolute
cdi_hook() { pyq "$1" 'json.dumps(d["containerEdits"].get("hooks"), sort_keys=True)'; }
want_hook() {
	python3 -c 'import json, os, sys
print(json.dumps([{"hookName": "createRuntime", "path": os.path.realpath(sys.argv[1]),
                   "args": ["oci-rdma-hook"] + sys.argv[2:] + ["cdi-createRuntime"]}], sort_keys=True))' "$HOOK" "$@"
}
check "cdi: the hook runs this binary's cdi-createRuntime with --config and --sysroot" \
	[ "$(cdi_hook "$T/cdi.json")" = "$(want_hook --config "$T/node.conf" --sysroot "$T/node")" ]
TP=$(cd "$T" && pwd -P)
printf '[node]\nsysroot = %s\n' "$T/node" >"$T/sysroot.conf"
(cd "$T" && "$HOOK" --config sysroot.conf cdi >"$T/cdi-rel.json" 2>/dev/null)
check "cdi: a relative --config becomes absolute; a sysroot from the config is not repeated" \
	[ "$(cdi_hook "$T/cdi-rel.json")" = "$(want_hook --config "$TP/sysroot.conf")" ]
(cd "$T" && "$HOOK" --sysroot=node cdi >"$T/cdi-rel.json" 2>/dev/null)
check "cdi: without --config the hook reads the default config too; --sysroot made absolute" \
	[ "$(cdi_hook "$T/cdi-rel.json")" = "$(want_hook --sysroot "$TP/node")" ]
"${H[@]}" cdi --output "$T/out-cdi.json"
check "cdi --output writes the same spec (not empty)" \
	bash -c '[ -s "$1" ] && cmp -s "$1" "$2"' _ "$T/cdi.json" "$T/out-cdi.json"
check "cdi --output file is 0644" [ "$(stat -c %a "$T/out-cdi.json")" = 644 ]
"$HOOK" --sysroot "$T/nordma" --config "$T/node.conf" cdi --output "$T/none.json" 2>/dev/null
check "cdi on a node without RDMA fails and writes nothing" \
	bash -c '[ "$1" = 1 ] && [ ! -e "$2" ]' _ $? "$T/none.json"
"${H[@]}" cdi --bogus >/dev/null 2>&1
check "cdi: an unknown option is a usage error (exit 2)" [ $? = 2 ]

# ---- cdi-memlock (the hook the CDI spec carries) ----------------------------------
# A process started at 512 KiB soft / 2 MiB hard stands for the container: in a mount
# namespace of its own (and a user namespace when not root) where the bundle's rootfs is
# bind-mounted onto itself, as runc leaves the container for createRuntime. The node's
# memlock is 2 MiB, which raises the soft limit without CAP_SYS_RESOURCE.
printf '[node]\nmemlock = 2M\n' >"$T/memlock.conf"
# (image_check = warn: the stand-in's root is empty, no RDMA userspace, which on_error = fail
# would refuse by itself)
printf '[node]\nmemlock = 2M\n[containers]\nactivation = annotation\non_error = fail\nimage_check = warn\n' \
	>"$T/memlock-strict.conf"
mkdir -p "$T/cdib/rootfs"
UNSHARE=(unshare -m --propagation private)
[ "$(id -u)" = 0 ] || UNSHARE=(unshare -Urm --propagation private)
TARGET=""
target() {
	local i
	[ -n "$TARGET" ] && kill "$TARGET" 2>/dev/null && wait "$TARGET" 2>/dev/null
	(ulimit -Sl 512 && ulimit -Hl 2048 && exec "${UNSHARE[@]}" sh -c \
		'mount --bind "$1" "$1" && exec sleep 60' _ "$T/cdib/rootfs") &
	TARGET=$!
	for i in $(seq 1 100); do
		[ "$(cat "/proc/$TARGET/comm" 2>/dev/null)" = sleep ] && return 0
		sleep 0.05
	done
	return 1
}
memlock_of() { awk '/^Max locked memory/ { print $4, $5 }' "/proc/$1/limits"; }
# conf_is_plan CONF FILE [LEAVE-OUT]: the NCCL_* lines of FILE are the plan `env` gives with
# CONF, sorted, but the lines matching LEAVE-OUT (a grep pattern) on both sides; and that
# plan is not empty (two empty sides would be alike whatever was written)
conf_is_plan() {
	local want got
	want=$("$HOOK" --sysroot "$T/node" --config "$1" env | grep -v -- "${3:-^$}" | sort)
	got=$(grep '^NCCL_' "$2" 2>/dev/null | grep -v -- "${3:-^$}" | sort)
	[ -n "$want" ] && [ "$want" = "$got" ] && return 0
	diff <(echo "$want") <(echo "$got") | sed 's/^/# /'
	return 1
}
cdi_memlock() { # CONF PID [SPEC]: run the hook; stderr in $T/err, status in $RC
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["root"] = {"path": "rootfs"}
json.dump(d, open(sys.argv[2], "w"))' "${3:-$T/spec.json}" "$T/cdib/config.json"
	printf '{"ociVersion":"1.0.2","id":"cdi1","status":"created","pid":%s,"bundle":"%s"}' \
		"$2" "$T/cdib" | "$HOOK" --sysroot "$T/node" --config "$1" "${STAGE:-cdi-memlock}" \
		2>"$T/err"
	RC=$?
}
hard=$(ulimit -Hl)
if ! "${UNSHARE[@]}" true 2>/dev/null; then
	echo "# no mount namespace can be made here: the cdi-memlock raising cases are not run"
elif [ "$hard" = unlimited ] || [ "$hard" -ge 2048 ]; then
	target
	cdi_memlock "$T/memlock-strict.conf" "$TARGET"
	check "cdi-memlock exits 0" [ "$RC" = 0 ]
	check "cdi-memlock raises memlock to the node's 2 MiB, soft and hard, with no annotation" \
		[ "$(memlock_of "$TARGET")" = "2097152 2097152" ]
	check "cdi-memlock logs one summary line" \
		grep -qx "oci-rdma-hook: container cdi1: cdi-memlock: memlock raised: 2097152/2097152 bytes" "$T/err"
	target
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["process"]["rlimits"].append({"type": "RLIMIT_MEMLOCK", "soft": 524288, "hard": 2097152})
json.dump(d, open(sys.argv[2], "w"))' "$T/spec.json" "$T/memlock-spec.json"
	cdi_memlock "$T/memlock.conf" "$TARGET" "$T/memlock-spec.json"
	check "cdi-memlock leaves a spec's RLIMIT_MEMLOCK as given" \
		[ "$(memlock_of "$TARGET")" = "524288 2097152" ]
	check "... and says so" \
		grep -q "cdi-memlock: the spec sets RLIMIT_MEMLOCK; left as given" "$T/err"
	check "... and exits 0" [ "$RC" = 0 ]
	# a host process (no mount namespace of its own, the rootfs not mounted) gets nothing
	(ulimit -Sl 512 && ulimit -Hl 2048 && exec sleep 60) &
	host=$!
	cdi_memlock "$T/memlock.conf" "$host"
	check "cdi-memlock leaves a host process's memlock as it was" \
		[ "$(memlock_of "$host")" = "524288 2097152" ]
	check "... and says which pid and why" \
		grep -q "cdi-memlock: container process: pid $host is not the container of this bundle: it shares the hook's mount namespace" "$T/err"
	kill "$host" 2>/dev/null
	wait "$host" 2>/dev/null
	target
	cdi_memlock "$T/broken.conf" "$TARGET"
	check "cdi-memlock with a broken config leaves the container unchanged" \
		[ "$(memlock_of "$TARGET")" = "524288 2097152" ]
	check "... and says so" grep -q "container left unchanged" "$T/err"
	check "... and exits 0" [ "$RC" = 0 ]
	# cdi-createRuntime (what the CDI spec carries now): memlock and /etc/nccl.conf, with
	# NCCL_IB_HCA naming the ports of the devices the container was given
	with_devs() { # CDI-DEVICE OUT: the spec with that CDI device's nodes in linux.devices
		python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))
dev = [x for x in c["devices"] if x["name"] == sys.argv[3]][0]
d["linux"]["devices"] = [{"path": n["path"], "type": "c", "major": n["major"],
                          "minor": n["minor"]} for n in dev["containerEdits"]["deviceNodes"]]
json.dump(d, open(sys.argv[4], "w"))' "$T/spec.json" "$T/cdi.json" "$1" "$2"
	}
	with_devs all "$T/cdi-all.json"
	with_devs mlx5_3 "$T/cdi-one.json"
	rm -rf "$T/cdib/rootfs/etc"
	target
	STAGE=cdi-createRuntime cdi_memlock "$T/memlock.conf" "$TARGET" "$T/cdi-all.json"
	check "cdi-createRuntime exits 0" [ "$RC" = 0 ]
	check "cdi-createRuntime raises memlock to the node's 2 MiB" \
		[ "$(memlock_of "$TARGET")" = "2097152 2097152" ]
	check "cdi-createRuntime, every device: /etc/nccl.conf holds the plan, NCCL_IB_HCA included" \
		conf_is_plan "$T/memlock.conf" "$T/cdib/rootfs/etc/nccl.conf"
	rm -rf "$T/cdib/rootfs/etc"
	target
	STAGE=cdi-createRuntime cdi_memlock "$T/memlock.conf" "$TARGET" "$T/cdi-one.json"
	check "cdi-createRuntime, one device: NCCL_IB_HCA is that device's port alone (rule 8)" \
		grep -qx 'NCCL_IB_HCA==mlx5_3:1' "$T/cdib/rootfs/etc/nccl.conf"
	check "cdi-createRuntime, one device: the rest of the plan as for all" \
		conf_is_plan "$T/memlock.conf" "$T/cdib/rootfs/etc/nccl.conf" '^NCCL_IB_HCA='
	# nccl-conf (what the spec edit registers): /etc/nccl.conf alone, memlock untouched
	rm -rf "$T/cdib/rootfs/etc"
	target
	STAGE=nccl-conf cdi_memlock "$T/memlock.conf" "$TARGET"
	# (the user's NCCL_IB_HCA=mine in PID 1's environment beats the file's in NCCL)
	check "nccl-conf writes /etc/nccl.conf with the plan" \
		conf_is_plan "$T/memlock.conf" "$T/cdib/rootfs/etc/nccl.conf"
	check "nccl-conf leaves memlock alone (the spec edit set it)" \
		[ "$(memlock_of "$TARGET")" = "524288 2097152" ]
	check "nccl-conf logs one summary line" \
		grep -q "container cdi1: nccl-conf: /etc/nccl.conf: [0-9]* settings added" "$T/err"
	# the CRI spec under activation = annotation: nccl-conf decides again from the
	# bundle's process.env, preset included
	rm -rf "$T/cdib/rootfs/etc"
	STAGE=nccl-conf cdi_memlock "$T/memlock-strict.conf" "$TARGET" "$T/cri-preset.json"
	check "nccl-conf, CRI spec, OCI_RDMA_HOOK_ENABLE=true, OCI_RDMA_HOOK_PRESET=none: the plan's NCCL_IB_HCA, no tuned NCCL_IB_TIMEOUT" \
		bash -c 'grep -q "^NCCL_IB_HCA=" "$1" && ! grep -q "^NCCL_IB_TIMEOUT=" "$1"' _ "$T/cdib/rootfs/etc/nccl.conf"
	rm -rf "$T/cdib/rootfs/etc"
	STAGE=nccl-conf cdi_memlock "$T/memlock-strict.conf" "$TARGET" "$T/cri.json"
	check "nccl-conf, CRI spec without the variable: no /etc/nccl.conf, 'not activated'" \
		bash -c '[ ! -e "$1" ] && grep -q "not activated" "$2"' _ "$T/cdib/rootfs/etc/nccl.conf" "$T/err"
	kill "$TARGET" 2>/dev/null
	wait "$TARGET" 2>/dev/null
else
	echo "# the hard memlock limit is below 2 MiB here: the raising cases are not run"
fi
sleep 0 &
gone=$!
wait "$gone"
cdi_memlock "$T/memlock.conf" "$gone"
check "cdi-memlock: a failure under on_error=warn exits 0" [ "$RC" = 0 ]
check "... and is logged" grep -q "cdi-memlock: container process: pid $gone: no such process.*(on_error=warn)" "$T/err"
cdi_memlock "$T/memlock-strict.conf" "$gone"
check "cdi-memlock: a failure under on_error=fail fails (exit 1)" [ "$RC" = 1 ]
check "... and is logged" grep -q "cdi-memlock: container process: pid $gone: no such process.*(on_error=fail)" "$T/err"

echo "# $PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]
