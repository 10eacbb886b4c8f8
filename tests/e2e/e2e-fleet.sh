#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `oci-rdma-hook configure` on the layouts a GPU fleet's nodes really have, judged by the
# real programs. Each node is a scratch root whose /etc is bind-mounted over /etc in a
# private mount namespace, so that every program sees it where it would on a node:
#   - containerd 1.6 (Debian) and containerd 2.3 (tests/setup-debian.sh builds it): their own
#     `config dump` (the merged config, imports followed) and a short start that shows
#     whether the CRI plugin loads;
#   - nvidia-ctk 1.20 `runtime configure`, run before and after configure to make its
#     drop-in layouts, reading the file or, as the GPU Operator's installer does,
#     `containerd config dump`;
#   - CRI-O (not installable here): nvidia-ctk's CRI-O drop-in, read by configure as CRI-O
#     reads crio.conf.d, and the shim's chained runtime.
# The cases: no config.toml, a minimal one; nvidia-ctk's drop-in before ours, and after it
# (reading the file or `containerd config dump`, run twice): both handlers in containerd
# 1.6's merged view; --undo after nvidia-ctk copied the handler into its drop-in (1.6 and
# 2.x); a main file rewritten by a TOML library (comments gone); marker lines with CRLF and
# trailing blanks; CRI-O's 99-nvidia.toml; two engines and their runtimes, concurrent runs,
# a write that fails half-way; --root with an absolute symlink; a k3s template; k3s with a
# rendered config and no template (configure makes it: a re-run, --check, --undo), and the
# installer on such a node.
. "$(dirname "$0")/lib.sh"

need_root_runc
PEERS=${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}
CD1=$(command -v containerd || true)
CTR1=$(command -v ctr || true)
[ -n "$CD1" ] && [ -n "$CTR1" ] || cant_run "containerd (Debian's 1.6) not installed"
for p in containerd ctr nvidia-ctk; do
	[ -x "$PEERS/$p" ] || cant_run "$PEERS/$p missing (tests/setup-debian.sh builds it)"
done
CD2=$PEERS/containerd CTR2=$PEERS/ctr NVCTK=$PEERS/nvidia-ctk
command -v unshare >/dev/null 2>&1 || cant_run "unshare not installed"
setup_work
SHIM=/usr/bin/oci-rdma-runtime # as written into the files; not executed here
NV=/usr/local/nvidia/toolkit/nvidia-container-runtime
NODE_CONF=/etc/oci-rdma-hook/oci-rdma-hook.conf

