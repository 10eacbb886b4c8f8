#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The checks of tests/manifests.sh on the Kubernetes examples in deploy/kubernetes/
# (oci-rdma-hook-kubernetes(7)): the pods, and the kustomize base and overlay as
# `kubectl kustomize` renders them (the DaemonSet, its ConfigMap, the RuntimeClass).
#   manifests.py HOOK SRCDIR WORKDIR   (WORKDIR holds node/, installed.json, options.json,
#                                       base.yaml, overlay.yaml, nri.yaml: manifests.sh
#                                       makes them)
import glob, json, os, re, subprocess, sys, yaml
try:
    import tomllib
except ImportError:  # Python 3.10: tomli, the same parser under the same interface
    import tomli as tomllib

hook, src, work = sys.argv[1:4]
kdir = os.path.join(src, "deploy", "kubernetes")
base_dir = os.path.join(kdir, "base")
node = os.path.join(work, "node")
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - " + name)
        if detail:
            print("\n".join("#   " + l for l in str(detail).splitlines()))


def configured(engine, setup, path):
    """The file `configure --engine ENGINE` writes on a node holding setup, parsed."""
    root = os.path.join(work, "cfg-" + engine)
    for rel, text in setup.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as f:
            f.write("#!/bin/sh\n" if text is None else text)
        os.chmod(os.path.join(root, rel), 0o755 if text is None else 0o644)
    r = subprocess.run([hook, "--config", "/etc/oci-rdma-hook/oci-rdma-hook.conf", "configure",
                        "--engine", engine, "--root", root], capture_output=True, text=True)
    check("configure --engine %s writes its files" % engine, r.returncode == 0, r.stderr)
    with open(os.path.join(root, path), "rb") as f:
        return with_imports(root, tomllib.load(f))


def merge(into, new):
    """new's tables into into, key by key (containerd 2.x; the drop-in configure writes holds
    the whole CRI table, so 1.x's replacing of a plugin's table gives the same)."""
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v
    return into


def with_imports(root, cfg):
    """A containerd config with the files its imports name (host paths, under root)."""
    for pattern in cfg.get("imports", []) if isinstance(cfg.get("imports"), list) else []:
        for path in sorted(glob.glob(root + pattern)):
            with open(path, "rb") as f:
                merge(cfg, tomllib.load(f))
    return cfg


# ---- the files parse -------------------------------------------------------------------
# the pods beside the kustomizations, the base's resources, and what kubectl kustomize
# rendered of the base and the overlay
docs = {}
sources = sorted(glob.glob(os.path.join(kdir, "*.yaml"))) + \
    [p for p in sorted(glob.glob(os.path.join(base_dir, "*.yaml")))
     if os.path.basename(p) != "kustomization.yaml"] + \
    [os.path.join(work, n) for n in ("base.yaml", "overlay.yaml", "nri.yaml")]
for path in sources:
    name = os.path.relpath(path, work if path.startswith(work) else kdir)
    try:
        with open(path) as f:
            docs[name] = [d for d in yaml.safe_load_all(f) if d is not None]
        ok = all(isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and
                 (d.get("metadata") or {}).get("name") for d in docs[name]) and docs[name]
        check(name + " parses, each document with apiVersion, kind, metadata.name", ok)
    except yaml.YAMLError as e:
        check(name + " parses", False, e)
check("deploy/kubernetes holds YAML manifests", len(docs) >= 3, sorted(docs))
# the pods, and the objects of the rendered base
every = [d for n, ds in docs.items() if n.startswith("pod-") or n == "base.yaml" for d in ds]
overlay = docs.get("overlay.yaml", [])

# the engines' handlers as `oci-rdma-hook configure` writes them (man oci-rdma-hook-registration,
# REGISTRATION): containerd 1.x's config.toml, CRI-O's drop-in beside its packaging's crun
try:
    ctd = configured("containerd", {"etc/containerd/config.toml": "version = 2\n"},
                     "etc/containerd/config.toml")
    crio_dropin = configured("crio", {"usr/libexec/crio/crun": None, "usr/libexec/crio/conmon": None},
                             "etc/crio/crio.conf.d/99-oci-rdma-hook.conf")
    crio = crio_dropin
    check("the containerd and CRI-O files configure writes parse as TOML", True)
except (OSError, tomllib.TOMLDecodeError) as e:
    check("the containerd and CRI-O files configure writes parse as TOML", False, e)
    sys.exit(1)

# ---- one handler name everywhere ----------------------------------------------------------
rcs = [d for d in every if d["kind"] == "RuntimeClass"]
check("exactly one RuntimeClass", len(rcs) == 1, [d["metadata"]["name"] for d in rcs])
rc = rcs[0] if rcs else {}
check("the RuntimeClass is node.k8s.io/v1", rc.get("apiVersion") == "node.k8s.io/v1")
handler = rc.get("handler", "")
check("the RuntimeClass has a handler", bool(handler))

runtimes = ctd.get("plugins", {}).get("io.containerd.grpc.v1.cri", {}) \
              .get("containerd", {}).get("runtimes", {})
crt = runtimes.get(handler, {})
check("containerd: a CRI runtime handler named as the RuntimeClass's handler (%s)" % handler,
      bool(crt), sorted(runtimes))
