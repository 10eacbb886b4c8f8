#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A pod start through containerd 2.x's CRI with oci-rdma-hook's NRI plugin connected vs
with no plugin, both through the plain runc handler, driven as the kubelet drives it.

    nri_bench.py [--rounds N] [--quick] [--hook-build DIR | --hook FILE] [--pause FILE]
                 [--work DIR] [--node NAME] [--network pod|node] [--out FILE] [--keep]
                 [--floor FILE] [--conf-line LINE ...]

The method is bench/cri_bench.py's (its head says it in full): the same pods, the same
timed region (from just before RunPodSandbox to the return of StartContainer), the same
cgroup holding containerd and all it starts, the same settling between pods, rounds that
alternate the order, ratios taken within a round. What differs:

  - containerd is 2.x (/opt/oci-rdma-hook-peers/bin, as tests/setup-debian.sh builds it,
    or the first containerd in PATH), config version 3, NRI on with its socket in the work
    directory, and no handler of ours: every pod goes through runc;
  - "nri": `oci-rdma-hook nri` is connected (started in containerd's mount namespace, where
    it runs the containers' nccl-conf stage, and in the bench's cgroup: its CPU time counts);
    "plain": no plugin is connected. Between two pods the plugin is started or stopped as
    the next one needs, outside the timed region, and the bench waits until containerd
    has it synchronized, or has dropped it;
  - the served check: the nri pod's container reads the /etc/nccl.conf that the nccl-conf
    stage wrote (the plugin runs it at StartContainer: nri_stage = start, the default); the
    plain pod's finds none.

With --floor FILE (bench/nri_floor.c, built), the plugin connected for the "nri" pod is that
floor instead: it registers as the plugin does, subscribes to the same events and answers
each at once, CreateContainer with the answer oci-rdma-hook nri gave a container of the same
node (bench/nri_answer.py, once before the rounds), and does nothing else. The ratio is then
what the runtime's side of serving those devices costs a pod start, with no plugin work. Its
served check: the floor answered the pod's CreateContainer, and the container found no
/etc/nccl.conf (the floor writes none).

With --conf-line LINE (repeatable), LINE is appended to the node config's [containers]
section before the rounds: `--conf-line 'nri_hooks = no'` measures the plugin serving at
CreateContainer alone, with no nccl-conf stage (oci-rdma-hook.conf(5)); the served check is
the same (the container reads NCCL_IB_HCA from /etc/nccl.conf, there the plugin's copy the
runtime bind-mounts).

Output: cri_bench.py's JSON with the handlers "plain" and "nri" (ratio nri / plain).
Exit 0 when measured, 1 when a pod start or a served check failed, 2 when a prerequisite is
missing.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import cri_bench as cb

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.environ.get("ORH_GO_BIN", "/opt/oci-rdma-hook-peers/bin")
SUBNET = "10.213.80.0/24"
PLUGIN = "50-oci-rdma-hook"
HANDLERS = ("plain", "nri")
# within cri_bench's CriBench the served pod is "rdma": both go through runc here
cb.RUNTIME = {"plain": "runc", "rdma": "runc"}
cb.SUBNET, cb.DNS = SUBNET, "10.213.80.1"