# on_node ROOT CMD...: CMD with ROOT/etc as /etc (a private mount namespace)
on_node() {
	local root=$1
	shift
	unshare -m bash -c 'mount --make-rprivate / && mount --bind "$0/etc" /etc && exec "$@"' \
		"$root" "$@"
}
# cfg ROOT ARGS...: configure under ROOT (stdout and stderr in $WORK/cfg.out); CRC
cfg() {
	local root=$1
	shift
	CRC=0
	"$HOOK" --config "$NODE_CONF" configure --shim "$SHIM" --root "$root" "$@" \
		>"$WORK/cfg.out" 2>&1 || CRC=$?
}
# dump BIN ROOT: containerd BIN's merged config of ROOT's config.toml
dump() {
	on_node "$2" "$1" --config /etc/containerd/config.toml config dump 2>"$WORK/dump.err"
}
# cri_loads BIN CTR ROOT: containerd BIN starts on ROOT's config and its CRI plugin loads
cri_loads() {
	local bin=$1 ctr=$2 root=$3 t pid rc=1
	t=$(mktemp -d "$WORK/cd.XXXXXX")
	# The node's own engines keep their sockets: containerd 2.x takes its ttrpc socket from
	# the config's [ttrpc] or [grpc] address (/run/containerd/containerd.sock.ttrpc in the
	# file under test), not from --address, and serves NRI on /var/run/nri/nri.sock; a
	# tmpfs on /run in this start's mount namespace holds those, seen by no one else.
	local before
	before=$(host_sockets)
	# (unshare and then bash exec: $! is containerd's own pid, which the kill below ends)
	unshare -m bash -c 'mount --make-rprivate / && mount -t tmpfs -o mode=755 orh-run /run &&
		mount --bind "$0/etc" /etc && exec "$@"' \
		"$root" "$bin" --config /etc/containerd/config.toml --root "$t/root" \
		--state "$t/state" --address "$t/sock" >"$t/log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do
		[ -S "$t/sock" ] && "$ctr" --address "$t/sock" plugins ls >"$t/plugins" 2>/dev/null &&
			break
		sleep 0.1
	done
	# every CRI plugin listed, none of them in error
	if grep -q 'cri ' "$t/plugins" 2>/dev/null &&
		! grep -E '(cri|runtime) .* error' "$t/plugins" >/dev/null; then
		rc=0
	else
		grep -i 'cri\|runtime' "$t/plugins" "$t/log" 2>/dev/null | grep -i 'error\|fail' | head -3 | sed 's/^/# /'
	fi
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	# no containerd of this start is left running
	! pgrep -f -- "--address $t/sock" >/dev/null || { echo "# containerd on $t still runs"; rc=1; }
	[ "$(host_sockets)" == "$before" ] ||
		{ echo "# the node's engine sockets changed: $before -> $(host_sockets)"; rc=1; }
	return $rc
}
# host_sockets: the node's containerd and NRI sockets as they are (name, inode), one line
host_sockets() {
	local s
	for s in /run/containerd/containerd.sock /run/containerd/containerd.sock.ttrpc \
		/var/run/nri/nri.sock; do
		printf '%s=%s ' "$s" "$(stat -c %i "$s" 2>/dev/null || echo none)"
	done
}
# handler_in DUMPTEXT NAME: the merged config has runtime handler NAME, once
handlers() { grep -c "containerd\.runtimes\.$2\]" <<<"$1" || true; }
default_of() { sed -n "s/^ *default_runtime_name = [\"']\(.*\)[\"']$/\1/p" <<<"$1" | head -1; }
# snapshot DIR: every file under DIR with its content (the count first: never empty)
snapshot() {
	(cd "$1" && echo "$(find . -type f | wc -l) files" && find . -type f | sort | xargs -r sha256sum)
}
new_node() { # new_node NAME: $WORK/NAME with an empty /etc/containerd
	rm -rf "${WORK:?}/$1"
	mkdir -p "$WORK/$1/etc/containerd"
	echo "$WORK/$1"
}
nvidia_ctk() { # nvidia_ctk ROOT ENGINE ARGS...: nvidia-ctk runtime configure on ROOT
	local root=$1 engine=$2
	shift 2
	on_node "$root" "$NVCTK" runtime configure --runtime="$engine" --nvidia-runtime-path="$NV" \
		"$@" >"$WORK/nvctk.out" 2>&1
}

# ---- 1. no config.toml, or a minimal one ------------------------------------------------
for layout in none minimal; do
	R=$(new_node "$layout")
	[ $layout = minimal ] &&
		printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n' \
			>"$R/etc/containerd/config.toml"
	cfg "$R" --engine containerd
	check "$layout config: configure succeeds" [ "$CRC" = 0 ]
	d1=$(dump "$CD1" "$R" || true)
	check "$layout config: containerd 1.6's merged config has the handler and runc" \
		[ "$(handlers "$d1" rdma)/$(handlers "$d1" runc)/$(default_of "$d1")" = 1/1/runc ]
	check "$layout config: containerd 1.6's CRI plugin loads" cri_loads "$CD1" "$CTR1" "$R"
	d2=$(dump "$CD2" "$R" || true)
	check "$layout config: containerd 2.x's merged config has the handler and runc" \
		[ "$(handlers "$d2" rdma)/$(handlers "$d2" runc)/$(default_of "$d2")" = 1/1/runc ]
	check "$layout config: containerd 2.x's CRI plugin loads" cri_loads "$CD2" "$CTR2" "$R"
	[ $layout = minimal ] && check "minimal config: the operator's sandbox_image is kept" \
		grep -q 'sandbox_image = "pause:3.9"' <<<"$d1"
