#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks of the Kubernetes examples in deploy/kubernetes/ (man oci-rdma-hook, KUBERNETES):
# every YAML and TOML file parses; the RuntimeClass, the containerd and CRI-O runtime
# handlers and the pods agree with each other and with the installed path of the shim;
# CRI-O's hooks_dir holds no file of a stage CRI-O does not know; the node config is one
# the binary accepts. Then the decision for the example pods: the container and sandbox
# specs that containerd's and CRI-O's CRI code would build from them (annotations passed as
# their sources do it, the device plugin's uverbs node in linux.devices) go through
# `oci-rdma-hook env --spec` on a sample node. No cluster and no engine here: the engines'
# part is modelled on their sources, named where it is done.
# Environment: ORH_HOOK (the built binary), ORH_SRCDIR, ORH_BUILDDIR.
set -u
HOOK=${ORH_HOOK:?run through meson test}
SRC=${ORH_SRCDIR:?run through meson test}
BUILD=${ORH_BUILDDIR:?run through meson test}
work=$(mktemp -d /tmp/orh-manifests.XXXXXX)
trap 'rm -rf "$work"' EXIT

python3 -c 'import yaml, tomllib' 2>/dev/null || {
	echo "not ok - python3 with yaml and tomllib (python3-yaml: tests/setup-debian.sh installs it)"
	exit 1
}
python3 "$SRC/tests/mknode.py" "$SRC/tests/nodes/seed001-roce.json" "$work/node" >/dev/null ||
	exit 1
# where `meson install` puts the shim, and under which prefix
if ! meson introspect --installed "$BUILD" >"$work/installed.json" ||
	! meson introspect --buildoptions "$BUILD" >"$work/options.json"; then
	echo "not ok - meson introspect $BUILD"
	exit 1
fi

python3 - "$HOOK" "$SRC" "$work" <<'EOF'
import glob, json, os, re, subprocess, sys, tomllib, yaml

hook, src, work = sys.argv[1:4]
kdir = os.path.join(src, "deploy", "kubernetes")
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


def load_toml(name):
    with open(os.path.join(kdir, name), "rb") as f:
        return tomllib.load(f)


# ---- the files parse -------------------------------------------------------------------
docs = {}
for path in sorted(glob.glob(os.path.join(kdir, "*.yaml"))):
    name = os.path.basename(path)
    try:
        with open(path) as f:
            docs[name] = [d for d in yaml.safe_load_all(f) if d is not None]
        ok = all(isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and
                 (d.get("metadata") or {}).get("name") for d in docs[name]) and docs[name]
        check(name + " parses, each document with apiVersion, kind, metadata.name", ok)
    except yaml.YAMLError as e:
        check(name + " parses", False, e)
check("deploy/kubernetes holds YAML manifests", len(docs) >= 3, sorted(docs))
every = [d for ds in docs.values() for d in ds]

try:
    ctd = load_toml("containerd-config.toml")
    crio = load_toml("crio-runtime.conf")
    crio_hooks = load_toml("crio-hooks.conf")
    check("the containerd and CRI-O snippets parse as TOML", True)
except (OSError, tomllib.TOMLDecodeError) as e:
    check("the containerd and CRI-O snippets parse as TOML", False, e)
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
check("CRI-O: no oci-rdma-hook annotation in allowed_annotations",
      not [a for a in xrt.get("allowed_annotations", []) if a.startswith("oci-rdma-hook/")],
      xrt.get("allowed_annotations"))

# ---- the shim's installed path ------------------------------------------------------------
with open(os.path.join(work, "installed.json")) as f:
    installed = json.load(f)
with open(os.path.join(work, "options.json")) as f:
    prefix = [o["value"] for o in json.load(f) if o["name"] == "prefix"][0]
shim = [dst for dst in installed.values() if os.path.basename(dst) == "oci-rdma-runtime"]
check("meson installs oci-rdma-runtime under the prefix", len(shim) == 1 and
      shim[0].startswith(prefix + "/"), (prefix, shim))
# the snippets name the path of the Debian package and of --prefix=/usr (README, Install)
want = "/usr" + shim[0][len(prefix):] if shim else None
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
hooks_dirs = [d.rstrip("/") for d in
              crio_hooks.get("crio", {}).get("runtime", {}).get("hooks_dir", [])]
check("CRI-O hooks.d: hooks_dir is set", bool(hooks_dirs), hooks_dirs)
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