class NriBench(cb.CriBench):
    def __init__(self, args):
        super().__init__(args)
        self.plugin = None
        self.floor = args.floor
        self.answered = 0

    def setup(self):
        super().setup()
        if self.args.conf_line:
            # the node config ends in its [containers] section (cri_bench.py's setup)
            with open(self.conf, "a") as f:
                f.write("".join(line + "\n" for line in self.args.conf_line))
        if self.floor:
            self.answer = self.p("floor-answer.bin")
            r = subprocess.run([sys.executable, os.path.join(HERE, "nri_answer.py"), self.hook,
                                self.node, self.conf, self.answer],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise cb.Failed(f"the floor's answer: {r.stderr.strip()}")
            cb.log(r.stderr.strip())

    def check_prerequisites(self):
        if os.access(os.path.join(PEERS, "containerd"), os.X_OK):
            os.environ["PATH"] = PEERS + os.pathsep + os.environ.get("PATH", "")
        super().check_prerequisites()
        if not shutil.which("nsenter"):
            raise cb.Missing("'nsenter' not found (util-linux)")
        if not cb_version().startswith("2."):
            raise cb.Missing(f"containerd {cb_version()} has no NRI on by default: 2.x "
                             f"wanted (tests/setup-debian.sh builds it into {PEERS})")
        r = subprocess.run([self.hook, "nri", "--help"], capture_output=True)
        if r.returncode != 0:
            raise cb.Missing(f"{self.hook} has no nri command")
        if self.floor and not os.access(self.floor, os.X_OK):
            raise cb.Missing(f"--floor {self.floor}: not an executable (bench/run.sh builds "
                             f"bench/nri_floor.c)")

    def start_containerd(self, cfg):
        """cri_bench's setup wrote cfg (version 2, with configure's handler): replaced by
        version 3 with NRI on and no handler of ours; then containerd as cri_bench starts it."""
        self.nri_sock = self.p("nri.sock")
        with open(cfg, "w") as f:
            f.write(f"""version = 3
root = "{self.p('root')}"
state = "/run/containerd"
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{self.p('opt')}"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{cb.PAUSE_IMAGE}"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{self.p('net.d')}"
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = "{self.nri_sock}"
  plugin_path = "{self.p('nri-plugins')}"
  plugin_config_path = "{self.p('nri-conf.d')}"
""")
        super().start_containerd(cfg)

    def connect(self):
        """cri_bench's connect, ready once the runtime and the network are: containerd 2.3
        reports its deprecations (cgroup v1 among them) as a condition of its own."""
        os.environ["CRI_STUBS"] = self.p("stubs")
        sys.path.insert(0, cb.CRI_DIR)
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
                down = [c for c in r.status.conditions
                        if c.type in ("RuntimeReady", "NetworkReady") and not c.status]
                if not down:
                    return
                why = "; ".join(f"{c.type}: {c.message}" for c in down)
            except grpc.RpcError as e:
                why = f"{e.code().name}: {e.details()}"
            if time.monotonic() > deadline:
                raise cb.Failed(f"the CRI is not ready: {why}; containerd: "
                                f"{self.containerd_tail()}")
            time.sleep(0.1)

    def synced(self, what):
        """How often containerd logged the plugin synchronized, or its connection closed."""
        pat = {"up": rf'plugin \\"{PLUGIN}\\" connected and synchronized',
               "down": rf'connection to plugin \\"{PLUGIN}\\" closed'}[what]
        try:
            with open(self.p("containerd.log")) as f:
                return len(re.findall(pat, f.read()))
        except OSError:
            return 0

    def wait_log(self, what, before):
        deadline = time.monotonic() + 20
        while self.synced(what) <= before:
            if time.monotonic() > deadline:
                raise cb.Failed(f"containerd did not log the plugin {what} in 20 s: "
                                f"{self.containerd_tail(4)}; plugin: {self.plugin_tail()}")
            time.sleep(0.01)

    def plugin_tail(self):
        try:
            with open(self.p("plugin.log")) as f:
                return " | ".join(f.read().splitlines()[-3:])
        except OSError:
            return "(no log)"

    def plugin_on(self, on):
        if on and self.plugin is None:
            n = self.synced("up")
            script = 'if [ -n "$1" ]; then echo $$ >"$1" || exit 1; fi; shift; exec "$@"'
            self.plugin_log = open(self.p("plugin.log"), "a")
            argv = ([self.floor, self.nri_sock, self.answer] if self.floor else
                    [self.hook, "nri", "--socket", self.nri_sock, "--config", self.conf,
                     "--sysroot", self.node])
            self.plugin = subprocess.Popen(
                ["nsenter", f"--mount=/proc/{self.cd.pid}/ns/mnt", "sh", "-c", script, "sh",
                 self.cg.procs_file or "", *argv],
                stdin=subprocess.DEVNULL, stdout=self.plugin_log, stderr=subprocess.STDOUT,
                start_new_session=True)
            self.wait_log("up", n)
        elif not on and self.plugin is not None:
            n = self.synced("down")
            self.plugin_off()
            self.wait_log("down", n)

    def plugin_off(self):
        if self.plugin is None:
            return
        self.plugin.send_signal(signal.SIGTERM)
        try:
            rc = self.plugin.wait(10)
        except subprocess.TimeoutExpired:
            self.plugin.kill()
            rc = self.plugin.wait()
        self.plugin = None
        self.plugin_log.close()
        if rc != 0:
            raise cb.Failed(f"the plugin ended with status {rc} on SIGTERM: {self.plugin_tail()}")

    def pod_start(self, handler, name):
        self.plugin_on(handler == "rdma")
        self.settle()
        return super().pod_start(handler, name)

    def check_served(self, handler, name, exit_code, logfile):
        if self.floor and handler == "rdma":
            n = 0
            try:
                with open(self.p("plugin.log")) as f:
                    n = sum(1 for ln in f if "CreateContainer answered" in ln)
            except OSError:
                pass
            if n <= self.answered or exit_code == 0:
                raise cb.Failed(f"floor pod {name}: want its CreateContainer answered by the "
                                f"floor ({n} answers, {self.answered} before) and no "
                                f"/etc/nccl.conf (exit {exit_code})")
            self.answered = n
            self.hca_seen = "the floor's answer"
            return
        try:
            super().check_served(handler, name, exit_code, logfile)
        except cb.Failed as e:
            raise cb.Failed(str(e).replace("rdma pod", "nri pod").replace(
                "the shim served it", "the plugin's nccl-conf stage wrote it")
                + f"; plugin: {self.plugin_tail()}")

    def cleanup(self):
        try:
            self.plugin_off()
        except cb.Failed as e:
            cb.log(str(e))
        super().cleanup()


def cb_version():
    return cb.containerd_version()


def main():
    def more(ap):
        ap.add_argument("--floor", metavar="FILE", help="connect this floor plugin "
                        "(bench/nri_floor.c) instead of oci-rdma-hook nri")
        ap.add_argument("--conf-line", metavar="LINE", action="append", default=[],
                        help="append LINE to the node config's [containers] section "
                             "(repeatable), e.g. 'nri_hooks = no'")

    a = cb.parse_args(__doc__, "bench/nri_bench.py", more=more)

    def stop(sig, _frame):
        raise cb.Stop(signal.Signals(sig).name)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    started = time.monotonic()
    try:
        cb.grpc_python()
        b = NriBench(a)
        b.check_prerequisites()
    except cb.Missing as e:
        cb.log(f"cannot run: {e}")
        return 2
    rc = 0
    try:
        b.setup()
        rounds, res, order, rw, rc_ = b.measure()
    except cb.Missing as e:
        cb.log(f"cannot run: {e}")
        rc = 2
    except cb.Failed as e:
        cb.log(f"FAILED: {e}")
        rc = 1
    except (KeyboardInterrupt, cb.Stop) as e:
        cb.log(f"interrupted ({str(e) or 'SIGINT'}): cleaning up")
        rc = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        b.cleanup()
    if rc:
        return rc
    res = {"plain": res["plain"], "nri": res["rdma"]}
    order = [o.replace("rdma", "nri") for o in order]
    notes = (f"Timed region: RunPodSandbox call to StartContainer's return, one gRPC "
             f"connection, {a.network} network. CPU: bench/cri_bench.py's cgroup, which "
             f"holds the plugin too. Both pods through containerd {cb_version()}'s runc "
             f"handler (config version 3); nri: " + (
                 f"the floor plugin bench/nri_floor.c connected to the NRI socket, answering "
                 f"every CreateContainer with oci-rdma-hook nri's answer for a container of "
                 f"the {a.node} node and nothing else (served in every round: "
                 f"{b.hca_seen})" if a.floor else
                 f"`oci-rdma-hook nri` connected to its NRI socket (on the {a.node} node, "
                 f"activation = always" +
                 "".join(f", {line}" for line in a.conf_line) +
                 f", served in every round: {b.hca_seen}, /etc/nccl.conf " +
                 ("as the config's lines above give it" if a.conf_line else
                  "written by the nccl-conf stage it ran at StartContainer") + ")") +
             f"; plain: no plugin connected. The plugin is started or stopped between pods, "
             f"outside the region. Rounds alternate plain,nri / nri,plain; ratios are "
             f"nri/plain within a round. Hook {b.hook}.")
    nri = "runc, the floor plugin" if a.floor else "runc, oci-rdma-hook nri"
    return cb.report(a, b, rounds, res, order, rw, rc_, HANDLERS, started, notes,
                     {"plain": "runc, no NRI plugin", "nri": nri},
                     {"plain": "runc", "nri": "runc"})


if __name__ == "__main__":
    sys.exit(main())