done

# ---- 2. nvidia-ctk's drop-in, before and after ours --------------------------------------
R=$(new_node nv-first)
containerd config default >"$R/etc/containerd/config.toml"
nvidia_ctk "$R" containerd --set-as-default
check "nvidia-ctk made its drop-in (conf.d/99-nvidia.toml)" [ -f "$R/etc/containerd/conf.d/99-nvidia.toml" ]
before=$(snapshot "$R")
cfg "$R" --engine containerd
check "nvidia first: configure succeeds" [ "$CRC" = 0 ]
d1=$(dump "$CD1" "$R" || true)
check "nvidia first: containerd's merged config keeps nvidia the default and has the handler" \
	[ "$(default_of "$d1")/$(handlers "$d1" rdma)/$(handlers "$d1" nvidia)" = nvidia/1/1 ]
check "nvidia first: the shim chains the NVIDIA runtime" \
	grep -qx "runtime = $NV" "$R$NODE_CONF"
check "nvidia first: the CRI plugin loads" cri_loads "$CD1" "$CTR1" "$R"
cfg "$R" --engine containerd
check "nvidia first: a second run changes nothing" grep -q 'nothing to change' "$WORK/cfg.out"
cfg "$R" --engine containerd --undo
check "nvidia first: --undo gives the files back byte for byte" [ "$before" = "$(snapshot "$R")" ]

# ours first, then the GPU Operator's nvidia-ctk: reading config.toml (its default), or
# `containerd config dump` (--config-source=command). On containerd 1.x the last file holding
# the CRI table replaces the others' whole, so the handler must be in what nvidia-ctk copies
# into its drop-in: configure keeps it in config.toml where no drop-in needs to carry it.
# has_both DUMP: nvidia the default, one handler rdma, one nvidia
has_both() { [ "$(default_of "$1")/$(handlers "$1" rdma)/$(handlers "$1" nvidia)" = nvidia/1/1 ]; }
check_cfg() { "$HOOK" --config "$NODE_CONF" configure --shim "$SHIM" --root "$1" --engine containerd --check >/dev/null 2>&1; }
for src in file command; do
	R=$(new_node "ours-first-$src")
	containerd config default >"$R/etc/containerd/config.toml"
	cfg "$R" --engine containerd
	check "ours first ($src): configure succeeds" [ "$CRC" = 0 ]
	nvidia_ctk "$R" containerd --set-as-default --config-source=$src
	d1=$(dump "$CD1" "$R" || true)
	check "ours first ($src): after nvidia-ctk, containerd 1.6's merged config has both handlers, nvidia the default" \
		has_both "$d1"
	check "ours first ($src): the CRI plugin loads" cri_loads "$CD1" "$CTR1" "$R"
	cfg "$R" --engine containerd --check
	check "ours first ($src): --check sees that the shim still chains runc (exit 1)" \
		bash -c '[ "$1" = 1 ] && grep -q "oci-rdma-hook.conf: not as configure would write it" "$2"' \
		_ "$CRC" "$WORK/cfg.out"
	cfg "$R" --engine containerd
	d1=$(dump "$CD1" "$R" || true)
	check "ours first ($src): a re-run chains nvidia's runtime, both handlers kept" \
		bash -c '[ "$1" = 0 ] && grep -qx "runtime = $2" "$3"' _ "$CRC" "$NV" "$R$NODE_CONF"
	check "ours first ($src): and containerd 1.6 still has both, nvidia the default" has_both "$d1"
	check "ours first ($src): then --check is content (exit 0)" check_cfg "$R"
	nvidia_ctk "$R" containerd --set-as-default --config-source=$src
	d1=$(dump "$CD1" "$R" || true)
	check "ours first ($src): nvidia-ctk run again: both handlers, nvidia the default" \
		has_both "$d1"
	check "ours first ($src): --check after nvidia-ctk's second run is content (exit 0)" check_cfg "$R"
