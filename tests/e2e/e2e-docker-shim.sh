#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end: dockerd with the shim registered as a runtime in daemon.json by
# `oci-rdma-hook configure --engine docker` and a reload (SIGHUP), every other key kept
# ("runtimes": {"rdma": {"path": ".../oci-rdma-runtime"}}); `docker run --runtime=rdma`
# gives the container the devices, the memlock limit and the plan's settings in
# /etc/nccl.conf (written by the nccl-conf hook the shim registers), keeps a variable the
# user set and the image's own nccl.conf lines, and a process started with `docker exec`
# sees the same settings; `docker run` with the default runtime stays untouched. Where
# dockerd ran another runtime by default, configure keeps it in the entry's runtimeArgs and
# the shim chains it, whatever runtime the node config names.
# Under activation = annotation, `docker run -e OCI_RDMA_HOOK_ENABLE=true` asks for RDMA.
# containerd and dockerd are private to the test (own roots, sockets and pidfile).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e-containerd-lib.sh"

need_root_runc
command -v dockerd >/dev/null 2>&1 || cant_run "dockerd (docker.io) not installed"
command -v docker >/dev/null 2>&1 || cant_run "docker client not installed"
setup_work
trap 'rc=$?; stop_daemons; cleanup_work $rc' EXIT

spec_edit_node
make_rootfs "$WORK/rootfs"
tar -C "$WORK/rootfs" -cf "$WORK/rootfs.tar" .
make_image_rootfs "$WORK/rootfs-img"
tar -C "$WORK/rootfs-img" -cf "$WORK/rootfs-img.tar" .
install_shim
start_containerd "$WORK/node.conf" "$WORK/node"

D=$WORK/docker
mkdir -p "$D"
# the runtime is registered as an operator would: configure merges it into daemon.json,
# dockerd reloads it on SIGHUP
printf '{\n  "log-level": "warn"\n}\n' >"$D/daemon.json"
export DOCKER_HOST=unix://$D/docker.sock
OCI_RDMA_HOOK_CONFIG=$WORK/node.conf OCI_RDMA_HOOK_SYSROOT=$WORK/node \
	dockerd --config-file "$D/daemon.json" --data-root "$D/data" --exec-root "$D/exec" \
	--pidfile "$D/docker.pid" -H "$DOCKER_HOST" --containerd "$CD_SOCK" \
	--storage-driver vfs --bridge none --iptables=false --ip-masq=false \
	--exec-opt native.cgroupdriver=cgroupfs >"$D/dockerd.log" 2>&1 &
DAEMON_PIDS+=($!)
wait_for 60 docker version || cant_run "dockerd did not start: $(tail -5 "$D/dockerd.log")"
runtimes() { docker info --format '{{json .Runtimes}}'; }
check "before configure, dockerd has no runtime rdma" bash -c '! runtimes | grep -q "\"rdma\""'
export -f runtimes
check "configure --engine docker merges the runtime into daemon.json" \
	"$HOOK" --config "$WORK/node.conf" configure --engine docker --engine-config "$D/daemon.json" --shim "$SHIM"
check "daemon.json keeps its other key" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(d != {"log-level": "warn", "runtimes": {"rdma": {"path": sys.argv[2]}}})' "$D/daemon.json" "$SHIM"
kill -HUP "$(cat "$D/docker.pid")"
check "dockerd reloads daemon.json and lists runtime rdma with the shim's path" \
	wait_for 30 bash -c 'runtimes | python3 -c "import json, sys; sys.exit(json.load(sys.stdin)[\"rdma\"][\"path\"] != sys.argv[1])" "$1"' _ "$SHIM"
docker import "$WORK/rootfs.tar" orh-e2e-bb:latest >/dev/null || cant_run "docker import failed"
docker import "$WORK/rootfs-img.tar" orh-e2e-img:latest >/dev/null || cant_run "docker import failed"

IMAGE=orh-e2e-bb
run_docker() {
	RC=0
	OUT=$(docker run --rm --network none "$@" "$IMAGE" /bin/sh -c "$INSIDE" \
		2>"$WORK/docker.err" </dev/null) || RC=$?
	ERR=$(cat "$WORK/docker.err")
}
PLAN=$("$HOOK" --sysroot "$WORK/node" --config "$WORK/node.conf" env)

run_docker --runtime=rdma -e NCCL_IB_HCA=mine
check "docker run --runtime=rdma succeeds (rc $RC: $ERR)" [ "$RC" = 0 ]
check_spec_edit_inside
# (of a container that ran: an empty output carries no message either)
shim_silent() { inside_ran && ! grep -q oci-rdma <<<"$OUT$ERR"; }
check "the container's output carries no shim message" shim_silent