check("containerd: runtime_type io.containerd.runc.v2",
      crt.get("runtime_type") == "io.containerd.runc.v2", crt.get("runtime_type"))

crio_rts = crio.get("crio", {}).get("runtime", {}).get("runtimes", {})
xrt = crio_rts.get(handler, {})
check("CRI-O: a runtime handler named as the RuntimeClass's handler (%s)" % handler,
      bool(xrt), sorted(crio_rts))
check("CRI-O: runtime_type oci", xrt.get("runtime_type") == "oci", xrt.get("runtime_type"))
# CRI-O's allowed_annotations takes only CRI-O's own annotations, and refuses a name it
# does not know (pkg/config/config.go: "invalid allowed_annotation"); pod annotations reach
# the container's spec without it
check("CRI-O: no oci-rdma-hook annotation in allowed_annotations (of a handler that is there)",
      bool(xrt) and
      not [a for a in xrt.get("allowed_annotations", []) if a.startswith("oci-rdma-hook/")],
      xrt.get("allowed_annotations"))

# ---- the shim's installed path ------------------------------------------------------------
with open(os.path.join(work, "installed.json")) as f:
    installed = json.load(f)
with open(os.path.join(work, "options.json")) as f:
    options = json.load(f)
prefix = [o["value"] for o in options if o["name"] == "prefix"][0]
shim = [dst for dst in installed.values() if os.path.basename(dst) == "oci-rdma-runtime"]
# meson before 0.62 (Ubuntu 22.04 has 0.61) leaves install_symlink's links out of
# `introspect --installed`: there, the link meson.build makes in bindir
meson_version = tuple(int(x) for x in
                      subprocess.run(["meson", "--version"], capture_output=True, text=True,
                                     check=True).stdout.strip().split(".")[:2])
if not shim and meson_version < (0, 62):
    bindir = [o["value"] for o in options if o["name"] == "bindir"][0]
    shim = [os.path.join(prefix, bindir, "oci-rdma-runtime")]
check("meson installs oci-rdma-runtime under the prefix", len(shim) == 1 and
      shim[0].startswith(prefix + "/"), (prefix, shim))
# configure names the shim where this build installs it
want = shim[0] if shim else None
binary = crt.get("options", {}).get("BinaryName")
check("containerd: BinaryName is the installed shim (%s)" % want, binary == want, binary)
check("CRI-O: runtime_path is the installed shim (%s)" % want,
      xrt.get("runtime_path") == want, xrt.get("runtime_path"))

# under that name the binary is the shim: a command it does not edit goes to the runtime
bindir = os.path.join(work, "bin")
os.mkdir(bindir)
called = os.path.join(bindir, os.path.basename(binary or "unset"))
os.symlink(hook, called)
record = os.path.join(work, "runtime.args")
fake = os.path.join(work, "fake-runtime")
with open(fake, "w") as f:
    f.write('#!/bin/sh\nprintf "%%s\\n" "$@" >"%s"\n' % record)
os.chmod(fake, 0o755)
with open(os.path.join(work, "shim.conf"), "w") as f:
    f.write("[containers]\nruntime = %s\n" % fake)
env = dict(os.environ, OCI_RDMA_HOOK_CONFIG=os.path.join(work, "shim.conf"),
           OCI_RDMA_HOOK_SYSROOT=node)
r = subprocess.run([called, "--root", "/run/runc", "state", "pod1"], env=env,
                   capture_output=True, text=True)
got = open(record).read().split() if os.path.exists(record) else None
check("the binary called as %s is the runtime shim (runc's command line, passed on)"
      % os.path.basename(called), r.returncode == 0 and got == ["--root", "/run/runc",
                                                                 "state", "pod1"],
      (r.returncode, got, r.stderr))

# ---- containerd's pod_annotations: Go's path.Match, "*" never crosses "/" -------------------
def go_match(pattern, name):
    rx, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            rx += "[^/]*"
        elif c == "?":
            rx += "[^/]"
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            rx += re.escape(pattern[i])
        elif c == "[":
            j = pattern.index("]", i + 1)
            body = pattern[i + 1:j]
            rx += "[" + ("^" + body[1:] if body.startswith("^") else body) + "]"
            i = j
        else:
            rx += re.escape(c)
        i += 1
    return re.fullmatch(rx, name) is not None


pod_ann = crt.get("pod_annotations", [])
for key in ("oci-rdma-hook/enable", "oci-rdma-hook/preset"):
    check("containerd: pod_annotations passes %s" % key,
          any(go_match(p, key) for p in pod_ann), pod_ann)


def containerd_passes(annotations):
    return {k: v for k, v in annotations.items() if any(go_match(p, k) for p in pod_ann)}


# ---- CRI-O's hooks_dir: only stages CRI-O knows -----------------------------------------------
# CRI-O loads hooks with no extension stage and refuses a directory holding another (it does
# not start): no directory of its hooks_dir may get a file of another stage from `meson
# install` with the package's --prefix=/usr --sysconfdir=/etc (hooks.d/meson.build).
crio_stages = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart",
               "poststop"}