done

# ---- 2b. undo after nvidia-ctk copied the handler into its drop-in ------------------------
# (--config-source=command copies containerd's merged config, our table included). Undo
# takes our runtime's tables out of that file, found by their BinaryName, every other byte
# kept: what remains is the file without the lines from each rdma table's header to the
# next header not under it.
without_rdma() {
	awk '/^[ \t]*\[/ { skip = ($0 ~ /runtimes\.rdma[].]/) } !skip' "$1"
}
copy_undo() { # copy_undo NAME BIN ROOT: --undo on ROOT, judged by containerd BIN
	local name=$1 bin=$2 root=$3 nv=$3/etc/containerd/conf.d/99-nvidia.toml d
	check "$name: nvidia-ctk copied the handler into 99-nvidia.toml" grep -q 'runtimes\.rdma\]' "$nv"
	without_rdma "$nv" >"$WORK/nv.expected"
	cfg "$root" --engine containerd --undo
	d=$(dump "$bin" "$root" || true)
	check "$name: --undo leaves containerd without the handler, nvidia the default ($(grep -m1 99-nvidia "$WORK/cfg.out"))" \
		[ "$CRC/$(handlers "$d" rdma)/$(handlers "$d" nvidia)/$(default_of "$d")" = 0/0/1/nvidia ]
	check "$name: 99-nvidia.toml lost the handler's tables and nothing else" cmp "$WORK/nv.expected" "$nv"
	check "$name: the CRI plugin loads" cri_loads "$bin" "$([ "$bin" = "$CD1" ] && echo "$CTR1" || echo "$CTR2")" "$root"
}
copy_undo "copy, containerd 1.6" "$CD1" "$R"
R=$(new_node copy-v2)
"$CD2" config default >"$R/etc/containerd/config.toml"
cfg "$R" --engine containerd
nvidia_ctk "$R" containerd --set-as-default --config-source=command --executable-path="$CD2"
copy_undo "copy, containerd 2.x" "$CD2" "$R"

# containerd 2.x's own default config (version 4), nvidia-ctk's drop-in, then ours
R=$(new_node v2)
"$CD2" config default >"$R/etc/containerd/config.toml"
nvidia_ctk "$R" containerd --set-as-default
cfg "$R" --engine containerd
d2=$(dump "$CD2" "$R" || true)
check "containerd 2.x: nvidia stays the default, the handler is there" \
	[ "$CRC/$(default_of "$d2")/$(handlers "$d2" rdma)" = 0/nvidia/1 ]
check "containerd 2.x: the drop-in holds the handler alone (2.x merges key by key)" \
	bash -c '! grep -q default_runtime_name "$1"' _ "$R/etc/containerd/conf.d/99-oci-rdma-hook.toml"
check "containerd 2.x: the CRI plugin loads" cri_loads "$CD2" "$CTR2" "$R"

# ---- 3. the main file rewritten by a TOML library (the GPU Operator's re-run) -------------
R=$(new_node rewritten)
containerd config default >"$R/etc/containerd/config.toml"
cat >>"$R/etc/containerd/config.toml" <<EOF

# >>> oci-rdma-hook configure --engine containerd --handler rdma
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.rdma]
  runtime_type = "io.containerd.runc.v2"
  pod_annotations = ["oci-rdma-hook/*"]
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.rdma.options]
  BinaryName = "$SHIM"
  SystemdCgroup = false
# <<< oci-rdma-hook configure --engine containerd --handler rdma
EOF
# nvidia-ctk without a drop-in rewrites config.toml through go-toml: the comments go
nvidia_ctk "$R" containerd --drop-in-config=""
check "rewritten: nvidia-ctk dropped configure's marker lines, kept the handler" \
	bash -c '! grep -q "oci-rdma-hook configure" "$1" && grep -q "runtimes.rdma\]" "$1"' _ \
	"$R/etc/containerd/config.toml"