# the image's own /etc/nccl.conf: its NCCL_IB_HCA is what NCCL gets
IMAGE=orh-e2e-img run_docker --runtime=rdma
check "image with its own nccl.conf: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_image_conf_kept "docker shim"

# a process started later with docker exec (a launcher, a notebook) reads the same file
RC=0
docker run -d --name "orh-e2e-$$-x" --network none --runtime=rdma orh-e2e-bb sleep 600 \
	>/dev/null 2>"$WORK/docker.err" || RC=$?
check "docker run -d --runtime=rdma succeeds (rc $RC: $(cat "$WORK/docker.err"))" [ "$RC" = 0 ]
RC=0
OUT=$(docker exec "orh-e2e-$$-x" /bin/sh -c "$INSIDE" 2>&1) || RC=$?
check_conf_has_plan "docker exec: the process sees every plan setting in /etc/nccl.conf"
docker rm -f "orh-e2e-$$-x" >/dev/null 2>&1 || true

# docker run --device: the container holds uverbs2 (mlx5_2's), and gets exactly that
# device's port, its node and its grant, plus rdma_cm (rule 8)
GIVEN='ls /dev/infiniband | tr "\n" " "; echo; sed -n "s/^NCCL_IB_HCA=/conf:NCCL_IB_HCA=/p" /etc/nccl.conf; mknod /tmp/u1 c 231 193 && probe /tmp/u1; mknod /tmp/u2 c 231 194 && probe /tmp/u2; true'
RC=0
OUT=$(docker run --rm --network none --runtime=rdma --device "$WORK/node/dev/infiniband/uverbs2:/dev/infiniband/uverbs2" \
	orh-e2e-bb /bin/sh -c "$GIVEN" 2>"$WORK/docker.err" </dev/null) || RC=$?
check "--device uverbs2: runs (rc $RC: $(cat "$WORK/docker.err"))" [ "$RC" = 0 ]
check "--device uverbs2: /dev/infiniband holds rdma_cm and uverbs2 alone" \
	grep -qx "rdma_cm uverbs2 " <<<"$OUT"
check "--device uverbs2: NCCL_IB_HCA is mlx5_2's port alone" grep -qx "conf:NCCL_IB_HCA==mlx5_2:1" <<<"$OUT"
check "--device uverbs2: no grant for uverbs1 (a 231:193 node cannot be opened: EPERM)" \
	grep -qx "/tmp/u1 EPERM" <<<"$OUT"
check "--device uverbs2: its own node is granted (ENXIO: allowed, no driver here)" \
	grep -qx "/tmp/u2 ENXIO" <<<"$OUT"

run_docker
check "default runtime: container runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "default runtime"

# activation = annotation. docker before API 1.43 (Debian 12's 20.10) has no
# --annotation, and a --label never reaches the spec: the container asks with
# -e OCI_RDMA_HOOK_ENABLE=true, which every version carries to process.env. The shim
# reads the node config at every start: the mode changes here without a restart.
printf '[containers]\nactivation = annotation\n' >>"$WORK/node.conf"
run_docker --runtime=rdma -e OCI_RDMA_HOOK_ENABLE=true
check "activation = annotation, -e OCI_RDMA_HOOK_ENABLE=true: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_served "-e OCI_RDMA_HOOK_ENABLE=true"
run_docker --runtime=rdma
check "activation = annotation, no request: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "no request"
run_docker --runtime=rdma --label oci-rdma-hook/enable=true
check "--label oci-rdma-hook/enable=true: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "--label oci-rdma-hook/enable=true (labels are not in the spec)"
run_docker --runtime=rdma -e OCI_RDMA_HOOK_ENABLE=yes
check "-e OCI_RDMA_HOOK_ENABLE=yes under on_error=warn: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "-e OCI_RDMA_HOOK_ENABLE=yes"
# an image may ask in its own ENV (docs/security.md): like -e, and -e overrides it
docker import --change 'ENV OCI_RDMA_HOOK_ENABLE=true' "$WORK/rootfs.tar" orh-e2e-bb-asks:latest \
	>/dev/null || cant_run "docker import failed"
IMAGE=orh-e2e-bb-asks run_docker --runtime=rdma
check "an image with ENV OCI_RDMA_HOOK_ENABLE=true: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_served "an image with ENV OCI_RDMA_HOOK_ENABLE=true"
IMAGE=orh-e2e-bb-asks run_docker --runtime=rdma -e OCI_RDMA_HOOK_ENABLE=false
check "that image with -e OCI_RDMA_HOOK_ENABLE=false: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "that image run with -e OCI_RDMA_HOOK_ENABLE=false"
printf 'request_env = no\n' >>"$WORK/node.conf"
IMAGE=orh-e2e-bb-asks run_docker --runtime=rdma
check "that image on a node with request_env = no: runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_not_served "that image on a node with request_env = no"