train = pods.get("rdma-training", {})
tc = (train.get("spec", {}).get("containers") or [{}])[0]
check("training pod: asks with oci-rdma-hook/enable: \"true\"",
      train.get("metadata", {}).get("annotations", {}).get("oci-rdma-hook/enable") == "true")
check("training pod: nvidia.com/gpu: 8",
      tc.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") == 8)
check("training pod: runs torchrun",
      "torchrun" in " ".join(tc.get("command", []) + tc.get("args", [])))
dp = pods.get("rdma-device-plugin", {})
dc = (dp.get("spec", {}).get("containers") or [{}])[0]
check("device-plugin pod: rdma/hca: 1 and no annotation",
      dc.get("resources", {}).get("limits", {}).get("rdma/hca") == 1 and
      not dp["metadata"].get("annotations"))

# ---- the node config is one the binary accepts ---------------------------------------------------
conf = os.path.join(kdir, "oci-rdma-hook.conf")
r = subprocess.run([hook, "--config", conf, "--sysroot", node, "env"], capture_output=True,
                   text=True)
check("oci-rdma-hook.conf: the binary accepts it", r.returncode == 0, r.stderr)
check("oci-rdma-hook.conf: activation = devices",
      re.search(r"^activation\s*=\s*devices\s*$", open(conf).read(), re.M) is not None)

# ---- the decision for the specs the CRI code builds from the pods ---------------------------------
# The device plugin's allocation on the sample node: mlx5_3's uverbs3 and rdma_cm.
PLUGIN_DEVICES = [
    {"path": "/dev/infiniband/uverbs3", "type": "c", "major": 231, "minor": 195},
    {"path": "/dev/infiniband/rdma_cm", "type": "c", "major": 10, "minor": 58},
]
ALL_PORTS = "NCCL_IB_HCA==" + ",".join("mlx5_%d:1" % i for i in range(1, 9))


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
        if any(k.startswith("rdma/") for k in limits):
            devices = PLUGIN_DEVICES
    return {"ociVersion": "1.0.2", "process": {"args": ["sh"], "env": env},
            "linux": {"devices": devices}, "annotations": out}


def decide(pod, engine, sandbox):
    path = os.path.join(work, "%s-%s-%s.json" % (pod["metadata"]["name"], engine, sandbox))
    with open(path, "w") as f:
        json.dump(oci_spec(pod, engine, sandbox), f)
    r = subprocess.run([hook, "--config", conf, "--sysroot", node, "env", "--spec", path],
                       capture_output=True, text=True)
    hca = [l for l in r.stdout.splitlines() if l.startswith("NCCL_IB_HCA=")]
    return r.returncode, r.stdout, (hca[0] if hca else ""), r.stderr


nothing = {"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "c"}]}}
for engine in ("containerd", "CRI-O"):
    if dp:
        rc_, out, hca, err = decide(dp, engine, False)
        check("%s, activation = devices: the device-plugin pod gets exactly its HCA" % engine,
              rc_ == 0 and hca == "NCCL_IB_HCA==mlx5_3:1", (rc_, out, err))
        rc_, out, hca, err = decide(dp, engine, True)
        check("%s: the device-plugin pod's sandbox gets nothing" % engine,
              rc_ == 0 and out == "", (rc_, out, err))
    if train:
        rc_, out, hca, err = decide(train, engine, False)
        check("%s, activation = devices: the annotated training pod is served, every port"
              % engine, rc_ == 0 and hca == ALL_PORTS, (rc_, out, err))
        rc_, out, hca, err = decide(train, engine, True)
        check("%s: the training pod's sandbox gets nothing, though annotated" % engine,
              rc_ == 0 and out == "", (rc_, out, err))
    rc_, out, hca, err = decide(nothing, engine, False)
    check("%s, activation = devices: a pod that asks for nothing gets nothing" % engine,
          rc_ == 0 and out == "", (rc_, out, err))

# ---- the man page points here -------------------------------------------------------------------
man = open(os.path.join(src, "man", "oci-rdma-hook.8")).read()
check("oci-rdma-hook(8) has a KUBERNETES section naming deploy/kubernetes",
      re.search(r"^\.SH KUBERNETES$", man, re.M) is not None and "deploy/kubernetes" in man)
check("oci-rdma-hook(8) names the same BinaryName", 'BinaryName = "%s"' % want in man)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
EOF