cfg "$R" --engine containerd
check "rewritten: configure exits 0 (the handler is found by its BinaryName)" [ "$CRC" = 0 ]
d1=$(dump "$CD1" "$R" || true)
check "rewritten: containerd has one handler" [ "$(handlers "$d1" rdma)" = 1 ]
cfg "$R" --engine containerd
check "rewritten: a second run changes nothing" grep -q 'nothing to change' "$WORK/cfg.out"
cfg "$R" --engine containerd --undo
d1=$(dump "$CD1" "$R" || true)
check "rewritten: --undo leaves containerd without the handler, and with runc" \
	[ "$CRC/$(handlers "$d1" rdma)/$(handlers "$d1" runc)" = 0/0/1 ]

# ---- 4. marker lines that gained CRLF or a trailing blank -------------------------------
R=$(new_node crlf)
containerd config default >"$R/etc/containerd/config.toml"
printf '\n# >>> oci-rdma-hook configure --engine containerd --handler rdma \r\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.rdma.options]\r\n  BinaryName = "%s"\r\n# <<< oci-rdma-hook configure --engine containerd --handler rdma\t\r\n' \
	"$SHIM" >>"$R/etc/containerd/config.toml"
cfg "$R" --engine containerd
cfg "$R" --engine containerd
d1=$(dump "$CD1" "$R" || true)
check "CRLF markers: two runs leave one handler, and containerd reads the config" \
	[ "$CRC/$(handlers "$d1" rdma)" = 0/1 ]
check "CRLF markers: the CRI plugin loads" cri_loads "$CD1" "$CTR1" "$R"

# ---- 5. CRI-O with nvidia-ctk's drop-in ---------------------------------------------------
R=$(new_node crio)
mkdir -p "$R/etc/crio" "$R/usr/bin"
printf '[crio.runtime]\ndefault_runtime = "crun"\n' >"$R/etc/crio/crio.conf"
cp /bin/true "$R/usr/bin/crun"
nvidia_ctk "$R" crio --set-as-default
check "CRI-O: nvidia-ctk made crio.conf.d/99-nvidia.toml" [ -f "$R/etc/crio/crio.conf.d/99-nvidia.toml" ]
cfg "$R" --engine crio
check "CRI-O: the shim chains the runtime nvidia's drop-in made the default ($NV)" \
	[ "$CRC/$(sed -n 's/^runtime = //p' "$R$NODE_CONF")" = "0/$NV" ]
check "CRI-O: our drop-in comes after nvidia's in CRI-O's lexical order" \
	bash -c '[ "$(ls "$1" | sort | tail -1)" = 99-oci-rdma-hook.conf ]' _ "$R/etc/crio/crio.conf.d"

# ---- 6. two engines, concurrent runs, a write that fails half-way --------------------------
R=$(new_node two)
containerd config default >"$R/etc/containerd/config.toml"
nvidia_ctk "$R" containerd --set-as-default
mkdir -p "$R/etc/docker" "$R/opt"
cp /bin/true "$R/opt/kata-runtime"
printf '{"default-runtime": "kata", "runtimes": {"kata": {"path": "/opt/kata-runtime"}}}\n' \
	>"$R/etc/docker/daemon.json"
cfg "$R" --engine containerd
c1=$CRC
cfg "$R" --engine docker
check "two engines: containerd's shim chains nvidia, docker's chains its own default" \
	bash -c '[ "$1/$2" = 0/0 ] && grep -qx "runtime = $3" "$4" &&
		jq -e ".runtimes.rdma.runtimeArgs == [\"--orh-runtime=/opt/kata-runtime\"]" "$5" >/dev/null' \
	_ "$c1" "$CRC" "$NV" "$R$NODE_CONF" "$R/etc/docker/daemon.json"