docker rmi -f orh-e2e-bb-asks >/dev/null 2>&1 || true

# A container the shim refuses: docker's own error says why (the shim appends the reason
# to runc's --log file, whose last error containerd reports). Asking for RDMA takes an
# annotation, which docker passes on from API 1.43 (docker 24) only; every daemon shows a
# runtime the shim cannot find.
api=$(docker version -f '{{.Server.APIVersion}}')
if printf '1.43\n%s\n' "$api" | sort -V -C; then
	printf '[containers]\non_error = fail\nimage_check = warn\n' >>"$WORK/node.conf"
	run_docker --runtime=rdma --annotation oci-rdma-hook/enable=true \
		--annotation oci-rdma-hook/preset=../../x
	check "on_error=fail: a refused container does not run (rc $RC)" \
		bash -c '[ "$1" != 0 ] && ! grep -q "^memlock" <<<"$2"' _ "$RC" "$OUT"
	check "on_error=fail: docker's error gives the reason (stderr: $ERR)" \
		grep -q "annotation 'oci-rdma-hook/preset': unknown preset '../../x'" <<<"$ERR"
else
	echo "# docker API $api: no annotations, so no container can ask for RDMA here"
fi
printf '[containers]\nruntime = no-such-runtime-orh\n' >>"$WORK/node.conf"
run_docker --runtime=rdma
check "runtime not found: the container does not run (rc $RC)" \
	bash -c '[ "$1" != 0 ] && ! grep -q "^memlock" <<<"$2"' _ "$RC" "$OUT"
check "runtime not found: docker's error gives the reason (stderr: $ERR)" \
	grep -q "oci-rdma-runtime: runtime 'no-such-runtime-orh' not found in " <<<"$ERR"

# a node whose dockerd ran another runtime by default: configure keeps that runtime in the
# entry's runtimeArgs, and the shim chains it; the node config's runtime (which containerd
# or CRI-O may set: here the missing one above) is not docker's
printf '#!/bin/sh\necho "$*" >>"%s"\nexec runc "$@"\n' "$WORK/chained.log" >"$WORK/chained-runc"
chmod 755 "$WORK/chained-runc"
python3 - "$D/daemon.json" "$WORK/chained-runc" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["default-runtime"] = "chained"
d["runtimes"]["chained"] = {"path": sys.argv[2]}
json.dump(d, open(sys.argv[1], "w"), indent=2)
PY
check "configure keeps docker's default runtime in the entry's runtimeArgs" bash -c \
	'"$1" --config "$2" configure --engine docker --engine-config "$3" --shim "$4" >/dev/null 2>&1 &&
	 python3 -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))[\"runtimes\"][\"rdma\"] != {\"path\": sys.argv[2], \"runtimeArgs\": [\"--orh-runtime=\" + sys.argv[3]]})" "$3" "$4" "$5"' \
	_ "$HOOK" "$WORK/node.conf" "$D/daemon.json" "$SHIM" "$WORK/chained-runc"
kill -HUP "$(cat "$D/docker.pid")"
check "dockerd reloads the entry with its runtimeArgs" \
	wait_for 30 bash -c 'runtimes | grep -q -- "--orh-runtime="'
rm -f "$WORK/chained.log"
printf '[containers]\nactivation = always\n' >>"$WORK/node.conf"
run_docker --runtime=rdma
check "runtimeArgs: docker run --runtime=rdma runs (rc $RC: $ERR)" [ "$RC" = 0 ]
check_served "runtimeArgs: the shim served it"
check "runtimeArgs: the shim executed docker's own default runtime, without the argument" \
	bash -c 'grep -q " create " "$1" && ! grep -q -- "--orh-runtime" "$1"' _ "$WORK/chained.log"

docker rmi -f orh-e2e-bb orh-e2e-img >/dev/null 2>&1 || true
check "configure --undo takes the runtime out of daemon.json, every other key kept" bash -c \
	'"$1" --config "$2" configure --engine docker --engine-config "$3" --shim "$4" --undo >/dev/null 2>&1 &&
	 python3 -c "import json, sys; sys.exit(json.load(open(sys.argv[1])) != {\"log-level\": \"warn\", \"default-runtime\": \"chained\", \"runtimes\": {\"chained\": {\"path\": sys.argv[2]}}})" "$3" "$5"' \
	_ "$HOOK" "$WORK/node.conf" "$D/daemon.json" "$SHIM" "$WORK/chained-runc"
# (a reload does not drop it: dockerd applies only the keys its file sets, and a file
# without "runtimes" leaves the runtimes it had; it is gone at its next start)

finish