# (configure sets hooks_dir only to add a directory; else CRI-O's default stands)
hooks_dirs = [d.rstrip("/") for d in
              crio_dropin.get("crio", {}).get("runtime", {}).get("hooks_dir",
                                                                 ["/usr/share/containers/oci/hooks.d"])]
with open(os.path.join(work, "options.json")) as f:
    sysconfdir = [o["value"] for o in json.load(f) if o["name"] == "sysconfdir"][0]
etc = sysconfdir if sysconfdir.startswith("/") else prefix + "/" + sysconfdir


def as_packaged(dst):
    if dst.startswith(etc + "/"):
        return "/etc" + dst[len(etc):]
    return "/usr" + dst[len(prefix):] if dst.startswith(prefix + "/") else dst


shipped = {as_packaged(dst): srcpath for srcpath, dst in installed.items()
           if srcpath.endswith(".json") and os.path.basename(os.path.dirname(dst)) == "hooks.d"}
check("CRI-O hooks.d: meson installs three hooks.d files", len(shipped) == 3, sorted(shipped))
read = {dst: srcpath for dst, srcpath in shipped.items() if os.path.dirname(dst) in hooks_dirs}
check("CRI-O hooks.d: hooks_dir holds the createRuntime and poststop files",
      sorted(os.path.basename(d) for d in read) ==
      ["oci-rdma-hook-poststop.json", "oci-rdma-hook.json"], sorted(shipped))
for dst, srcpath in sorted(shipped.items()):
    try:
        with open(os.path.join(src, "hooks.d", os.path.basename(dst) + ".in")) as f:
            h = json.loads(f.read().replace("@BINDIR@", "/usr/bin"))
    except (OSError, ValueError) as e:
        check("CRI-O hooks.d: %s is a shipped hooks.d file" % dst, False, e)
        continue
    if dst in read:
        check("CRI-O hooks.d: %s has stages CRI-O runs" % dst,
              set(h.get("stages", [])) <= crio_stages and h.get("stages"), h.get("stages"))
    elif "precreate" in h.get("stages", []):
        check("CRI-O hooks.d: %s (precreate) is in no directory of hooks_dir, and in none "
              "CRI-O reads by default" % dst,
              os.path.dirname(dst) != "/usr/share/containers/oci/hooks.d", hooks_dirs)

# ---- the pods -------------------------------------------------------------------------------
pods = {d["metadata"]["name"]: d for d in every if d["kind"] == "Pod"}
check("three example pods", len(pods) == 3, sorted(pods))
values = {"enable": {"true", "false"}, "preset": {"auto", "none", "infiniband", "roce", "erdma"}}
for name, pod in sorted(pods.items()):
    spec = pod.get("spec", {})
    check("pod %s: runtimeClassName is the RuntimeClass (%s)" % (name, rc.get("metadata",
          {}).get("name")), spec.get("runtimeClassName") == rc.get("metadata", {}).get("name"),
          spec.get("runtimeClassName"))
    ann = pod["metadata"].get("annotations", {}) or {}
    # Kubernetes takes only strings; an unquoted true is a YAML boolean, refused by the API
    bad = {k: v for k, v in ann.items() if not isinstance(v, str)}
    check("pod %s: annotation values are strings" % name, not bad, bad)
    mine = {k[len("oci-rdma-hook/"):]: v for k, v in ann.items()
            if k.startswith("oci-rdma-hook/")}
    bad = {k: v for k, v in mine.items() if v not in values.get(k, ())}
    check("pod %s: oci-rdma-hook annotations are ones the hook reads" % name, not bad, bad)

# ---- the resources the pods ask for: names the real plugins advertise ---------------------------
# k8s-rdma-shared-dev-plugin: "<resourcePrefix>/<resourceName>" of its ConfigMap, the prefix
# "rdma" by default, the name [a-zA-Z0-9_]+ (pkg/resources: rdmaHcaResourcePrefix,
# validResourceName); one unit is the whole pool: every device its selectors match (Allocate
# answers with the pool's deviceSpec). The SR-IOV network device plugin: "<resourcePrefix>/
# <resourceName>" of its config, the prefix "intel.com" by default and set per pool
# (cmd/sriovdp); one unit is one VF, with its RDMA nodes when the pool says "isRdma".
# Both hand each device's uverbs, umad and issm nodes and rdma_cm (rdmamap GetRdmaCharDevices).
def rdma_nodes(idx):
    return [{"path": "/dev/infiniband/uverbs%d" % i, "type": "c", "major": 231,
             "minor": 192 + i} for i in idx] + \
           [{"path": "/dev/infiniband/umad%d" % i, "type": "c", "major": 231, "minor": i}
            for i in idx] + \
           [{"path": "/dev/infiniband/issm%d" % i, "type": "c", "major": 231, "minor": 64 + i}
            for i in idx] + \
           [{"path": "/dev/infiniband/rdma_cm", "type": "c", "major": 10, "minor": 61}]


PLUGINS = {
    # a shared pool of the node's 8 InfiniBand HCAs (selectors linkTypes infiniband)
    "rdma/hca_shared_devices_a": ("k8s-rdma-shared-dev-plugin", rdma_nodes(range(8))),
    # one RDMA VF: on the sample node, mlx5_3
    "mellanox.com/mlnx_sriov_rdma": ("SR-IOV network device plugin", rdma_nodes([3])),
}
ALL_PORTS = "NCCL_IB_HCA==" + ",".join("mlx5_%d:1" % i for i in range(8))