# the shim takes that argument, and passes it on to no runtime
mkdir -p "$WORK/rt"
printf '#!/bin/sh\necho "chained $*"\n' >"$WORK/rt/fake"
chmod +x "$WORK/rt/fake"
ln -sf "$HOOK" "$WORK/rt/oci-rdma-runtime"
out=$(OCI_RDMA_HOOK_CONFIG="$R$NODE_CONF" "$WORK/rt/oci-rdma-runtime" --orh-runtime="$WORK/rt/fake" --version 2>&1 || true)
check "two engines: the shim executes the runtime its first argument names ($out)" \
	[ "$out" = "chained --version" ]
# containerd and CRI-O at once, twenty times: both blocks every time (a lock serializes them)
lost=0
for i in $(seq 1 20); do
	R=$(new_node conc)
	mkdir -p "$R/etc/crio" "$R/usr/bin"
	cp /bin/true "$R/usr/bin/crun"
	printf '[crio.runtime]\ndefault_runtime = "crun"\n' >"$R/etc/crio/crio.conf"
	printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "crun"\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun.options]\n  BinaryName = "/usr/bin/crun"\n' \
		>"$R/etc/containerd/config.toml"
	"$HOOK" --config "$NODE_CONF" configure --shim "$SHIM" --root "$R" --engine containerd >/dev/null 2>&1 &
	"$HOOK" --config "$NODE_CONF" configure --shim "$SHIM" --root "$R" --engine crio >/dev/null 2>&1 &
	wait
	[ "$(grep -c '^# >>> oci-rdma-hook configure --engine \(containerd\|crio\)\( (new file)\)\?$' "$R$NODE_CONF")" = 2 ] ||
		lost=$((lost + 1))
done
check "concurrent runs: no block lost in 20 pairs ($lost lost)" [ "$lost" = 0 ]
# the node config cannot be written: nothing of the run is left
R=$(new_node halfway)
containerd config default >"$R/etc/containerd/config.toml"
nvidia_ctk "$R" containerd --set-as-default
mkdir -p "$R/etc/oci-rdma-hook"
before=$(snapshot "$R")
CRC=0
unshare -m bash -c 'mount --make-rprivate / && mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"' \
	"$R/etc/oci-rdma-hook" "$HOOK" --config "$NODE_CONF" configure --shim "$SHIM" --root "$R" \
	--engine containerd >"$WORK/cfg.out" 2>&1 || CRC=$?
check "half-way: the run fails on the read-only node config ($(tail -1 "$WORK/cfg.out"))" [ "$CRC" != 0 ]
check "half-way: and leaves every file as it was" [ "$before" = "$(snapshot "$R")" ]

# ---- 7. --root is a root: an absolute symlink resolves inside it --------------------------
R=$(new_node rooted)
rm -rf "$R/etc"
OUTSIDE="$WORK/outside"
mkdir -p "$OUTSIDE/containerd" "$R$OUTSIDE/containerd"
printf 'version = 2\n' >"$OUTSIDE/containerd/config.toml"
printf 'version = 2\n' >"$R$OUTSIDE/containerd/config.toml"
ln -s "$OUTSIDE" "$R/etc"
before=$(snapshot "$OUTSIDE")
cfg "$R" --engine containerd
check "--root: the link's target outside the root is untouched" [ "$CRC/$before" = "0/$(snapshot "$OUTSIDE")" ]
check "--root: the handler went where the link leads inside the root" \
	grep -q 'runtimes\.rdma\]' "$R$OUTSIDE/containerd/config.toml"
cfg "$R" --engine containerd --undo
check "--root: --undo removes inside the root only" \
	[ "$CRC/$before/$(cat "$R$OUTSIDE/containerd/config.toml")" = "0/$(snapshot "$OUTSIDE")/version = 2" ]

