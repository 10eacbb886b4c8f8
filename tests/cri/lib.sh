# SPDX-License-Identifier: Apache-2.0
# Sourced by tests/e2e/e2e-cri.sh and tests/vm/guest.sh: a containerd with its CRI plugin
# under a directory of its own, the local images, and crictl's JSON configs of a pod and
# its container for tests/cri/cri.py. Needs jq, and CRI_SRC (the source tree).

# cri_py: a python3 with grpcio and grpc_tools (Debian's; one earlier in PATH may lack them)
cri_py() {
	local py
	for py in python3 /usr/bin/python3; do
		if "$py" -c 'import grpc, grpc_tools.protoc, google.protobuf' 2>/dev/null; then
			echo "$py"
			return 0
		fi
	done
	return 1
}

# cri_config DIR [LINE...]: DIR/config.toml, a containerd whose root, state, sockets and
# CNI configurations (DIR/net.d) are under DIR, with the CRI plugin: the local pause image,
# the native snapshotter (no overlay on overlay), the runc handler, Debian's CNI plugins.
# Each LINE is added to the CRI plugin's table. The socket is DIR/containerd.sock.
cri_config() {
	local dir=$1 line
	shift
	mkdir -p "$dir/net.d"
	{
		cat <<-EOF
			version = 2
			root = "$dir/root"
			state = "$dir/state"
			[grpc]
			  address = "$dir/containerd.sock"
			[ttrpc]
			  address = "$dir/containerd.sock.ttrpc"
			[debug]
			  address = "$dir/debug.sock"
			[plugins."io.containerd.internal.v1.opt"]
			  path = "$dir/opt"
			[plugins."io.containerd.grpc.v1.cri"]
			  sandbox_image = "localhost/orh-pause:1"
		EOF
		for line in "$@"; do echo "  $line"; done
		cat <<-EOF
			  [plugins."io.containerd.grpc.v1.cri".containerd]
			    snapshotter = "native"
			    default_runtime_name = "runc"
			    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
			      runtime_type = "io.containerd.runc.v2"
			      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
			        SystemdCgroup = false
			  [plugins."io.containerd.grpc.v1.cri".cni]
			    bin_dir = "/usr/lib/cni"
			    conf_dir = "$dir/net.d"
		EOF
	} >"$dir/config.toml"
}

# cri_at DIR VERB [ARG...]: tests/cri/cri.py on DIR's containerd (stubs kept in DIR/stubs)
cri_at() {
	local dir=$1
	shift
	CRI_STUBS=$dir/stubs "$CRI_PY" "$CRI_SRC/tests/cri/cri.py" \
		--endpoint "unix://$dir/containerd.sock" "$@"
}

# cri_images DIR PAUSE ROOTFS: import the pause image (the static PAUSE as /pause) and
# the workload image localhost/orh-e2e-bb:1 (the directory ROOTFS) into DIR's containerd
cri_images() {
	local dir=$1 i
	mkdir -p "$dir/img/pause"
	cp "$2" "$dir/img/pause/pause"
	"$CRI_PY" "$CRI_SRC/tests/cri/mkimage.py" "$dir/img/pause" localhost/orh-pause:1 \
		"$dir/img/pause.tar" --entrypoint /pause || return 1
	"$CRI_PY" "$CRI_SRC/tests/cri/mkimage.py" "$3" localhost/orh-e2e-bb:1 "$dir/img/bb.tar" ||
		return 1
	for i in pause bb; do
		ctr -a "$dir/containerd.sock" -n k8s.io images import --snapshotter native \
			"$dir/img/$i.tar" >"$dir/img/$i.log" 2>&1 || { cat "$dir/img/$i.log"; return 1; }
	done
}

# cri_pod_json FILE NAME NETWORK LOGDIR [JQ]: crictl's pod config: network 2 (NODE, with
# no hostname: runc refuses one without a UTS namespace) or 0 (POD), edited by JQ
cri_pod_json() {
	jq -n --arg name "$2" --argjson net "$3" --arg logs "$4" '{
		metadata: {name: $name, namespace: "orh-e2e", uid: ("uid-" + $name), attempt: 0},
		log_directory: $logs, labels: {"orh-e2e": "cri"}, annotations: {},
		linux: {security_context: {namespace_options: {network: $net, pid: 1, ipc: 0}}}}
		| if $net == 2 then . else .hostname = $name end' | jq "${5:-.}" >"$1"
}

# cri_ctr_json FILE NETWORK CMD [JQ]: crictl's container config: "work" running
# /bin/sh -c CMD in localhost/orh-e2e-bb:1, its log work.log, the pod's network mode
cri_ctr_json() {
	jq -n --argjson net "$2" --arg cmd "$3" '{
		metadata: {name: "work", attempt: 0}, image: {image: "localhost/orh-e2e-bb:1"},
		command: ["/bin/sh", "-c", $cmd], log_path: "work.log",
		linux: {security_context: {namespace_options: {network: $net, pid: 1, ipc: 0}}}}' |
		jq "${4:-.}" >"$1"
}

# cri_start_pod DIR PODDIR HANDLER: run the pod PODDIR/pod.json through HANDLER with its
# container PODDIR/ctr.json, started: the ids in $CRI_POD and $CRI_CTR (each set once
# made); where a step fails, 1 and the CRI's error, naming the step, in $CRI_ERR
cri_start_pod() {
	local dir=$1 d=$2 out rc=0
	out=$(cri_at "$dir" run --runtime "$3" "$d/ctr.json" "$d/pod.json" 2>"$d/err") || rc=$?
	CRI_POD=$(sed -n 1p <<<"$out") CRI_CTR=$(sed -n 2p <<<"$out") CRI_ERR=$(cat "$d/err")
	return $rc
}