def limits_of(pod):
    return (pod["spec"]["containers"][0].get("resources") or {}).get("limits") or {}


for name, pod in sorted(pods.items()):
    for res in limits_of(pod):
        if res.startswith("nvidia.com/gpu"):
            continue
        check("pod %s: %s is a resource a real RDMA device plugin advertises" % (name, res),
              res in PLUGINS and re.fullmatch(r"[a-z0-9.-]+/[a-zA-Z0-9_]+", res), sorted(PLUGINS))
check("no pod asks for rdma/hca, a name no RDMA device plugin advertises (of the pods there are)",
      bool(pods) and not [n for n, p in pods.items() if "rdma/hca" in limits_of(p)])

train = pods.get("rdma-training", {})
tc = (train.get("spec", {}).get("containers") or [{}])[0]
check("training pod: asks with oci-rdma-hook/enable: \"true\"",
      train.get("metadata", {}).get("annotations", {}).get("oci-rdma-hook/enable") == "true")
check("training pod: nvidia.com/gpu: 8 and one unit of the shared plugin's pool",
      limits_of(train).get("nvidia.com/gpu") == 8 and
      limits_of(train).get("rdma/hca_shared_devices_a") == 1, limits_of(train))
check("training pod: runs torchrun",
      "torchrun" in " ".join(tc.get("command", []) + tc.get("args", [])))
dp = pods.get("rdma-device-plugin", {})
check("device-plugin pod: one SR-IOV RDMA VF and no annotation",
      limits_of(dp).get("mellanox.com/mlnx_sriov_rdma") == 1 and
      not dp.get("metadata", {}).get("annotations"), limits_of(dp))
gs = pods.get("rdma-two-gpus", {})
check("GPU-subset pod: nvidia.com/gpu: 2 and no RDMA resource",
      limits_of(gs) == {"nvidia.com/gpu": 2}, limits_of(gs))

# ---- the node config is one the binary accepts ---------------------------------------------------
conf = os.path.join(base_dir, "oci-rdma-hook.conf")
r = subprocess.run([hook, "--config", conf, "--sysroot", node, "env"], capture_output=True,
                   text=True)
check("oci-rdma-hook.conf: the binary accepts it", r.returncode == 0, r.stderr)
conf_text = open(conf).read()
check("oci-rdma-hook.conf: activation = devices",
      re.search(r"^activation\s*=\s*devices\s*$", conf_text, re.M) is not None)
check("oci-rdma-hook.conf: request_scope = allocated",
      re.search(r"^request_scope\s*=\s*allocated\s*$", conf_text, re.M) is not None)
# the same node with request_scope = node, and the defaults (the package's file)
node_conf = os.path.join(work, "node-scope.conf")
with open(node_conf, "w") as f:
    f.write(re.sub(r"^request_scope\s*=.*$", "request_scope = node", conf_text, flags=re.M))
default_conf = os.path.join(src, "conf", "oci-rdma-hook.conf")

# ---- the decision for the specs the CRI code builds from the pods ---------------------------------
def oci_spec(pod, engine, sandbox):
    """config.json as the engine builds it for the pod's first container or its sandbox."""
    ann = pod["metadata"].get("annotations", {}) or {}
    c = pod["spec"]["containers"][0]
    limits = c.get("resources", {}).get("limits", {})
    if engine == "containerd":  # pkg/cri: getPassthroughAnnotations(.., PodAnnotations)
        out = containerd_passes(ann)
        out["io.kubernetes.cri.container-type"] = "sandbox" if sandbox else "container"
    else:  # CRI-O: SpecAddAnnotations keeps every sandbox annotation
        out = dict(ann)
        out["io.kubernetes.cri-o.ContainerType"] = "sandbox" if sandbox else "container"
    env, devices = ["PATH=/usr/bin:/bin"], []
    if not sandbox:
        env += ["%s=%s" % (e["name"], e.get("value", "")) for e in c.get("env", [])]
        if "nvidia.com/gpu" in limits:
            gpus = ",".join(str(i) for i in range(limits["nvidia.com/gpu"]))
            env.append("NVIDIA_VISIBLE_DEVICES=" + gpus)
        for res in limits:
            devices += PLUGINS.get(res, ("", []))[1]
    return {"ociVersion": "1.0.2", "process": {"args": ["sh"], "env": env},
            "linux": {"devices": devices}, "annotations": out}


def decide(pod, engine, sandbox, config=conf):
    path = os.path.join(work, "%s-%s-%s.json" % (pod["metadata"]["name"], engine, sandbox))
    with open(path, "w") as f:
        json.dump(oci_spec(pod, engine, sandbox), f)
    r = subprocess.run([hook, "--config", config, "--sysroot", node, "env", "--explain",
                        "--spec", path], capture_output=True, text=True)
    hca = [l for l in r.stdout.splitlines() if l.startswith("NCCL_IB_HCA=")]
    return r.returncode, r.stdout, (hca[0] if hca else ""), r.stderr


def without_rdma(pod):
    """The pod as its author may write it: the same request, no RDMA resource."""
    p = json.loads(json.dumps(pod))
    lim = limits_of(p)
    for res in list(lim):
        if res in PLUGINS:
            del lim[res]
    return p