# ---- 8. a k3s template --------------------------------------------------------------------
R=$(new_node k3s)
T=/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl
mkdir -p "$R$(dirname "$T")"
printf '{{ template "base" . }}\n' >"$R$T"
cp "$R$T" "$WORK/tmpl.orig"
cfg "$R" --engine containerd --engine-config "$T"
check "k3s: configure appends the handler to the template" \
	bash -c '[ "$1" = 0 ] && head -1 "$2" | grep -qx "{{ template \"base\" . }}" && grep -q "runtimes.rdma\]" "$2"' \
	_ "$CRC" "$R$T"
# what k3s renders: its base (here containerd's own default, version 2) and then the rest
{ containerd config default; tail -n +2 "$R$T"; } >"$R/etc/containerd/config.toml"
d1=$(dump "$CD1" "$R" || true)
check "k3s: the rendered config has the handler for containerd" [ "$(handlers "$d1" rdma)" = 1 ]
cfg "$R" --engine containerd --engine-config "$T" --undo
check "k3s: --undo gives the template back" cmp -s "$R$T" "$WORK/tmpl.orig"

# ---- 9. k3s with a rendered config and no template yet: configure makes the template -------
# Its begin marker says "(new file)"; a second run, --check and --undo find it again. k3s
# renders the template's base (here: the config it rendered last), then the rest.
K3S=/var/lib/rancher/k3s/agent/etc/containerd
render() { # render ROOT TEMPLATE: what k3s would render, where containerd here reads it
	{ cat "$1$K3S/config.toml"; tail -n +2 "$1$2"; } >"$1/etc/containerd/config.toml"
}
for v in 3 2; do
	R=$(new_node "k3s-v$v")
	mkdir -p "$R$K3S"
	if [ $v = 3 ]; then
		T=$K3S/config-v3.toml.tmpl BIN=$CD2 CTR=$CTR2
		"$CD2" config default | sed 's/^version = 4$/version = 3/' >"$R$K3S/config.toml"
	else
		T=$K3S/config.toml.tmpl BIN=$CD1 CTR=$CTR1
		containerd config default >"$R$K3S/config.toml"
	fi
	cfg "$R" --engine containerd --engine-config "$T"
	check "k3s v$v, no template: configure makes ${T##*/} (rc $CRC)" \
		bash -c '[ "$1" = 0 ] && grep -q "^# >>> oci-rdma-hook configure .* (new file)$" "$2"' _ "$CRC" "$R$T"
	render "$R" "$T"
	d=$(dump "$BIN" "$R" || true)
	check "k3s v$v: the rendered config has the handler for containerd" [ "$(handlers "$d" rdma)" = 1 ]
	check "k3s v$v: the CRI plugin loads" cri_loads "$BIN" "$CTR" "$R"
	cfg "$R" --engine containerd --engine-config "$T"
	check "k3s v$v: a second run changes nothing (rc $CRC: $(tail -1 "$WORK/cfg.out"))" \
		bash -c '[ "$1" = 0 ] && grep -q "nothing to change" "$2"' _ "$CRC" "$WORK/cfg.out"
	cfg "$R" --engine containerd --engine-config "$T" --check
	check "k3s v$v: --check is content (rc $CRC: $(tail -1 "$WORK/cfg.out"))" [ "$CRC" = 0 ]
	cfg "$R" --engine containerd --engine-config "$T" --undo
	check "k3s v$v: --undo removes the template it made (rc $CRC)" [ "$CRC" = 0 -a ! -e "$R$T" ]
	cfg "$R" --engine containerd --engine-config "$T"
	check "k3s v$v: configure runs again after the undo (rc $CRC)" [ "$CRC" = 0 ]
done
# the template an earlier undo left: the base line and a begin marker with nothing after it
printf '{{ template "base" . }}\n\n# >>> oci-rdma-hook configure --engine containerd --handler rdma (new file)' \
	>"$R$T"
cfg "$R" --engine containerd --engine-config "$T"
check "k3s: a begin marker left at the end is taken as configure's block (rc $CRC)" \
	bash -c '[ "$1" = 0 ] && [ "$(grep -c "^# [<>]\{3\} oci-rdma-hook configure" "$2")" = 2 ]' _ "$CRC" "$R$T"
