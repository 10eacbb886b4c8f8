#!/usr/bin/env bash
# Install everything oci-rdma-hook needs to build and test, from Debian 12's packages,
# and the Go peers the suite judges with. Idempotent: installs only what is missing.
# Run as root.
# Usage: bash tests/setup-debian.sh [--demo]
#   --demo: only what tests/demo.sh uses (the build, runc and a busybox rootfs); no Go peers
set -euo pipefail
demo=0
[ "${1:-}" == "--demo" ] && demo=1

demo_packages=(
	# build (meson reads the tests' dependencies at setup: criterion, libcap, libseccomp)
	meson ninja-build pkg-config gcc libc6-dev python3
	libjansson-dev libibverbs-dev libcap-dev libseccomp-dev libinih-dev libcriterion-dev
	libprotobuf-c-dev
	# a real container: runc and a busybox rootfs
	runc busybox-static
)
packages=(
	"${demo_packages[@]}"
	# tests/manifests.sh: the Kubernetes examples in deploy/kubernetes
	python3-yaml
	# the test nri-proto-gen: NRI's C messages made again (src/cmd/nri/proto-gen.sh), with
	# google/protobuf/descriptor.proto from libprotobuf-dev (the Debian package's
	# Build-Depends for its tests name both)
	protobuf-c-compiler libprotobuf-dev
	# fuzzing and sanitizers
	clang libclang-rt-14-dev
	# end-to-end: real runtimes and a busybox rootfs
	runc crun podman containerd docker.io busybox-static iproute2 uidmap libcap2-bin
	# tests/e2e/e2e-cri.sh: a CRI client (tests/cri/cri.py, its protoc is grpc_tools' own)
	# and the bridge CNI (no iptables: no masquerade)
	python3-grpcio python3-grpc-tools containernetworking-plugins
	# the Debian package (debian/, tests/package.sh): build, lint, man -w
	build-essential debhelper dpkg-dev lintian man-db
	# the RPM package (rpm/, tests/package-rpm.sh): rpmbuild, rpmlint, rpm --root
	rpm rpmlint
	# tests/manifests.sh on Python 3.10 (no tomllib)
	python3-tomli
	# the VM lane (tests/vm): Debian's kernel under qemu, soft-RoCE, verbs tools
	qemu-system-x86 cpio kmod ibverbs-providers rdmacm-utils perftest
	# diagnostics and benchmark
	ibverbs-utils hyperfine time jq strace
)

((demo)) && packages=("${demo_packages[@]}")
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# the demo's few packages without their recommends (podman's, qemu's: the suite's)
	recommends=()
	((demo)) && recommends=(--no-install-recommends)
	apt-get install -y -qq "${recommends[@]}" "${missing[@]}" >/dev/null
fi
echo "setup: all packages present"
((demo)) && exit 0

# Real peers that Debian 12 lacks, built from the Go module proxy with the Go toolchain on
# the machine (tests/e2e/e2e-fleet.sh judges configure with them): containerd 2.x with its
# ctr and runc shim, nvidia-ctk (its `runtime configure` makes the NVIDIA layouts) and
# crictl. Installed into ORH_GO_BIN, once: a version file says what is there.
ORH_GO_BIN=${ORH_GO_BIN:-/opt/oci-rdma-hook-peers/bin}
go_peers=(
	"github.com/containerd/containerd/v2/cmd/containerd@v2.3.4"
	"github.com/containerd/containerd/v2/cmd/ctr@v2.3.4"
	"nogrpc github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@v2.3.4"
	"github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk@v1.20.0"
	"sigs.k8s.io/cri-tools/cmd/crictl@v1.36.0"
)
GO=$(command -v go || echo /usr/local/go/bin/go)
if [ ! -x "$GO" ]; then
	echo "setup: no Go toolchain: the fleet tests will say they cannot run"
elif [ "$(cat "$ORH_GO_BIN/.versions" 2>/dev/null)" != "${go_peers[*]}" ]; then
	echo "setup: building the Go peers into $ORH_GO_BIN"
	mkdir -p "$ORH_GO_BIN"
	for p in "${go_peers[@]}"; do
		if [ "${p%% *}" = nogrpc ]; then
			GOBIN=$ORH_GO_BIN CGO_ENABLED=0 "$GO" install -tags no_grpc "${p#nogrpc }"
		else
			GOBIN=$ORH_GO_BIN "$GO" install "$p"
		fi
	done
	printf '%s' "${go_peers[*]}" >"$ORH_GO_BIN/.versions"
fi
# The project's own Go peers (tests/nri/*: each a module of its own, its dependencies pinned
# in its go.sum, fetched from the module proxy): built into ORH_GO_BIN when the binary is
# missing or its source changed (a stamp beside it holds the source's checksum).
if [ -x "$GO" ]; then
	for d in "$(dirname "$0")"/nri/*/; do
		[ -f "$d/go.mod" ] || continue
		name=$(basename "$d")
		sum=$(cd "$d" && cat go.mod go.sum ./*.go | sha256sum | cut -d' ' -f1)
		if [ ! -x "$ORH_GO_BIN/$name" ] ||
			[ "$(cat "$ORH_GO_BIN/.$name.src" 2>/dev/null)" != "$sum" ]; then
			echo "setup: building $name into $ORH_GO_BIN"
			mkdir -p "$ORH_GO_BIN"
			(cd "$d" && CGO_ENABLED=0 "$GO" build -trimpath -o "$ORH_GO_BIN/$name" .)
			printf '%s' "$sum" >"$ORH_GO_BIN/.$name.src"
		fi
	done
fi
# The Kubernetes lane's peers (tests/k8s/e2e-k8s.sh, tests/k8s/helm-chart.sh): kube-apiserver,
# kubelet, kube-scheduler, kube-controller-manager and kubectl v1.34.4, etcd 3.7.3, helm
# v3.22.0 and orh-rdmadev (tests/k8s/rdmadev, the lane's device plugin and DRA driver),
# built once into ORH_GO_BIN/k8s by tests/k8s/build-peers.sh (a version file there
# says what is built; a cold build takes about 20 minutes of two cores)
if [ -x "$GO" ]; then
	GO=$GO ORH_GO_BIN=$ORH_GO_BIN bash "$(dirname "$0")/k8s/build-peers.sh" ||
		echo "setup: the Kubernetes peers were not built: the lane will say it cannot run"
fi
echo "setup: Go peers in $ORH_GO_BIN"