nothing = {"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "c"}]}}
asks_env = {"metadata": {"name": "asks-env"}, "spec": {"containers": [
    {"name": "c", "env": [{"name": "OCI_RDMA_HOOK_ENABLE", "value": "true"}]}]}}
NOT_ALLOCATED = "but request_scope = allocated and it holds no RDMA device node"
# what env --explain says of a container it leaves alone: an empty stdout with exit 0 is
# also what a command that did nothing gives, so each "gets nothing" names its reason
SANDBOX = "# not activated: a Kubernetes pod sandbox: never served"
NO_DEVICE = "# not activated: activation = devices, and the container holds no RDMA device node"
for engine in ("containerd", "CRI-O"):
    if dp:
        rc_, out, hca, err = decide(dp, engine, False)
        check("%s, example config: the device-plugin pod gets exactly its HCA" % engine,
              rc_ == 0 and hca == "NCCL_IB_HCA==mlx5_3:1", (rc_, out, err))
        rc_, out, hca, err = decide(dp, engine, True)
        check("%s: the device-plugin pod's sandbox gets nothing" % engine,
              rc_ == 0 and out == "" and SANDBOX in err, (rc_, out, err))
    if train:
        rc_, out, hca, err = decide(train, engine, False)
        check("%s, example config: the training pod gets every HCA of the shared pool"
              % engine, rc_ == 0 and hca == ALL_PORTS, (rc_, out, err))
        rc_, out, hca, err = decide(train, engine, True)
        check("%s: the training pod's sandbox gets nothing, though annotated" % engine,
              rc_ == 0 and out == "" and SANDBOX in err, (rc_, out, err))
        # the annotation without the allocation: nothing, and env --explain says why
        rc_, out, hca, err = decide(without_rdma(train), engine, False)
        check("%s, example config: a pod annotated oci-rdma-hook/enable: \"true\" and "
              "allocated no HCA gets nothing, and is told why" % engine,
              rc_ == 0 and out == "" and NOT_ALLOCATED in err, (rc_, out, err))
        rc_, out, hca, err = decide(without_rdma(train), engine, False, node_conf)
        check("%s, request_scope = node: the same pod gets every HCA of the node" % engine,
              rc_ == 0 and hca == ALL_PORTS, (rc_, out, err))
    if gs:
        # rule 9 chooses among the node's NICs: not under request_scope = allocated
        rc_, out, hca, err = decide(gs, engine, False)
        check("%s, example config: the GPU-subset pod (annotated, no RDMA resource) gets "
              "nothing" % engine, rc_ == 0 and out == "" and NOT_ALLOCATED in err,
              (rc_, out, err))
        rc_, out, hca, err = decide(gs, engine, False, node_conf)
        check("%s, request_scope = node: the GPU-subset pod gets the NICs under its GPUs' "
              "PCIe switch" % engine, rc_ == 0 and hca == "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1",
              (rc_, out, err))
    rc_, out, hca, err = decide(asks_env, engine, False)
    check("%s, example config: a pod asking through env and allocated no HCA gets nothing"
          % engine, rc_ == 0 and out == "" and "OCI_RDMA_HOOK_ENABLE=true in process.env), "
          + NOT_ALLOCATED in err, (rc_, out, err))
    rc_, out, hca, err = decide(nothing, engine, False)
    check("%s, example config: a pod that asks for nothing gets nothing" % engine,
          rc_ == 0 and out == "" and NO_DEVICE in err, (rc_, out, err))
    # the defaults (activation = always): what CRI-O's hooks.d files give every pod
    rc_, out, hca, err = decide(nothing, engine, False, default_conf)
    check("%s, the package's defaults: a pod that asks for nothing gets every HCA of the node"
          % engine, rc_ == 0 and hca == ALL_PORTS, (rc_, out, err))

# ---- the installer DaemonSet (installer.yaml) and the node label it has set ---------------------
dss = [d for d in every if d["kind"] == "DaemonSet"]
check("exactly one DaemonSet, apps/v1", len(dss) == 1 and dss[0].get("apiVersion") == "apps/v1",
      [d["metadata"]["name"] for d in dss])
tpl = (dss[0] if dss else {}).get("spec", {}).get("template", {})
pspec = tpl.get("spec", {})
ctrs = pspec.get("containers", [])
c0 = ctrs[0] if ctrs else {}
check("the DaemonSet's selector matches its pod template's labels",
      bool(dss) and dss[0]["spec"].get("selector", {}).get("matchLabels", {}).items() <=
      tpl.get("metadata", {}).get("labels", {}).items())
check("the DaemonSet has a nodeSelector", bool(pspec.get("nodeSelector")), pspec.get("nodeSelector"))
host_vols = [v["name"] for v in pspec.get("volumes", [])
             if v.get("hostPath", {}).get("path") == "/"]
check("the host's / is mounted at /host (the entrypoint's --root)",
      any(m.get("mountPath") == "/host" and m.get("name") in host_vols
          for m in c0.get("volumeMounts", [])), c0.get("volumeMounts"))
args = c0.get("args", [])
ds_handler = args[args.index("--handler") + 1] if "--handler" in args[:-1] else "rdma"
check("the installer registers the RuntimeClass's handler (%s)" % handler, ds_handler == handler,
      ds_handler)
sc = c0.get("securityContext", {})
check("the installer is not privileged: every capability dropped, SYS_CHROOT and SYS_PTRACE "
      "alone added", not sc.get("privileged") and
      sc.get("capabilities", {}).get("drop") == ["ALL"] and
      sc.get("capabilities", {}).get("add", []) == ["SYS_CHROOT", "SYS_PTRACE"], sc)
check("the installer sees the engine's PID (hostPID) and has no API token",
      pspec.get("hostPID") is True and pspec.get("automountServiceAccountToken") is False)
install_h = open(os.path.join(src, "include", "orh", "cmd", "install.h")).read()
label = re.search(r'#define ORH_INSTALL_LABEL "([^"]+)"', install_h)
label = label.group(1) if label else None
check("the RuntimeClass selects the nodes by the label the installer's feature file sets (%s=%s)"
      % (label, handler), (rc.get("scheduling") or {}).get("nodeSelector") == {label: handler},
      (rc.get("scheduling") or {}).get("nodeSelector"))
build_sh = open(os.path.join(src, "deploy", "installer", "build-image.sh")).read()
check("the installer image is FROM scratch, its entrypoint install --root /host",
      "FROM scratch" in build_sh and '"install", "--root", "/host"]' in build_sh)

# ---- the DaemonSet as a production installer (base and overlay, as rendered) ---------------------
install_args = open(os.path.join(src, "src", "cmd", "install_args.h")).read()
ready_file = re.search(r'#define INST_READY_FILE "([^"]+)"', install_args)
ready_file = ready_file.group(1) if ready_file else None


def one(objs, kind):
    got = [d for d in objs if d.get("kind") == kind]
    return got[0] if len(got) == 1 else {}


def node_config_of(objs, label):
    """The ConfigMap text the DaemonSet's --node-config names, through its volume."""
    ds = one(objs, "DaemonSet")
    ps = ds.get("spec", {}).get("template", {}).get("spec", {})
    c = (ps.get("containers") or [{}])[0]
    a = c.get("args", [])
    path = a[a.index("--node-config") + 1] if "--node-config" in a[:-1] else ""
    mounts = {m.get("mountPath"): m.get("name") for m in c.get("volumeMounts", [])}
    vol = {v["name"]: v for v in ps.get("volumes", [])}.get(mounts.get(os.path.dirname(path)), {})
    cm_name = vol.get("configMap", {}).get("name")
    cms = {d["metadata"]["name"]: d for d in objs if d.get("kind") == "ConfigMap"}
    text = (cms.get(cm_name) or {}).get("data", {}).get(os.path.basename(path))
    check("%s: the installer's --node-config (%s) is a key of the ConfigMap its volume mounts "
          "(%s)" % (label, path, cm_name), text is not None, (path, mounts, sorted(cms)))
    return text or ""


def config_check(text, name):
    """`oci-rdma-hook --config FILE detect` on the sample node: 0 where the binary accepts it."""
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([hook, "--config", path, "--sysroot", node, "detect"],
                       capture_output=True, text=True)
    return r.returncode, r.stderr


for label, objs in (("base", [d for d in docs.get("base.yaml", [])]), ("overlay", overlay)):
    ds = one(objs, "DaemonSet")
    ps = ds.get("spec", {}).get("template", {}).get("spec", {})
    c = (ps.get("containers") or [{}])[0]
    check("%s: the DaemonSet and its ConfigMap are in kube-system (system-node-critical's)"
          % label, ds.get("metadata", {}).get("namespace") == "kube-system" and
          all(d["metadata"].get("namespace") == "kube-system" for d in objs
              if d["kind"] == "ConfigMap"))
    check("%s: priorityClassName system-node-critical" % label,
          ps.get("priorityClassName") == "system-node-critical", ps.get("priorityClassName"))
    res = c.get("resources", {})
    check("%s: cpu and memory requests and limits, requests = limits (Guaranteed)" % label,
          all(res.get(k, {}).get(r) for k in ("requests", "limits") for r in ("cpu", "memory"))
          and res.get("requests") == res.get("limits"), res)
    us = ds.get("spec", {}).get("updateStrategy", {})
    check("%s: a RollingUpdate update strategy" % label, us.get("type") == "RollingUpdate", us)
    tol = ps.get("tolerations", [])
    check("%s: tolerates nvidia.com/gpu:NoSchedule" % label,
          {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tol, tol)
    check("%s: tolerates every taint (operator: Exists, no key, no effect)" % label,
          {"operator": "Exists"} in tol, tol)
    # NFD's built-in rule (source/custom/static_features.go): ib_uverbs and rdma_ucm loaded
    check("%s: runs on the nodes NFD labels feature.node.kubernetes.io/rdma.available" % label,
          ps.get("nodeSelector") == {"feature.node.kubernetes.io/rdma.available": "true"},
          ps.get("nodeSelector"))
    check("%s: terminationGracePeriodSeconds leaves the undo at least 120 s" % label,
          (ps.get("terminationGracePeriodSeconds") or 0) >= 120,
          ps.get("terminationGracePeriodSeconds"))
    probe = c.get("readinessProbe", {}).get("exec", {}).get("command")
    check("%s: the readinessProbe runs the image's /oci-rdma-hook install --probe" % label,
          probe == ["/oci-rdma-hook", "install", "--probe"] and
          'ln -s "${bindir#/}/oci-rdma-hook" "$ctx/rootfs/oci-rdma-hook"' in build_sh, probe)
    mounts = {m.get("mountPath"): m.get("name") for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in ps.get("volumes", [])}
    check("%s: the probe's ready file (%s) is on a volume of its own (the image's root is "
          "read-only)" % (label, ready_file), bool(ready_file) and
          "emptyDir" in vols.get(mounts.get(os.path.dirname(ready_file or "/x")), {}), mounts)
    check("%s: exactly one RuntimeClass (%s)" % (label, handler),
          one(objs, "RuntimeClass").get("handler") == handler)

base_text = node_config_of(docs.get("base.yaml", []), "base")
check("base: the ConfigMap's node config is base/oci-rdma-hook.conf",
      base_text == open(conf).read())
check("deploy/kubernetes/oci-rdma-hook.conf is base's (a link: tests/e2e/e2e-cri.sh reads it)",
      os.path.realpath(os.path.join(kdir, "oci-rdma-hook.conf")) == os.path.realpath(conf))
rc_, err = config_check(base_text, "base-node.conf")
check("base: the ConfigMap's node config passes the binary's check (--config FILE detect)",
      rc_ == 0, err)
for key, value in (("activation", "devices"), ("request_scope", "allocated")):
    check("base: the ConfigMap's node config says %s = %s" % (key, value),
          re.search(r"^%s\s*=\s*%s\s*$" % (key, value), base_text, re.M) is not None)
over_text = node_config_of(overlay, "overlay")
check("overlay: its ConfigMap replaces the base's node config",
      bool(over_text) and over_text != base_text and
      len([d for d in overlay if d["kind"] == "ConfigMap"]) == 1)
rc_, err = config_check(over_text, "overlay-node.conf")
check("overlay: its node config passes the binary's check", rc_ == 0, err)
# the same check refuses a config that is not one: it can fail
rc_, err = config_check(base_text.replace("activation = devices", "activation = sometimes"),
                        "broken-node.conf")
check("the check refuses a node config with activation = sometimes (rc %d)" % rc_,
      rc_ != 0 and "activation" in err, err)

# ---- the NRI overlay: the plugin's DaemonSet, no engine touched ----------------------------------
# overlays/nri: the base's ConfigMap, the DaemonSet oci-rdma-hook-nri instead of the installer
# and the RuntimeClass. runc runs the hooks the plugin answers with on the host, by the paths
# the plugin names (its binary, its node config, the sysfs view's directory): each of those
# must be a host path mounted at the same path.
nri = docs.get("nri.yaml", [])
nds = one(nri, "DaemonSet")
nps = nds.get("spec", {}).get("template", {}).get("spec", {})
nc = (nps.get("containers") or [{}])[0]
check("nri: one DaemonSet, the plugin's; no installer, no RuntimeClass",
      nds.get("metadata", {}).get("name") == "oci-rdma-hook-nri" and
      not [d for d in nri if d["kind"] == "RuntimeClass"], [d["kind"] for d in nri])
check("nri: the DaemonSet and its ConfigMap are in kube-system, system-node-critical",
      nds.get("metadata", {}).get("namespace") == "kube-system" and
      all(d["metadata"].get("namespace") == "kube-system" for d in nri) and
      nps.get("priorityClassName") == "system-node-critical")
nres = nc.get("resources", {})
check("nri: requests = limits (Guaranteed)", all(nres.get(k, {}).get(r) for k in
      ("requests", "limits") for r in ("cpu", "memory")) and
      nres.get("requests") == nres.get("limits"), nres)
check("nri: the installer's nodes and tolerations",
      nps.get("nodeSelector") == {"feature.node.kubernetes.io/rdma.available": "true"} and
      {"operator": "Exists"} in nps.get("tolerations", []), nps.get("nodeSelector"))
nvols = {v["name"]: v for v in nps.get("volumes", [])}
nmounts = {m.get("mountPath"): m for m in nc.get("volumeMounts", [])}
host_paths = {p: nvols.get(m.get("name"), {}).get("hostPath", {}).get("path")
              for p, m in nmounts.items()}


def host_same(path):
    """path lies under a hostPath volume mounted at its own path on the host."""
    return any(hp == mp and (path == mp or path.startswith(mp.rstrip("/") + "/"))
               for mp, hp in host_paths.items() if hp)


check("nri: no engine file or directory is mounted, no host root, no hostPID",
      not any(hp and (hp == "/" or re.match(r"/(etc|var/lib)/(containerd|crio|docker)", hp) or
                      hp.startswith("/etc/containers")) for hp in host_paths.values()) and
      not nps.get("hostPID"), host_paths)
ncaps = nc.get("securityContext", {}).get("capabilities", {})
check("nri: every capability dropped but SYS_RESOURCE (the memlock it gives is held to what it "
      "could raise itself)", ncaps.get("drop") == ["ALL"] and ncaps.get("add") == ["SYS_RESOURCE"],
      ncaps)
for path in ("/var/run/nri", "/run/oci-rdma-hook"):
    check("nri: %s is the host's, at the same path, writable" % path,
          host_same(path) and not nmounts.get(path, {}).get("readOnly"), host_paths)
script = "\n".join(nc.get("command", [])[2:]) if nc.get("command", [])[:2] == ["/bin/sh", "-c"] \
    else ""
m = re.search(r'^exec "\$d/bin/oci-rdma-hook" nri (.*?)$', script.replace("\\\n", " "), re.M)
nargs = m.group(1).split() if m else []
d = re.search(r"^d=(\S+)$", script, re.M)
d = d.group(1) if d else ""
nconf = nargs[nargs.index("--config") + 1].replace('"$d', d).strip('"') \
    if "--config" in nargs[:-1] else ""
check("nri: the container runs `oci-rdma-hook nri` from %s/bin, a host path at the same path "
      "(the hooks' binary)" % d, bool(m) and bool(d) and host_same(d + "/bin/oci-rdma-hook"),
      script)
check("nri: its socket is the runtimes' default, /var/run/nri/nri.sock",
      "--socket" in nargs[:-1] and nargs[nargs.index("--socket") + 1] == "/var/run/nri/nri.sock",
      nargs)
check("nri: its --config (%s) is a host path at the same path (the hooks' node config)" % nconf,
      bool(nconf) and host_same(nconf), nargs)
r = subprocess.run([hook, "nri", "--help"], capture_output=True, text=True)
check("nri: the binary's nri command takes each option the DaemonSet passes (%s)" %
      " ".join(a for a in nargs if a.startswith("--")),
      r.returncode == 0 and all(a in r.stdout + r.stderr for a in nargs if a.startswith("--")),
      r.stdout + r.stderr)
# the copy: from the ConfigMap's key to the path the plugin reads
cps = re.findall(r"^cp (\S+) (\S+)$", script, re.M)
mvs = re.findall(r"^mv -f (\S+) (\S+)$", script, re.M)
cm_src = [s_ for s_, _ in cps if not s_.startswith("/oci-rdma-hook")]
cm_mount = os.path.dirname(cm_src[0]) if cm_src else ""
cm_name = nvols.get(nmounts.get(cm_mount, {}).get("name"), {}).get("configMap", {}).get("name")
ncms = {x["metadata"]["name"]: x for x in nri if x["kind"] == "ConfigMap"}
ntext = (ncms.get(cm_name) or {}).get("data", {}).get(os.path.basename(cm_src[0])) \
    if cm_src else None
check("nri: the node config copied is a key of the ConfigMap mounted (%s)" % cm_name,
      ntext is not None, (cps, sorted(ncms)))
check("nri: it is the base's node config", ntext == base_text)
check("nri: the binary and the node config are renamed over the paths the plugin runs and reads",
      [dst.replace('"$d', d).strip('"') for _, dst in mvs] ==
      [d + "/bin/oci-rdma-hook", nconf], mvs)
sh = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
check("nri: the container's script parses (sh -n)", bool(script) and sh.returncode == 0,
      sh.stderr)
used = sorted({ln.split()[0] for ln in script.replace("\\\n", " ").splitlines()
               if ln.strip() and "=" not in ln.split()[0]} - {"set", "exec"})
links = re.search(r'^\tfor l in ([a-z ]+); do ln -s busybox', build_sh, re.M)
links = links.group(1).split() if links else []
check("nri: the nri image (FLAVOUR=nri build-image.sh) has sh and each command the script "
      "runs (%s)" % " ".join(used), bool(used) and set(["sh"] + used) <= set(links) and
      nc.get("image", "").startswith("oci-rdma-hook-nri:"), (used, links))

# ---- the man page points here -------------------------------------------------------------------
man = open(os.path.join(src, "man", "oci-rdma-hook.8")).read()
registration = open(os.path.join(src, "man", "oci-rdma-hook-registration.7")).read()
kube = open(os.path.join(src, "man", "oci-rdma-hook-kubernetes.7")).read()
check("oci-rdma-hook(8)'s KUBERNETES section points to oci-rdma-hook-kubernetes(7), which names "
      "deploy/kubernetes",
      re.search(r"^\.SH KUBERNETES$", man, re.M) is not None and
      "oci\\-rdma\\-hook\\-kubernetes (7)" in man and "deploy/kubernetes" in kube)
check("oci-rdma-hook-kubernetes(7) registers the handler with configure, "
      "oci-rdma-hook-registration(7), which it points to, shows what it writes (its snippets "
      "are configure's --dry-run: tests/package.sh)",
      "oci\\-rdma\\-hook configure \\-\\-engine containerd" in kube and
      "oci\\-rdma\\-hook\\-registration (7)" in kube and
      'BinaryName = "/usr/bin/oci-rdma-runtime"' in registration)
check("oci-rdma-hook-kubernetes(7): the example config's request_scope = allocated",
      "request_scope = allocated" in kube)
for name, pod in sorted(pods.items()):
    for res in limits_of(pod):
        check("oci-rdma-hook-kubernetes(7): names pod %s's resource %s" % (name, res),
              res.replace("-", "\\-") in kube or res in kube)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
