# SPDX-License-Identifier: Apache-2.0
# A single-node Kubernetes cluster for the Kubernetes lane (sourced after tests/e2e/lib.sh,
# which gives $WORK, check, cant_run): etcd, kube-apiserver, kube-scheduler and
# kube-controller-manager on 127.0.0.1, and a kubelet on containerd 2.3.4, built by
# tests/k8s/build-peers.sh and tests/setup-debian.sh. Everything it makes is under $K8S
# ($WORK/k8s): certificates (openssl, EC P-256), kubeconfigs, the store, containerd's root,
# state and sockets, the kubelet's root directory, the logs; and a cgroup of its own
# (/orh-k8s-PID in each hierarchy) as the kubelet's cgroupRoot.
#
# containerd and the kubelet run in one private mount namespace, held by a process of
# k8s_up's: tmpfs on /var/lib and /var/log (the kubelet's fixed /var/log/containers and
# device-plugins paths), /var/lib/kubelet bound to $K8S/kubelet, and tmpfs over the host's
# /run/containerd and /var/run/nri where they exist, so that nothing started here reaches
# the host's engines. containerd has its own gRPC, ttrpc and NRI sockets, shim socket
# directory and runc root. Pods get a network of their own from a CNI plugin of a few lines
# (tests/k8s/cni.sh: a veth pair, both ends in the pod). k8s_down stops every process
# k8s_up started, by its pid, and then every process left in the namespace (the shims),
# and removes the cgroup; cleanup_work removes $WORK.
#
# The images: localhost/orh-pause:1 (the static tests/cri/pause.c, containerd's pinned
# sandbox image) and localhost/orh-e2e-bb:1 (busybox-static and the probe), imported with
# `ctr -n k8s.io images import`: no registry.

K8S_PEERS=${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}
K8S_BIN=${ORH_K8S_BIN:-$K8S_PEERS/k8s}
K8S_PIDS=()
K8S_STARTED=()
# how many processes k8s_down had to kill after the pods were removed and the daemons stopped
K8S_SWEPT=0
K8S_HOLDER=""
K8S_NS=""

# k8s_need: every program the cluster needs, or cant_run naming the first one missing
k8s_need() {
	local p
	for p in etcd kube-apiserver kube-scheduler kube-controller-manager kubelet kubectl \
		orh-rdmadev; do
		[ -x "$K8S_BIN/$p" ] || cant_run "$K8S_BIN/$p missing (tests/setup-debian.sh builds it)"
	done
	for p in containerd ctr containerd-shim-runc-v2; do
		[ -x "$K8S_PEERS/$p" ] || cant_run "$K8S_PEERS/$p missing (tests/setup-debian.sh builds it)"
	done
	for p in openssl unshare nsenter jq ip python3; do
		command -v "$p" >/dev/null 2>&1 || cant_run "$p not installed"
	done
	[ -x "${PAUSE:-}" ] || cant_run "PAUSE (the static tests/cri/pause.c) not built"
	# containerd 2.3.4's directory first: its runc shim, not an older one of the host's
	export PATH=$K8S_PEERS:$K8S_BIN:$PATH
}

# k8s_crictl ARG...: crictl on the cluster's containerd
k8s_crictl() { crictl --config "$K8S/crictl.yaml" "$@"; }

# kc ARG...: kubectl as the cluster's administrator
kc() { "$K8S_BIN/kubectl" --kubeconfig "$K8S/admin.kubeconfig" "$@"; }