cfg "$R" --engine containerd --engine-config "$T" --undo
check "k3s: and --undo then removes the template (rc $CRC)" [ "$CRC" = 0 -a ! -e "$R$T" ]

# the installer on a k3s node whose template configure made: it configures it again, is
# ready once k3s's containerd reports the handler, and --purge removes the template
define() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "${ORH_BUILDDIR:?}/orh-config.h"; }
IMG=$WORK/imgroot
for f in "$(define ORH_CONTAINERS_HOOKS_DIR)/oci-rdma-hook.json" \
	"$(define ORH_CONTAINERS_HOOKS_DIR)/oci-rdma-hook-poststop.json" \
	"$(define ORH_OWN_HOOKS_DIR)/oci-rdma-hook-precreate.json"; do
	mkdir -p "$IMG${f%/*}"
	echo '{}' >"$IMG$f"
done
printf '[node]\n' >"$IMG/node.conf"
ISHIM=$(define ORH_BINDIR)/oci-rdma-runtime
inst() { # inst ROOT ARGS...: the installer on ROOT; IRC
	IRC=0
	"$HOOK" install --root "$1" --from "$IMG" --node-config "$IMG/node.conf" \
		--ready-file "$WORK/ready" "${@:2}" >"$WORK/inst.out" 2>&1 || IRC=$?
}
R=$(new_node k3s-inst)
mkdir -p "$R$K3S"
"$CD2" config default | sed 's/^version = 4$/version = 3/' >"$R$K3S/config.toml"
T=$K3S/config-v3.toml.tmpl
"$HOOK" --config "$NODE_CONF" configure --shim "$ISHIM" --root "$R" --engine containerd \
	--engine-config "$T" >/dev/null 2>&1
KB=/var/lib/rancher/k3s/data/current/bin/containerd
for f in "$CD2" $(ldd "$CD2" | grep -o '/[^ ]*' | sort -u); do
	mkdir -p "$R$(dirname "$f")"
	cp -L "$f" "$R$f"
done
mkdir -p "$R${KB%/*}"
mv "$R$CD2" "$R$KB"
render "$R" "$T"
cp "$R/etc/containerd/config.toml" "$R$K3S/config.toml"
# k3s's containerd as k3s starts it (-c the rendered config, -a its socket), listening on the
# node's socket: the installer is ready once the engine behind it reports the handler. In a
# mount namespace whose /var/lib/rancher is the node's (a tmpfs over this machine's
# /var/lib holds it) and whose /run/nri is its own (NRI's default socket)
mkdir -p "$R/run/k3s/containerd" /run/nri
KSOCK=$R/run/k3s/containerd/containerd.sock
unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs /var/lib && mkdir -p /var/lib/rancher &&
	mount --bind "$0/var/lib/rancher" /var/lib/rancher && mount -t tmpfs tmpfs /run/nri &&
	exec "$@"' "$R" "$R$KB" -c "$K3S/config.toml" -a "$KSOCK" --state "$WORK/k3s-inst-state" \
	--root "$WORK/k3s-inst-root" >"$WORK/k3s-inst.log" 2>&1 &
KPID=$!
for _ in $(seq 300); do "$CTR2" -a "$KSOCK" version >/dev/null 2>&1 && break; sleep 0.1; done
inst "$R" --once --ready-timeout 10
check "installer on k3s: ready, the template configure made configured again (rc $IRC: $(grep -m1 'install:\|^ready' "$WORK/inst.out"))" \
	bash -c '[ "$1" = 0 ] && grep -q "^ready: containerd config dump of .* has handler .* (pid $3: " "$2"' \
	_ "$IRC" "$WORK/inst.out" "$KPID"
kill "$KPID" 2>/dev/null || true
wait "$KPID" 2>/dev/null || true
inst "$R" --purge
check "installer on k3s: --purge removes the template (rc $IRC: $(tail -1 "$WORK/inst.out"))" \
	[ "$IRC" = 0 -a ! -e "$R$T" ]

finish
