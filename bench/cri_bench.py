#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A pod start through containerd's CRI: the runtime handler "rdma" (oci-rdma-runtime,
the shim) vs the plain runc handler, driven as the kubelet drives it.

    cri_bench.py [--rounds N] [--quick] [--hook-build DIR | --hook FILE] [--pause FILE]
                 [--work DIR] [--node NAME] [--network pod|node] [--out FILE] [--keep]

Each round starts one pod through each handler, in turn (plain then rdma, then rdma then
plain in the next round, and so on), and the ratio rdma / plain is taken within the round.
A pod start is what the kubelet asks of the runtime for a new pod with one container, on
one gRPC connection kept open (tests/cri/cri_subset.proto, called through the stubs that
tests/cri/cri.py generates; no process is started on the bench's side):

    RunPodSandbox(config, runtime_handler)   the pause container; CNI (bridge) in the
                                             pod network
    CreateContainer(pod, "/bin/cat /etc/nccl.conf" in a busybox image)
    StartContainer(container)

TIMED REGION: from just before the RunPodSandbox call to the return of StartContainer,
that is until the CRI reports the container started (its process runs, or has already
exited). Through the handler "rdma" it holds four runs of oci-rdma-runtime (create and
start of the pod sandbox, left as it is, and of the container, whose config.json it edits
before it execs runc; the container is in the pod's network namespace, named by its path,
which the shim reads: it writes /etc/nccl.conf into the container's root itself, and the
edit registers no hook for runc to run). Waiting for the container to exit, the checks,
StopPodSandbox and RemovePodSandbox (the shim's delete removes the state directory) are
not timed; before the next pod starts, the bench waits until containerd and its children
are idle (their CPU use under 1 ms in 20 ms), so that one pod's teardown does not run
inside the next pod's region.

Wall time: time.monotonic_ns() around the region. CPU time: user + system time of
containerd and of every process it starts (containerd-shim-runc-v2, runc, the shim
oci-rdma-runtime and the hooks runc runs, the CNI plugins) and of the pods' processes,
during the region. containerd is started in a cgroup of the bench's own (cgroup v1
cpuacct, or cgroup v2), which every process it forks inherits, whatever it is reparented
to later; the pods are given a cgroup_parent under that cgroup (as the kubelet gives one
under /kubepods), so runc puts the pause and the workload processes there too. The CPU
time is the growth of that cgroup's counter (cpuacct.usage, or cpu.stat usage_usec)
across the region. Left out: kernel work done in other contexts (kworkers: a network
namespace's teardown, RCU), and the bench's own gRPC client (the same for both
handlers). Without such a cgroup the CPU lists are empty and the notes say why.

Served check, in every round: the container prints /etc/nccl.conf, which only the shim
writes. The rdma pod's container must exit 0 with NCCL_IB_HCA in its log, the plain pod's
must fail to find the file (non-zero exit, no NCCL_ in its log); otherwise the bench
stops (exit 1). Two untimed warm-up pods per handler go first with the same checks.

Setup (bench/README.md, part 7, says it in full): like tests/e2e/e2e-cri.sh, but as on a
real node: containerd in a mount namespace of its own with a tmpfs on /run, the scale
node, the handler "rdma" written by `oci-rdma-hook configure`, a bridge pod network.

Output: JSON on stdout (or --out FILE):
  {"rounds": N, "plain": {"wall_ms": [...], "cpu_ms": [...]}, "rdma": {...},
   "ratio_wall": [rdma/plain per round], "ratio_cpu": [...], "order": ["plain,rdma", ...],
   "summary": {medians, the ratios' medians with a 95% confidence interval}, "notes": "..."}
and a short summary on stderr. Exit 0 when measured, 1 when a pod start or a served
check failed, 2 when a prerequisite is missing. Everything it started (containerd, its
shims, the pods, the bridge, cgroups, CNI's cache entries, the work directory) is removed
on exit, on an error, on Ctrl-C and on SIGTERM.
"""
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from pod_start import log, parse_args, report

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CRI_DIR = os.path.join(REPO, "tests", "cri")
MKNODE = os.path.join(REPO, "tests", "mknode.py")
NODES = os.path.join(REPO, "tests", "nodes")
DEBIAN_PYTHON = "/usr/bin/python3"

PAUSE_IMAGE = "localhost/orh-pause:1"
WORK_IMAGE = "localhost/orh-cri-bench-bb:1"
SUBNET, DNS = "10.213.78.0/24", "10.213.78.1"
HANDLERS = ("plain", "rdma")           # the JSON's names
RUNTIME = {"plain": "runc", "rdma": "rdma"}  # their CRI runtime handlers
QUIET_NS, QUIET_WINDOW_S, QUIET_MAX_S = 1_000_000, 0.02, 2.0


class Missing(Exception):
    """A prerequisite is missing: exit 2."""


class Failed(Exception):
    """A pod start or a check failed: exit 1."""


class Stop(Exception):
    """SIGTERM or SIGHUP."""


def grpc_python():
    """Re-run under Debian's python3 when this one lacks grpc (tests/cri/lib.sh: cri_py)."""
    try:
        import grpc  # noqa: F401
        import grpc_tools.protoc  # noqa: F401
        import google.protobuf  # noqa: F401
        return
    except ImportError:
        pass
    if os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) and \
            subprocess.run([DEBIAN_PYTHON, "-c", "import grpc, grpc_tools.protoc, google.protobuf"],
                           stderr=subprocess.DEVNULL).returncode == 0:
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(sys.argv[0])] + sys.argv[1:])
    raise Missing("no python3 with grpc and grpc_tools (python3-grpcio, python3-grpc-tools)")


def run(cmd, what, **kw):
    """Run a setup command; its output in the error when it fails."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise Failed(f"{what}: {' '.join(cmd)}: exit {r.returncode}: {r.stdout.strip()[-600:]}")
    return r.stdout


def is_static(path):
    """A static executable has no program interpreter (PT_INTERP)."""
    return subprocess.run(["ldd", path], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0


class CgroupCPU:
    """The bench's cgroup: NAME/daemon holds containerd (and so everything it forks),
    NAME/pods is the pods' cgroup_parent. usage_ns() is the CPU time of the whole tree."""

    def __init__(self, name):
        self.name = name
        self.mounts = []   # every cgroup file system: where runc makes the pods' cgroups
        self.acct = None   # the one counted: (mount point, v1?)
        self.why_not = ""
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                mnt = left.split()[4]
                fstype, _, opts = right.split()[:3]
                if fstype == "cgroup2":
                    self.mounts.append(mnt)
                elif fstype == "cgroup":
                    self.mounts.append(mnt)
                    if "cpuacct" in opts.split(",") and self.acct is None:
                        self.acct = (mnt, True)
        if self.acct is None and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            self.acct = ("/sys/fs/cgroup", False)
        if self.acct is None:
            self.why_not = ("no cgroup v1 cpuacct hierarchy and no cgroup v2 at /sys/fs/cgroup: "
                            "the CPU of containerd's reparented children cannot be summed")
        self.made = False

    def path(self, *sub):
        return os.path.join(self.acct[0], self.name, *sub)

    def create(self):
        if self.acct is None:
            return
        try:
            os.makedirs(self.path("daemon"))
            self.made = True
            os.makedirs(self.path("pods"))
        except OSError as e:
            self.why_not = f"cannot make the bench's cgroup {self.path()}: {e}"
            self.acct = None

    @property
    def procs_file(self):
        return self.path("daemon", "cgroup.procs") if self.acct else None

    @property
    def parent(self):
        """The pods' cgroup_parent (cgroupfs driver: a path from each hierarchy's root)."""
        return f"/{self.name}/pods" if self.acct else ""

    def usage_ns(self):
        if self.acct is None:
            return None
        if self.acct[1]:
            with open(self.path("cpuacct.usage")) as f:
                return int(f.read())
        with open(self.path("cpu.stat")) as f:
            for line in f:
                k, v = line.split()
                if k == "usage_usec":
                    return int(v) * 1000
        return None

    def pids(self):
        out = []
        if self.acct is None:
            return out
        for d, _, files in os.walk(self.path()):
            if "cgroup.procs" in files:
                try:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        out += [int(x) for x in f.read().split()]
                except OSError:
                    pass
        return out

    def remove(self):
        """rmdir the tree, deepest first, in every hierarchy (runc made the pods' there)."""
        if not self.made:
            return
        for m in self.mounts:
            top = os.path.join(m, self.name)
            if not os.path.isdir(top):
                continue
            for d, _, _ in sorted(os.walk(top), key=lambda x: -len(x[0])):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            if os.path.isdir(top):
                log(f"could not remove the cgroup {top}")


class CriBench:
    def __init__(self, args):
        self.args = args
        self.tag = f"orh-cri-bench-{os.getpid()}"
        self.net = self.tag
        self.bridge = f"orhcb{os.getpid()}"[:15]
        self.work = None
        self.node_dir = None
        self.cd = None        # containerd's Popen
        self.pods = []        # pod ids not yet removed
        self.chan = None
        self.cg = CgroupCPU(self.tag)
        self.cni_existed = os.path.exists("/var/lib/cni")

    def p(self, *parts):
        return os.path.join(self.work, *parts)

    # ------------------------------------------------------------------ prerequisites
    def check_prerequisites(self):
        if os.geteuid() != 0:
            raise Missing("run as root (containerd, runc, mounts, cgroups)")
        for tool in ("containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip", "unshare",
                     "mount", "ldd"):
            if not shutil.which(tool):
                raise Missing(f"'{tool}' not found (tests/setup-debian.sh installs it)")
        for plugin in ("bridge", "host-local", "loopback"):
            if not os.access(f"/usr/lib/cni/{plugin}", os.X_OK):
                raise Missing(f"/usr/lib/cni/{plugin} missing (containernetworking-plugins)")
        if not os.path.exists("/bin/busybox") or not is_static("/bin/busybox"):
            raise Missing("/bin/busybox missing or not static (busybox-static)")
        a = self.args
        self.hook = os.path.abspath(a.hook or os.path.join(a.hook_build, "src", "oci-rdma-hook"))
        if not os.access(self.hook, os.X_OK):
            raise Missing(f"no built hook at {self.hook}: build it (bash bench/run.sh, or "
                          f"meson setup DIR -Dbuildtype=release && meson compile -C DIR) "
                          f"and give --hook-build DIR")
        self.pause = a.pause
        if not self.pause and a.hook_build:
            built = os.path.join(a.hook_build, "tests", "e2e", "cri-pause")
            if os.access(built, os.X_OK):
                self.pause = built
        if self.pause and not os.access(self.pause, os.X_OK):
            raise Missing(f"--pause {self.pause} is not an executable")
        if not self.pause and not shutil.which("cc"):
            raise Missing("no cc to build tests/cri/pause.c (or give --pause FILE)")
        if self.cg.acct is None:
            log(f"CPU time not measured: {self.cg.why_not}")

    # ------------------------------------------------------------------ setup
    def setup(self):
        t0 = time.monotonic()
        parent = self.args.work or "/var/tmp"
        os.makedirs(parent, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="orh-cri-bench.", dir=parent)
        os.chmod(self.work, 0o755)

        # the node and its config; the node on /dev/shm where it can be (as bench.py's
        # nodes): sysfs is in memory, not on a disk file system
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else self.work
        self.node_dir = tempfile.mkdtemp(prefix="orh-cri-bench-node.", dir=shm)
        os.chmod(self.node_dir, 0o755)
        self.node = os.path.join(self.node_dir, self.args.node)
        run([sys.executable, MKNODE, os.path.join(NODES, self.args.node + ".json"), self.node,
             "--devnodes"], f"the {self.args.node} node")
        hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
        memlock = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard // 1024}K"
        self.conf = self.p("node.conf")
        with open(self.conf, "w") as f:
            # memlock: the machine's hard limit (without CAP_SYS_RESOURCE runc cannot set
            # a higher one from the shim's edit)
            f.write(f"[node]\nmemlock = {memlock}\n[containers]\nactivation = always\n")

        # the images: the static pause, and a static busybox
        img = self.p("img")
        os.makedirs(os.path.join(img, "pause"))
        pause = os.path.join(img, "pause", "pause")
        if self.pause:
            shutil.copy2(self.pause, pause)
        else:
            run(["cc", "-O2", "-static", os.path.join(CRI_DIR, "pause.c"), "-o", pause],
                "building tests/cri/pause.c")
        rootfs = os.path.join(img, "bb")
        for sub in ("bin", "etc", "dev", "proc", "sys", "tmp"):
            os.makedirs(os.path.join(rootfs, sub))
        shutil.copy2("/bin/busybox", os.path.join(rootfs, "bin", "busybox"))
        for tool in ("cat", "sh", "true"):
            os.symlink("busybox", os.path.join(rootfs, "bin", tool))
        with open(os.path.join(rootfs, "etc", "passwd"), "w") as f:
            f.write("root:x:0:0:root:/root:/bin/sh\n")
        mkimage = os.path.join(CRI_DIR, "mkimage.py")
        run([sys.executable, mkimage, os.path.dirname(pause), PAUSE_IMAGE,
             os.path.join(img, "pause.tar"), "--entrypoint", "/pause"], "the pause image")
        run([sys.executable, mkimage, rootfs, WORK_IMAGE, os.path.join(img, "bb.tar")],
            "the busybox image")

        # containerd's config, with the handler "rdma" as configure writes it
        self.sock = self.p("containerd.sock")
        os.makedirs(self.p("net.d"))
        cfg = self.p("config.toml")
        with open(cfg, "w") as f:
            f.write(f"""version = 2
root = "{self.p('root')}"
state = "/run/containerd"
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{self.p('opt')}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # without CAP_SYS_RESOURCE runc cannot lower oom_score_adj to the sandbox's -998
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{self.p('net.d')}"
""")
        os.makedirs(self.p("bin"))
        shim = self.p("bin", "oci-rdma-runtime")
        os.symlink(self.hook, shim)
        run([self.hook, "--config", self.conf, "configure", "--engine", "containerd",
             "--engine-config", cfg, "--handler", "rdma", "--shim", shim],
            "oci-rdma-hook configure")
        os.makedirs(self.p("cni-ipam"))
        with open(self.p("net.d", f"10-{self.net}.conflist"), "w") as f:
            json.dump({"cniVersion": "0.4.0", "name": self.net, "plugins": [{
                "type": "bridge", "bridge": self.bridge, "isGateway": False, "ipMasq": False,
                "ipam": {"type": "host-local", "dataDir": self.p("cni-ipam"),
                         "ranges": [[{"subnet": SUBNET}]],
                         "routes": [{"dst": "0.0.0.0/0"}]}}]}, f, indent=1)

        self.start_containerd(cfg)
        for name in ("pause", "bb"):
            run(["ctr", "-a", self.sock, "-n", "k8s.io", "images", "import", "--snapshotter",
                 "overlayfs", os.path.join(img, name + ".tar")], f"importing the {name} image")
        self.connect()
        for image in (PAUSE_IMAGE, WORK_IMAGE):
            r = self.im.ImageStatus(self.pb.ImageStatusRequest(
                image=self.pb.ImageSpec(image=image)), timeout=30)
            if not r.image.id:
                raise Failed(f"the CRI does not see the image {image}")
        log(f"set up in {time.monotonic() - t0:.1f} s (work directory {self.work})")

    def start_containerd(self, cfg):
        self.cg.create()
        env = dict(os.environ, OCI_RDMA_HOOK_CONFIG=self.conf, OCI_RDMA_HOOK_SYSROOT=self.node)
        # in its cgroup, then a mount namespace of its own whose /run is a tmpfs, then
        # containerd (unshare and sh exec: containerd keeps this pid)
        script = ('if [ -n "$1" ]; then echo $$ >"$1" || exit 1; fi; '
                  'mount -t tmpfs -o mode=755,size=512m tmpfs /run || exit 1; '
                  'exec containerd --config "$2"')
        self.cd_log = open(self.p("containerd.log"), "w")
        # a session of its own: a Ctrl-C on the terminal reaches the bench, which stops it
        self.cd = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                    script, "sh", self.cg.procs_file or "", cfg],
                                   env=env, stdin=subprocess.DEVNULL, stdout=self.cd_log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.sock):
            if self.cd.poll() is not None or time.monotonic() > deadline:
                raise Failed(f"containerd did not start: {self.containerd_tail()}")
            time.sleep(0.05)

    def containerd_tail(self, n=8):
        try:
            with open(self.p("containerd.log")) as f:
                return " | ".join(f.read().splitlines()[-n:])
        except OSError:
            return "(no log)"

    def connect(self):
        os.environ["CRI_STUBS"] = self.p("stubs")
        sys.path.insert(0, CRI_DIR)
        import cri  # tests/cri/cri.py: its stub loader
        import grpc
        self.grpc = grpc
        self.pb, stubs = cri.load_stubs()
        self.chan = grpc.insecure_channel("unix://" + self.sock)
        self.rt = stubs.RuntimeServiceStub(self.chan)
        self.im = stubs.ImageServiceStub(self.chan)
        deadline = time.monotonic() + 30
        while True:
            try:
                r = self.rt.Status(self.pb.StatusRequest(), timeout=5)
                if all(c.status for c in r.status.conditions):
                    return
                why = "; ".join(f"{c.type}: {c.message}" for c in r.status.conditions
                                if not c.status)
            except grpc.RpcError as e:
                why = f"{e.code().name}: {e.details()}"
            if time.monotonic() > deadline:
                raise Failed(f"the CRI is not ready: {why}; containerd: {self.containerd_tail()}")
            time.sleep(0.1)

    # ------------------------------------------------------------------ one pod
    def configs(self, name):
        pb = self.pb
        net = pb.NODE if self.args.network == "node" else pb.POD
        ns = pb.NamespaceOption(network=net, pid=pb.CONTAINER, ipc=pb.POD)
        logs = self.p("logs", name)
        os.makedirs(logs)
        pod = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid="uid-" + name,
                                           namespace="orh-cri-bench", attempt=0),
            log_directory=logs,
            dns_config=pb.DNSConfig(servers=[DNS], searches=["orh-cri-bench.svc"],
                                    options=["ndots:5"]),
            labels={"orh-cri-bench": self.tag},
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=self.cg.parent,
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=ns)))
        if net == pb.POD:  # runc refuses a hostname without a UTS namespace of the pod's
            pod.hostname = name
        ctr = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="work", attempt=0),
            image=pb.ImageSpec(image=WORK_IMAGE),
            command=["/bin/cat", "/etc/nccl.conf"], log_path="work.log",
            linux=pb.LinuxContainerConfig(
                security_context=pb.LinuxContainerSecurityContext(namespace_options=ns)))
        return pod, ctr, os.path.join(logs, "work.log")

    def pod_start(self, handler, name):
        """One pod through handler: (wall ns, CPU ns or None) of the timed region, after
        the served check; the pod removed."""
        pb, rt, t = self.pb, self.rt, 60
        pod, ctr, logfile = self.configs(name)
        step = "RunPodSandbox"
        try:
            c0 = self.cg.usage_ns()
            t0 = time.monotonic_ns()
            r = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod,
                                                         runtime_handler=RUNTIME[handler]),
                                 timeout=t)
            self.pods.append(r.pod_sandbox_id)
            step = "CreateContainer"
            c = rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=r.pod_sandbox_id, config=ctr, sandbox_config=pod), timeout=t)
            step = "StartContainer"
            rt.StartContainer(pb.StartContainerRequest(container_id=c.container_id), timeout=t)
            t1 = time.monotonic_ns()
            c1 = self.cg.usage_ns()
            # untimed: its exit, the check, the teardown
            step = "ContainerStatus"
            deadline = time.monotonic() + 30
            while True:
                s = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=c.container_id),
                                       timeout=t).status
                if s.state == pb.CONTAINER_EXITED:
                    break
                if time.monotonic() > deadline:
                    raise Failed(f"{handler} pod {name}: its container did not exit in 30 s "
                                 f"(state {s.state})")
                time.sleep(0.005)
            self.check_served(handler, name, s.exit_code, logfile)
            step = "StopPodSandbox"
            rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=r.pod_sandbox_id),
                              timeout=t)
            step = "RemovePodSandbox"
            rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=r.pod_sandbox_id),
                                timeout=t)
            self.pods.remove(r.pod_sandbox_id)
        except self.grpc.RpcError as e:
            raise Failed(f"{handler} pod {name}: {step}: {e.code().name}: {e.details()}; "
                         f"containerd: {self.containerd_tail(4)}")
        shutil.rmtree(os.path.dirname(logfile), ignore_errors=True)
        return t1 - t0, (c1 - c0 if c0 is not None else None)

    def check_served(self, handler, name, exit_code, logfile):
        """The rdma pod's container read the /etc/nccl.conf the hook wrote; the plain
        pod's found none."""
        try:
            with open(logfile, errors="replace") as f:
                # each line: TIMESTAMP STREAM TAG CONTENT
                out = [line.rstrip("\n").split(" ", 3)[-1] for line in f]
        except OSError as e:
            raise Failed(f"{handler} pod {name}: no container log ({e})")
        text = "\n".join(out)
        if handler == "rdma":
            ok = exit_code == 0 and any(line.startswith("NCCL_IB_HCA=") for line in out)
            want = "exit 0 and /etc/nccl.conf with NCCL_IB_HCA (the shim served it)"
        else:
            ok = exit_code != 0 and "NCCL_" not in text
            want = "no /etc/nccl.conf (runc alone)"
        if not ok:
            raise Failed(f"{handler} pod {name} was not what it must be: want {want}; "
                         f"got exit {exit_code}, log: {text[:400]!r}")
        if handler == "rdma" and not getattr(self, "hca_seen", None):
            hca = next(line for line in out if line.startswith("NCCL_IB_HCA="))
            self.hca_seen = f"NCCL_IB_HCA with {len(hca.split(','))} ports"

    def settle(self):
        """Wait until containerd's tree is idle (or QUIET_MAX_S): the last pod's teardown
        (the shim's exit, containerd's events, snapshot removal) out of the next region."""
        if self.cg.acct is None:
            time.sleep(0.2)
            return
        deadline = time.monotonic() + QUIET_MAX_S
        u0 = self.cg.usage_ns()
        while time.monotonic() < deadline:
            time.sleep(QUIET_WINDOW_S)
            u1 = self.cg.usage_ns()
            if u1 - u0 < QUIET_NS:
                return
            u0 = u1

    # ------------------------------------------------------------------ rounds
    def measure(self):
        a = self.args
        rounds = a.rounds if a.rounds is not None else (8 if a.quick else 30)
        warmup = 1 if a.quick else 2
        res = {h: {"wall_ms": [], "cpu_ms": []} for h in HANDLERS}
        order, rw, rc = [], [], []
        n = 0
        for i in range(warmup):
            for h in HANDLERS:
                self.settle()
                n += 1
                self.pod_start(h, f"warm-{h}-{n}")
        log(f"warm-up done ({warmup} pods a handler, both served as they must be: "
            f"the served pod's container read {self.hca_seen})")
        t0 = time.monotonic()
        for r in range(rounds):
            hs = HANDLERS if r % 2 == 0 else HANDLERS[::-1]
            got = {}
            for h in hs:
                self.settle()
                n += 1
                got[h] = self.pod_start(h, f"{h}-{n}")
            order.append(",".join(hs))
            for h in HANDLERS:
                res[h]["wall_ms"].append(got[h][0] / 1e6)
                if got[h][1] is not None:
                    res[h]["cpu_ms"].append(got[h][1] / 1e6)
            rw.append(got["rdma"][0] / got["plain"][0])
            if got["plain"][1]:
                rc.append(got["rdma"][1] / got["plain"][1])
            if (r + 1) % 10 == 0 and r + 1 < rounds:
                log(f"round {r + 1}/{rounds} ({time.monotonic() - t0:.0f} s)")
        self.elapsed_rounds = time.monotonic() - t0
        return rounds, res, order, rw, rc

    # ------------------------------------------------------------------ cleanup
    def shim_pids(self):
        """containerd-shim-runc-v2 processes started for this containerd (-address SOCK)."""
        sock = getattr(self, "sock", None)
        if not sock:
            return []
        out = []
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(d + "/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"containerd-shim-runc-v2") and \
                    sock.encode() in argv:
                out.append(int(d[6:]))
        return out

    def cleanup(self):
        if self.chan is not None:
            for pid in list(self.pods):
                for call, req in ((self.rt.StopPodSandbox, self.pb.StopPodSandboxRequest),
                                  (self.rt.RemovePodSandbox, self.pb.RemovePodSandboxRequest)):
                    try:
                        call(req(pod_sandbox_id=pid), timeout=20)
                    except self.grpc.RpcError:
                        pass
            self.chan.close()
        if self.cd is not None and self.cd.poll() is None:
            self.cd.terminate()
            try:
                self.cd.wait(10)
            except subprocess.TimeoutExpired:
                self.cd.kill()
                self.cd.wait()
        if getattr(self, "cd_log", None):
            self.cd_log.close()
        # whatever containerd left (shims, containers): all of it in the bench's cgroup;
        # with the last of them go the mount namespace and its tmpfs
        deadline = time.monotonic() + 10
        while True:
            pids = self.cg.pids()
            if not pids or time.monotonic() > deadline:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        if pids:
            log(f"processes left in the bench's cgroup: {pids}")
        # shims of this containerd outside any cgroup of the bench (no cgroup to count in)
        for pid in self.shim_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.cg.remove()
        subprocess.run(["ip", "link", "del", self.bridge], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        for f in glob.glob(f"/var/lib/cni/results/{self.net}-*"):
            try:
                os.unlink(f)
            except OSError:
                pass
        if not self.cni_existed:
            for d in ("/var/lib/cni/results", "/var/lib/cni"):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        for d in (self.work, self.node_dir):
            if d and self.args.keep:
                log(f"kept {d}")
            elif d:
                shutil.rmtree(d, ignore_errors=True)


def main():
    a = parse_args(__doc__, __file__)

    def stop(sig, _frame):
        raise Stop(signal.Signals(sig).name)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    started = time.monotonic()
    try:
        grpc_python()
        b = CriBench(a)
        b.check_prerequisites()
    except Missing as e:
        log(f"cannot run: {e}")
        return 2
    rc = 0
    try:
        b.setup()
        rounds, res, order, rw, rc_ = b.measure()
    except Missing as e:
        log(f"cannot run: {e}")
        rc = 2
    except Failed as e:
        log(f"FAILED: {e}")
        rc = 1
    except (KeyboardInterrupt, Stop) as e:
        log(f"interrupted ({str(e) or 'SIGINT'}): cleaning up")
        rc = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        b.cleanup()
    if rc:
        return rc
    cpu_note = ("CPU: growth of the bench's cgroup counter (" +
                ("cgroup v1 cpuacct.usage" if b.cg.acct and b.cg.acct[1] else
                 "cgroup v2 cpu.stat usage_usec") +
                ") over the region: containerd, its shims, runc, oci-rdma-runtime, the hooks, "
                "the CNI plugins and the pods' processes (cgroup_parent under it); kernel "
                "work in other contexts and the bench's client left out."
                if b.cg.acct else f"CPU not measured: {b.cg.why_not}.")
    notes = (f"Timed region: RunPodSandbox call to StartContainer's return (the CRI reports "
             f"the container started), one gRPC connection, {a.network} network. "
             f"{cpu_note} Handlers: runc vs rdma (oci-rdma-runtime on the {a.node} node, "
             f"activation = always, served in every round: {b.hca_seen}). containerd "
             f"{containerd_version()} with its state /run/containerd, the netns and the "
             f"hook's records on a tmpfs /run of its own mount namespace; root on disk, "
             f"overlayfs snapshotter. Rounds alternate plain,rdma / rdma,plain; ratios are "
             f"rdma/plain within a round. Hook {b.hook}.")
    return report(a, b, rounds, res, order, rw, rc_, HANDLERS, started, notes,
                  {"plain": "runc", "rdma": "oci-rdma-runtime"}, RUNTIME)


def containerd_version():
    try:
        return subprocess.run(["containerd", "--version"], stdout=subprocess.PIPE,
                              text=True).stdout.split()[2]
    except (OSError, IndexError):
        return "?"


if __name__ == "__main__":
    sys.exit(main())