# k8s_ports N: N free TCP ports of 127.0.0.1
k8s_ports() {
	python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# k8s_cert NAME SUBJECT EXT: NAME.key and NAME.crt signed by the cluster's CA (EC P-256)
k8s_cert() {
	local d=$K8S/pki
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/$1.key" 2>/dev/null &&
		openssl req -new -key "$d/$1.key" -subj "$2" -out "$d/$1.csr" 2>/dev/null &&
		printf '%b\n' "$3" >"$d/$1.ext" &&
		openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
			-CAcreateserial -days 2 -extfile "$d/$1.ext" -out "$d/$1.crt" 2>/dev/null
}

# k8s_kubeconfig FILE CERT-NAME: a kubeconfig of the API server, as that certificate's user
k8s_kubeconfig() {
	cat >"$1" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: orh
		  cluster:
		    server: https://127.0.0.1:$K8S_API_PORT
		    certificate-authority: $K8S/pki/ca.crt
		users:
		- name: $2
		  user:
		    client-certificate: $K8S/pki/$2.crt
		    client-key: $K8S/pki/$2.key
		contexts:
		- name: orh
		  context: {cluster: orh, user: $2}
		current-context: orh
	EOF
}

# k8s_certs: the CA, the API server's serving certificate, the clients' (the administrator
# in system:masters, also the API server's client of the kubelet; the node), the
# service-account signing key
k8s_certs() {
	local d=$K8S/pki cl='basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth'
	mkdir -p "$d"
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/ca.key" 2>/dev/null &&
		openssl req -x509 -new -key "$d/ca.key" -subj /CN=orh-k8s-ca -days 2 \
			-addext basicConstraints=critical,CA:TRUE \
			-addext keyUsage=critical,keyCertSign,cRLSign -out "$d/ca.crt" 2>/dev/null &&
		k8s_cert apiserver /CN=kube-apiserver \
			'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes.default.svc' &&
		k8s_cert admin "/O=system:masters/CN=orh-admin" "$cl" &&
		k8s_cert node "/O=system:nodes/CN=system:node:localhost" "$cl" &&
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/sa.key" 2>/dev/null &&
		openssl pkey -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

# k8s_containerd_config: $CD/config.toml, version 3: the CRI plugin with the runc runtime
# (its runc root under $CD), the local pause image, the native snapshotter, the CNI of
# tests/k8s/cni.sh, CDI specs read from $CD/cdi; NRI on, its socket $NRI_SOCK; the shims'
# sockets under $CD/s
k8s_containerd_config() {
	mkdir -p "$CD/cni" "$CD/s" "$CD/cdi"
	# the CDI specs of the lane's DRA driver (orh-rdmadev dra); runc's root and the shims'
	# sockets under $CD
	CD2_CNI_BIN=$CD/cni CD2_RUNTIME="enable_cdi = true
cdi_spec_dirs = [\"$CD/cdi\"]" CD2_RUNC="Root = \"$CD/runc\"" \
		CD2_TABLES="[plugins.\"io.containerd.shim.v1.manager\"]
  socket_dir = \"$CD/s\"" cd2_config "$CD" "$NRI_SOCK"
	# the pod network: tests/k8s/cni.sh as the plugin types orh-veth and loopback
	sed "s#@IP@#$(command -v ip)#; s#@NSENTER@#$(command -v nsenter)#" \
		"$K8S_SRC/tests/k8s/cni.sh" >"$CD/cni/orh-veth"
	chmod 755 "$CD/cni/orh-veth"
	ln -s orh-veth "$CD/cni/loopback"
	cat >"$CD/net.d/10-orh.conflist" <<-EOF
		{"cniVersion": "1.0.0", "name": "orh-k8s",
		 "plugins": [{"type": "orh-veth", "address": "10.213.81.2/24"}]}
	EOF
}

# k8s_kubelet_config: $K8S/kubelet.yaml (this machine: cgroup v1, no CAP_SYS_RESOURCE)
k8s_kubelet_config() {
	cat >"$K8S/kubelet.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: 127.0.0.1
		port: $K8S_KUBELET_PORT
		healthzPort: 0
		readOnlyPort: 0
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: false}
		  x509: {clientCAFile: $K8S/pki/ca.crt}
		authorization: {mode: AlwaysAllow}
		containerRuntimeEndpoint: unix://$CD/containerd.sock
		cgroupDriver: cgroupfs
		cgroupRoot: /$K8S_CGROUP
		failCgroupV1: false
		failSwapOn: false
		oomScoreAdj: 0
		registerNode: true
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
		nodeStatusUpdateFrequency: 2s
		syncFrequency: 5s
		fileCheckFrequency: 5s
		resolvConf: ""
	EOF
}

# k8s_cgroups make|remove: the kubelet's cgroupRoot in each cgroup hierarchy
k8s_cgroups() {
	local h d
	for h in /sys/fs/cgroup /sys/fs/cgroup/*/; do
		h=${h%/}
		[ -e "$h/cgroup.procs" ] || continue
		d=$h/$K8S_CGROUP
		if [ "$1" = make ]; then
			mkdir -p "$d" || return 1
			[ ! -e "$d/cpuset.cpus" ] || {
				cat "$h/cpuset.cpus" >"$d/cpuset.cpus" && cat "$h/cpuset.mems" >"$d/cpuset.mems"
			} || return 1
		elif [ -d "$d" ]; then
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		fi
	done
}

# k8s_start NAME COMMAND...: a daemon, its output in $K8S/NAME.log, its pid kept
k8s_start() {
	local name=$1
	shift
	"$@" >"$K8S/$name.log" 2>&1 &
	K8S_PIDS+=("$!")
	K8S_STARTED+=("$!")
	eval "K8S_PID_${name//-/_}=$!"
}

# k8s_in_ns NAME COMMAND...: k8s_start in the namespace (nsenter execs the command: the pid
# kept is the daemon's)
k8s_in_ns() {
	local name=$1
	shift
	k8s_start "$name" nsenter --mount="/proc/$K8S_HOLDER/ns/mnt" -- "$@"
}

# k8s_stop PID: SIGTERM, SIGKILL after 5 s
k8s_stop() {
	[ -n "$1" ] || return 0
	kill "$1" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# k8s_start_containerd: containerd in the namespace, ready for ctr, with the hook's node and
# config in its environment (the shim of the handler way reads them; each left out where
# k8s_up was given it empty: the shim then reads its installed config) and a 64 KiB soft
# memlock, which its containers inherit: a raise shows. Its config is $K8S_CD_CONFIG (a path
# in the namespace; default $CD/config.toml). K8S_CD_RESPAWN=1: started again each time it
# exits, as its service manager would (containerd exits on the installer's SIGHUP, at its
# default action even where this was started with it ignored), each exit logged
# ("orh-k8s: containerd exited, status N"); SIGTERM ends both
K8S_DEFAULT_MEMLOCK=64
k8s_start_containerd() {
	local envs=(PATH="$PATH")
	[ -z "$K8S_HOOK_CONFIG" ] || envs+=(OCI_RDMA_HOOK_CONFIG="$K8S_HOOK_CONFIG")
	[ -z "$K8S_HOOK_SYSROOT" ] || envs+=(OCI_RDMA_HOOK_SYSROOT="$K8S_HOOK_SYSROOT")
	k8s_in_ns containerd env "${envs[@]}" \
		sh -c 'ulimit -S -l "$1" || exit 1
			[ "$3" = 1 ] || exec containerd --config "$2"
			trap "kill \$c 2>/dev/null; wait \$c; exit 0" TERM
			while :; do
				env --default-signal=HUP containerd --config "$2" &
				c=$!
				wait $c
				echo "orh-k8s: containerd exited, status $?" >&2
				sleep 0.2
			done' _ \
		"$K8S_DEFAULT_MEMLOCK" "${K8S_CD_CONFIG:-$CD/config.toml}" "${K8S_CD_RESPAWN:-0}"
	wait_for 30 ctr -a "$CD/containerd.sock" version
}

# k8s_stop_containerd: containerd stopped (the kubelet waits for it to come back)
k8s_stop_containerd() {
	local keep=() p
	k8s_stop "${K8S_PID_containerd:-}"
	for p in "${K8S_PIDS[@]}"; do [ "$p" = "${K8S_PID_containerd:-}" ] || keep+=("$p"); done
	K8S_PIDS=("${keep[@]}")
	K8S_PID_containerd=""
}

# k8s_up NODE CONF: the cluster, its node Ready, the default service account made and the
# images imported; the hook's node (a sysroot) and config are NODE and CONF (either empty:
# containerd's environment does not name it). cant_run where
# a part does not start, naming it and the end of its log.
k8s_up() {
	local t0=$SECONDS p
	K8S=$WORK/k8s CD=$WORK/k8s/cd
	K8S_HOOK_SYSROOT=$1 K8S_HOOK_CONFIG=$2
	# containerd's NRI socket: $K8S_NRI_SOCK (a path in the namespace), by default under $CD
	NRI_SOCK=${K8S_NRI_SOCK:-$CD/nri.sock}
	K8S_CGROUP=orh-k8s-$$
	mkdir -p "$K8S/kubelet" "$K8S/etcd" "$CD"
	read -r K8S_ETCD_PORT K8S_PEER_PORT K8S_API_PORT K8S_KUBELET_PORT <<<"$(k8s_ports 4)"
	k8s_certs || cant_run "openssl could not make the cluster's certificates"
	k8s_kubeconfig "$K8S/admin.kubeconfig" admin
	k8s_kubeconfig "$K8S/kubelet.kubeconfig" node
	k8s_containerd_config
	k8s_kubelet_config
	printf 'runtime-endpoint: unix://%s/containerd.sock\nimage-endpoint: unix://%s/containerd.sock\n' \
		"$CD" "$CD" >"$K8S/crictl.yaml"
	k8s_cgroups make || cant_run "cannot make the cgroup /$K8S_CGROUP"

	# the namespace holder: its mounts, then a sleep that k8s_down ends
	unshare -m --propagation private sh -c '
		mount -t tmpfs -o mode=755 orh-k8s /var/lib && mount -t tmpfs -o mode=755 orh-k8s /var/log &&
		mkdir /var/lib/kubelet && mount --bind "$1" /var/lib/kubelet || exit 1
		for d in /run/containerd /var/run/nri; do
			[ ! -d "$d" ] || mount -t tmpfs -o mode=700 orh-k8s "$d" || exit 1
		done
		exec sleep 86400' _ "$K8S/kubelet" >"$K8S/holder.log" 2>&1 &
	K8S_HOLDER=$!
	K8S_STARTED+=("$K8S_HOLDER")
	for _ in $(seq 100); do
		[ "$(cat "/proc/$K8S_HOLDER/comm" 2>/dev/null)" = sleep ] && break
		kill -0 "$K8S_HOLDER" 2>/dev/null || break
		sleep 0.05
	done
	[ "$(cat "/proc/$K8S_HOLDER/comm" 2>/dev/null)" = sleep ] ||
		cant_run "the private mount namespace: $(cat "$K8S/holder.log")"
	K8S_NS=$(readlink "/proc/$K8S_HOLDER/ns/mnt")
	# the caller's own mounts in the namespace, before containerd starts ($K8S_NS_SETUP: a
	# function's name)
	[ -z "${K8S_NS_SETUP:-}" ] || "$K8S_NS_SETUP" ||
		cant_run "$K8S_NS_SETUP: the namespace's mounts failed"

	k8s_start etcd etcd --name orh --data-dir "$K8S/etcd" --unsafe-no-fsync \
		--listen-client-urls "http://127.0.0.1:$K8S_ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$K8S_ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$K8S_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$K8S_PEER_PORT" \
		--initial-cluster "orh=http://127.0.0.1:$K8S_PEER_PORT" --log-level warn
	k8s_start kube-apiserver kube-apiserver --etcd-servers "http://127.0.0.1:$K8S_ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$K8S_API_PORT" \
		--tls-cert-file "$K8S/pki/apiserver.crt" --tls-private-key-file "$K8S/pki/apiserver.key" \
		--client-ca-file "$K8S/pki/ca.crt" \
		--service-account-key-file "$K8S/pki/sa.pub" \
		--service-account-signing-key-file "$K8S/pki/sa.key" \
		--service-account-issuer https://kubernetes.default.svc \
		--service-cluster-ip-range 10.96.0.0/24 --endpoint-reconciler-type none \
		--authorization-mode Node,RBAC --allow-privileged \
		--kubelet-client-certificate "$K8S/pki/admin.crt" \
		--kubelet-client-key "$K8S/pki/admin.key" \
		--kubelet-preferred-address-types Hostname
	wait_for 60 kc get --raw /readyz ||
		cant_run "kube-apiserver not ready: $(tail -5 "$K8S/kube-apiserver.log")"

	k8s_start_containerd ||
		cant_run "containerd did not start: $(tail -5 "$K8S/containerd.log")"
	k8s_in_ns kubelet kubelet --config "$K8S/kubelet.yaml" \
		--kubeconfig "$K8S/kubelet.kubeconfig" --hostname-override localhost
	k8s_start kube-scheduler kube-scheduler --kubeconfig "$K8S/admin.kubeconfig" \
		--secure-port 0 --leader-elect=false
	k8s_start kube-controller-manager kube-controller-manager \
		--kubeconfig "$K8S/admin.kubeconfig" --secure-port 0 --leader-elect=false \
		--service-account-private-key-file "$K8S/pki/sa.key" \
		--root-ca-file "$K8S/pki/ca.crt" --use-service-account-credentials=false
	k8s_images || cant_run "the local images: $(cat "$K8S/images.log")"
	for _ in $(seq 120); do
		kc get node localhost >/dev/null 2>&1 && break
		kill -0 "$K8S_PID_kubelet" 2>/dev/null ||
			cant_run "the kubelet exited: $(tail -5 "$K8S/kubelet.log")"
		sleep 0.5
	done
	kc get node localhost >/dev/null 2>&1 ||
		cant_run "the kubelet did not register: $(tail -5 "$K8S/kubelet.log")"
	kc wait --for=condition=Ready node/localhost --timeout=60s >/dev/null ||
		cant_run "the node is not Ready: $(kc get node localhost -o jsonpath='{.status.conditions}')"
	wait_for 60 kc get serviceaccount default ||
		cant_run "no default service account: $(tail -5 "$K8S/kube-controller-manager.log")"
	K8S_UP_S=$((SECONDS - t0))
	for p in etcd kube-apiserver kube-scheduler kube-controller-manager kubelet; do
		echo "$p $("$K8S_BIN/$p" --version 2>/dev/null | head -1 | grep -o '[0-9][0-9.]*$')"
	done >"$K8S/versions"
	echo "kubectl $("$K8S_BIN/kubectl" version --client -o json | jq -r .clientVersion.gitVersion)" \
		>>"$K8S/versions"
}

# k8s_images: the pause image and localhost/orh-e2e-bb:1 ($WORK/rootfs, make_rootfs)
k8s_images() {
	local i py
	py=$(command -v python3)
	mkdir -p "$K8S/img/pause"
	cp "$PAUSE" "$K8S/img/pause/pause"
	{
		"$py" "$K8S_SRC/tests/cri/mkimage.py" "$K8S/img/pause" localhost/orh-pause:1 \
			"$K8S/img/pause.tar" --entrypoint /pause &&
			"$py" "$K8S_SRC/tests/cri/mkimage.py" "$WORK/rootfs" localhost/orh-e2e-bb:1 \
				"$K8S/img/bb.tar" &&
			for i in pause bb; do
				ctr -a "$CD/containerd.sock" -n k8s.io images import --snapshotter native \
					"$K8S/img/$i.tar" || exit 1
			done
	} >"$K8S/images.log" 2>&1
}

# k8s_down: the pods, then each daemon by its pid (the kubelet and containerd in the
# namespace, then the control plane), every process left in the kubelet's cgroup and in the
# namespace (counted in K8S_SWEPT), the holder, the cgroup. Safe to call twice, and on a
# cluster half up.
k8s_down() {
	local p pid
	[ -n "${K8S:-}" ] || return 0
	if [ -n "${K8S_PID_kube_apiserver:-}" ] && kill -0 "$K8S_PID_kube_apiserver" 2>/dev/null; then
		kc delete pods --all --all-namespaces --grace-period=0 --force --wait=false \
			>/dev/null 2>&1 || true
	fi
	if [ -n "${K8S_PID_containerd:-}" ] && kill -0 "$K8S_PID_containerd" 2>/dev/null; then
		k8s_stop "${K8S_PID_kubelet:-}"
		timeout 30 crictl --config "$K8S/crictl.yaml" rmp -af >/dev/null 2>&1 || true
	fi
	for ((p = ${#K8S_PIDS[@]} - 1; p >= 0; p--)); do
		k8s_stop "${K8S_PIDS[p]}"
	done
	K8S_PIDS=()
	# what is left of the pods (each in the kubelet's cgroupRoot, in a mount namespace of its
	# own), then what is left in the namespace: the shims of pods crictl could not remove
	for pid in $(find /sys/fs/cgroup/"$K8S_CGROUP" /sys/fs/cgroup/*/"$K8S_CGROUP" \
		-name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
		kill -9 "$pid" 2>/dev/null && K8S_SWEPT=$((K8S_SWEPT + 1))
	done
	if [ -n "$K8S_NS" ]; then
		for pid in /proc/[0-9]*; do
			pid=${pid#/proc/}
			[ "$pid" != "$K8S_HOLDER" ] || continue
			[ "$(readlink "/proc/$pid/ns/mnt" 2>/dev/null)" = "$K8S_NS" ] || continue
			kill -9 "$pid" 2>/dev/null && K8S_SWEPT=$((K8S_SWEPT + 1))
		done
	fi
	k8s_stop "$K8S_HOLDER"
	K8S_HOLDER=""
	for _ in $(seq 20); do
		k8s_cgroups remove
		[ -n "$(ls -d /sys/fs/cgroup/*/"$K8S_CGROUP" /sys/fs/cgroup/"$K8S_CGROUP" 2>/dev/null)" ] ||
			break
		sleep 0.2
	done
}

# k8s_gone: after k8s_down, no process k8s_up started is alive, none is left in the
# kubelet's cgroup, and the cgroup is gone
k8s_gone() {
	local p
	for p in "${K8S_STARTED[@]}"; do
		! kill -0 "$p" 2>/dev/null || return 1
	done
	[ -z "$(ls -d /sys/fs/cgroup/"$K8S_CGROUP" /sys/fs/cgroup/*/"$K8S_CGROUP" 2>/dev/null)" ]
}

# ---- what the lanes of the DaemonSets share (e2e-k8s-installer.sh, e2e-k8s-nri.sh) ---------
# k8s_ns COMMAND...: COMMAND in the cluster's mount namespace
k8s_ns() { nsenter --mount="/proc/$K8S_HOLDER/ns/mnt" -- "$@"; }

# snap PATH...: each path's entries with type, mode and link target, each file's sha256
snap() {
	local p
	for p in "$@"; do
		if [ -e "$p" ]; then
			find "$p" -printf '%p %y %m %l\n' | LC_ALL=C sort
			find "$p" -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum
		else
			echo "absent $p"
		fi
	done
}

# k8s_image_builder FILE: FILE, an executable that does `docker build -q -t TAG CTX` of the
# Dockerfile deploy/installer/build-image.sh writes (FROM scratch, COPY rootfs/ /, ENTRYPOINT):
# the image archive for `ctr images import`, written at $ORH_IMAGE_TAR, by tests/cri/mkimage.py
# (found at $ORH_MKIMAGE_DIR)
k8s_image_builder() {
	cat >"$1" <<'EOF'
#!/usr/bin/env python3
# `docker build -q -t TAG CTX` of a Dockerfile of FROM scratch, COPY rootfs/ / and ENTRYPOINT
# alone (build-image.sh's): the image archive for `ctr images import`, at $ORH_IMAGE_TAR
import json, os, sys
sys.path.insert(0, os.environ["ORH_MKIMAGE_DIR"])
import mkimage
a = sys.argv[1:]
if len(a) != 5 or a[:3] != ["build", "-q", "-t"]:
    sys.exit("image-build: not a build -q -t TAG CTX: %r" % a)
lines = [l for l in open(os.path.join(a[4], "Dockerfile")).read().splitlines() if l.strip()]
if len(lines) != 3 or lines[:2] != ["FROM scratch", "COPY rootfs/ /"] or \
        not lines[2].startswith("ENTRYPOINT "):
    sys.exit("image-build: not FROM scratch, COPY rootfs/ /, ENTRYPOINT: %r" % lines)
mkimage.write_image(os.path.join(a[4], "rootfs"), a[3], os.environ["ORH_IMAGE_TAR"],
                    json.loads(lines[2][len("ENTRYPOINT "):]))
EOF
	chmod 755 "$1"
}

# k8s_sample_node: what the DaemonSet lanes serve: the sample node seed001-roce ($WORK/node,
# $INSIDE), a node config naming it as the sysroot ($WORK/node.conf: activation =
# annotation, memlock = 4M, nccl_record = no), the plan it gives ($PLAN), what a pod shows of
# itself ($SHOW: PID 1's memlock, whether /etc/nccl.conf is there, an open of each RDMA node)
# and the pods' image tree ($WORK/rootfs); $WORK/bin made
k8s_sample_node() {
	spec_edit_node # $WORK/node (seed001-roce), $INSIDE
	write_conf "$WORK/node.conf" "[node]
sysroot = $WORK/node
memlock = 4M
[containers]
activation = annotation
nccl_record = no"
	PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)
	SHOW='sed -n "s/^Max locked memory *\([0-9a-z]*\).*/pid1-memlock \1/p" /proc/1/limits
[ -e /etc/nccl.conf ] && echo "nccl.conf there"
for f in /dev/infiniband/*; do [ -e "$f" ] && probe "$f"; done; true'
	make_rootfs "$WORK/rootfs"
	mkdir -p "$WORK/bin"
}

MARK=orh-k8s-started
# pod NAME [JQ]: a pod of one container "work" (busybox and the probe) that prints its marker
# and sleeps, PID 1 sh's exec of sleep; JQ edits it. Made with kubectl, then waited on
# until Ready (a failed check naming its state where it is not)
pod() {
	local name=$1
	jq -n --arg name "$name" --arg mark "$MARK" '{
		apiVersion: "v1", kind: "Pod",
		metadata: {name: $name, namespace: "default", annotations: {}},
		spec: {terminationGracePeriodSeconds: 0, automountServiceAccountToken: false,
			containers: [{name: "work", image: "localhost/orh-e2e-bb:1",
				imagePullPolicy: "Never",
				command: ["/bin/sh", "-c", ("echo " + $mark + "; exec sleep 3600")]}]}}' |
		jq "${2:-.}" >"$WORK/pod-$name.json"
	if ! kc apply -f "$WORK/pod-$name.json" >"$WORK/apply.err" 2>&1; then
		not_ok "$name: kubectl apply: $(cat "$WORK/apply.err")"
		return 0
	fi
	kc wait --for=condition=Ready "pod/$name" --timeout=60s >/dev/null 2>&1 || true
	check "$name: the pod is Ready ($(kc get pod "$name" -o jsonpath='{.status.phase} {.status.containerStatuses[0].state}' 2>&1 | head -c 300))" \
		eval 'kc wait --for=condition=Ready "pod/$name" --timeout=1s >/dev/null 2>&1'
}
# inside NAME: `kubectl exec` of $INSIDE and $SHOW in the pod: $OUT, $RC; checked to be the
# output of a process that ran in the container
inside() {
	RC=0
	OUT=$(kc exec "$1" -c work -- /bin/sh -c "$INSIDE; $SHOW" 2>"$WORK/exec.err") || RC=$?
	ERR=$(cat "$WORK/exec.err")
	check_ran "$1 (kubectl exec, exit $RC)"
	check "$1: its PID 1 printed the marker (kubectl logs)" logged "$1"
}
logged() { kc logs "$1" -c work 2>/dev/null | grep -qx "$MARK"; }
seen() { grep "^$1" <<<"$OUT" | tr '\n' ' '; }
# served NAME: every plan setting in /etc/nccl.conf, the uverbs nodes with the node's
# numbers and allowed, PID 1's memlock the node's 4 MiB
served() {
	local want
	conf_has_plan "$1: /etc/nccl.conf has every plan setting"
	want=$(stat -c '%t:%T' "$WORK/node/dev/infiniband/uverbs1")
	check "$1: /dev/infiniband/uverbs1 has the node's numbers ($want)" \
		grep -qx "/dev/infiniband/uverbs1 character special file $want" <<<"$OUT"
	check "$1: uverbs1 and uverbs8 are allowed by the device cgroup (open: ENXIO, not EPERM)" \
		eval 'grep -qx "/dev/infiniband/uverbs1 ENXIO" <<<"$OUT" &&
			grep -qx "/dev/infiniband/uverbs8 ENXIO" <<<"$OUT"'
	check "$1: PID 1's memlock is the node's 4 MiB ($(seen pid1-memlock))" \
		grep -qx 'pid1-memlock 4194304' <<<"$OUT"
}
# left_alone NAME: no NCCL setting, no /etc/nccl.conf, no RDMA node, containerd's memlock
left_alone() {
	check "$1: no NCCL setting, no RDMA device" out_lacks -e 'NCCL_' -e infiniband
	check "$1: no /etc/nccl.conf" out_lacks -x 'nccl.conf there'
	check "$1: PID 1 has containerd's memlock, $K8S_DEFAULT_MEMLOCK KiB ($(seen pid1-memlock))" \
		grep -qx "pid1-memlock $((K8S_DEFAULT_MEMLOCK * 1024))" <<<"$OUT"
}
gone() { ! kc get pod "$1" >/dev/null 2>&1; }
# end NAME: the pod deleted, and gone
end() {
	kc delete pod "$1" --grace-period=0 --wait=false >/dev/null 2>&1 || true
	check "$1: deleted" wait_for 30 gone "$1"
}
