#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The checks of tests/k8s/helm-chart.sh on what `helm template` and `kubectl kustomize`
# rendered into WORKDIR (handler.yaml, nri.yaml, values.yaml, handler-values.yaml, kbase.yaml,
# knri.yaml).   helm_chart.py SRCDIR WORKDIR
import copy, os, re, sys, yaml

src, work = sys.argv[1:3]
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - " + name)
        for line in str(detail).splitlines()[:40]:
            print("#   " + line)


def load(name):
    with open(os.path.join(work, name + ".yaml")) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def kinds(docs):
    return sorted("%s/%s" % (d["kind"], d["metadata"]["name"]) for d in docs)


CM = re.compile(r"^oci-rdma-hook-node-config-[0-9a-z]+$")


def norm(obj):
    """obj without what differs by design: the ConfigMap's hash suffix (each tool hashes in
    its own way), the namespace (kustomize's; helm's is the release's), Helm's own label."""
    o = copy.deepcopy(obj)
    md = o.get("metadata", {})
    md.pop("namespace", None)
    md.get("labels", {}).pop("app.kubernetes.io/managed-by", None)
    if md.get("labels") == {}:
        del md["labels"]
    if CM.match(md.get("name", "")):
        md["name"] = "oci-rdma-hook-node-config"
    for v in o.get("spec", {}).get("template", {}).get("spec", {}).get("volumes", []):
        if "configMap" in v and CM.match(v["configMap"]["name"]):
            v["configMap"]["name"] = "oci-rdma-hook-node-config"
    return o


def diff(a, b, path=""):
    """the first paths where a and b differ"""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k), b.get(k), path + "." + k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, "%s[%d]" % (path, i))
        return out
    return [] if a == b else ["%s: kustomize %r, helm %r" % (path, a, b)]


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


for mode, k, h in (("handler", "kbase", "handler"), ("nri", "knri", "nri")):
    kd, hd = load(k), load(h)
    want = sorted(re.sub(r"node-config-.*", "node-config", x) for x in kinds(kd))
    got = sorted(re.sub(r"node-config-.*", "node-config", x) for x in kinds(hd))
    check("mode=%s: the chart renders the objects kustomize does (%s)" % (mode, ", ".join(want)),
          want == got, "kustomize: %s\nhelm: %s" % (want, got))
    for kind in ("DaemonSet", "RuntimeClass", "ConfigMap"):
        ka, ha = by_kind(kd, kind), by_kind(hd, kind)
        if not ka and not ha:
            continue
        if len(ka) != 1 or len(ha) != 1:
            check("mode=%s: one %s each" % (mode, kind), False, "%d and %d" % (len(ka), len(ha)))
            continue
        a, b = norm(ka[0]), norm(ha[0])
        if kind == "ConfigMap":
            a, b = a["data"], b["data"]
            what = "the node config's text"
        elif kind == "DaemonSet":
            what = "the DaemonSet %s (pod template: container, args, command, env, volumes, " \
                "mounts, security context, scheduling; selector, update strategy)" % a["metadata"]["name"]
        else:
            what = "the RuntimeClass %s" % a["metadata"]["name"]
        d = diff(a, b)
        check("mode=%s: %s as kustomize renders it" % (mode, what), not d, "\n".join(d))
    # the ConfigMap the DaemonSet mounts is the one the chart renders
    ds, cm = by_kind(hd, "DaemonSet"), by_kind(hd, "ConfigMap")
    if ds and cm:
        vols = {v["name"]: v for v in ds[0]["spec"]["template"]["spec"]["volumes"]}
        check("mode=%s: the DaemonSet mounts the ConfigMap the chart renders" % mode,
              vols["node-config"]["configMap"]["name"] == cm[0]["metadata"]["name"])

with open(os.path.join(src, "deploy/kubernetes/base/oci-rdma-hook.conf")) as f:
    base_conf = f.read()
with open(os.path.join(src, "deploy/helm/oci-rdma-hook/files/oci-rdma-hook.conf")) as f:
    check("the chart's files/oci-rdma-hook.conf is deploy/kubernetes/base's", f.read() == base_conf)

# every value reaches the rendered manifests
v = load("values")
ds = by_kind(v, "DaemonSet")[0]
spec = ds["spec"]["template"]["spec"]
ctr = spec["containers"][0]
cm = by_kind(v, "ConfigMap")[0]
with open(os.path.join(src, "deploy/kubernetes/overlays/example/oci-rdma-hook.conf")) as f:
    example = f.read()
nri_default = by_kind(load("nri"), "ConfigMap")[0]
check("values: mode=nri renders the NRI DaemonSet and no RuntimeClass",
      ds["metadata"]["name"] == "oci-rdma-hook-nri" and not by_kind(v, "RuntimeClass"))
check("values: the image", ctr["image"] == "registry.example.com/orh-nri:9.9", ctr["image"])
check("values: the priority class", spec.get("priorityClassName") == "orh-high")
check("values: the node selector", spec.get("nodeSelector") == {"example.com/rdma": "yes"},
      spec.get("nodeSelector"))
check("values: the tolerations",
      spec.get("tolerations") == [{"key": "example.com/only", "operator": "Exists"}],
      spec.get("tolerations"))
check("values: the node config's text", cm["data"]["oci-rdma-hook.conf"].rstrip("\n") ==
      example.rstrip("\n"), cm["data"]["oci-rdma-hook.conf"][:300])
check("values: another node config, another ConfigMap name (a rolling update)",
      cm["metadata"]["name"] != nri_default["metadata"]["name"])
vols = {x["name"]: x for x in spec["volumes"]}
mounts = {x["name"]: x for x in ctr["volumeMounts"]}
check("values: the NRI socket's directory: the hostPath, the mount and the plugin's --socket",
      vols["nri"]["hostPath"]["path"] == "/run/k3s/nri"
      and mounts["nri"]["mountPath"] == "/run/k3s/nri"
      and "--socket /run/k3s/nri/nri.sock" in ctr["command"][2], ctr["command"][2])
hv = load("handler-values")
ds = by_kind(hv, "DaemonSet")[0]
ctr = ds["spec"]["template"]["spec"]["containers"][0]
rc = by_kind(hv, "RuntimeClass")
check("values: the installer's image", ctr["image"] == "registry.example.com/orh-inst:9.9",
      ctr["image"])
check("values: the handler's name, in the installer's args and the RuntimeClass",
      ctr["args"][:2] == ["--handler", "rdma2"] and len(rc) == 1
      and rc[0]["metadata"]["name"] == "rdma2" and rc[0]["handler"] == "rdma2", (ctr["args"], rc))
check("values: the installer's environment",
      ctr.get("env") == [{"name": "CONTAINERD_CONFIG", "value": "/etc/k0s/containerd.toml"}],
      ctr.get("env"))
print("# %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
