#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A small CRI v1 client for the tests, with crictl's verbs and config files.

    cri.py [--endpoint unix:///run/containerd/containerd.sock] [--timeout S] VERB ...

    version                        the runtime's name and versions
    status                         the runtime's conditions, one "TYPE true|false" a line;
                                   exit 1 unless every one is true
    img IMAGE                      the image's id, as the CRI sees it; exit 1 if it has none
    runp [--runtime H] POD.json    run a pod sandbox; print its id
    create POD-ID CTR.json POD.json
                                   create a container in the pod; print its id
    start ID | stop [-t S] ID | rm ID
    run [--runtime H] CTR.json POD.json
                                   runp, create and start in one: print the pod's id, then
                                   (once created) the container's, a line each
    stopp POD-ID | rmp [-f] POD-ID (-f: stop it first)
    exec [-t S] ID CMD [ARG...]    ExecSync: the command's stdout and stderr, its exit status
    inspect ID | inspectp POD-ID   the container's or the pod's status as JSON (verbose)
    logs ID                        the container's log (the CRI's log file), without the
                                   timestamp, stream and tag of each line

POD.json and CTR.json are crictl's formats: PodSandboxConfig and ContainerConfig as JSON,
field names as in the API (metadata, annotations, labels, linux.security_context...,
envs, devices, mounts). An unknown field is an error. The Python stubs are generated
from tests/cri/cri_subset.proto with grpc_tools.protoc into $CRI_STUBS (kept and reused
while newer than the .proto), or into a temporary directory removed at exit.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "cri_subset.proto")


def load_stubs():
    out = os.environ.get("CRI_STUBS")
    if out:
        os.makedirs(out, exist_ok=True)
    else:
        out = tempfile.mkdtemp(prefix="cri-stubs.")
        import atexit
        atexit.register(shutil.rmtree, out, True)
    pb2 = os.path.join(out, "cri_subset_pb2.py")
    if not os.path.exists(pb2) or os.path.getmtime(pb2) < os.path.getmtime(PROTO):
        from grpc_tools import protoc
        rc = protoc.main(["protoc", "-I" + HERE, "--python_out=" + out,
                          "--grpc_python_out=" + out, PROTO])
        if rc != 0:
            sys.exit("cri.py: protoc failed on %s" % PROTO)
    sys.path.insert(0, out)
    import cri_subset_pb2
    import cri_subset_pb2_grpc
    return cri_subset_pb2, cri_subset_pb2_grpc


def parse_json(path, msg):
    from google.protobuf import json_format
    with open(path) as f:
        return json_format.ParseDict(json.load(f), msg)


def to_json(msg):
    from google.protobuf import json_format
    return json_format.MessageToJson(msg, preserving_proto_field_name=True, indent=2)


def main():
    ap = argparse.ArgumentParser(prog="cri.py", description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", default="unix:///run/containerd/containerd.sock")
    ap.add_argument("--timeout", type=float, default=60, help="seconds an RPC may take")
    sub = ap.add_subparsers(dest="verb", required=True)
    sub.add_parser("version")
    sub.add_parser("status")
    sub.add_parser("img").add_argument("image")
    p = sub.add_parser("runp")
    p.add_argument("--runtime", default="")
    p.add_argument("pod_json")
    p = sub.add_parser("create")
    p.add_argument("pod_id")
    p.add_argument("ctr_json")
    p.add_argument("pod_json")
    p = sub.add_parser("run")
    p.add_argument("--runtime", default="")
    p.add_argument("ctr_json")
    p.add_argument("pod_json")
    for verb in ("start", "rm", "stopp", "inspect", "inspectp", "logs"):
        sub.add_parser(verb).add_argument("id")
    p = sub.add_parser("rmp")
    p.add_argument("-f", "--force", action="store_true")
    p.add_argument("id")
    p = sub.add_parser("stop")
    p.add_argument("-t", "--stop-timeout", type=int, default=10)
    p.add_argument("id")
    p = sub.add_parser("exec")
    p.add_argument("-t", "--exec-timeout", type=int, default=30)
    p.add_argument("id")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()

    pb, stubs = load_stubs()
    import grpc
    chan = grpc.insecure_channel(a.endpoint)
    rt = stubs.RuntimeServiceStub(chan)
    im = stubs.ImageServiceStub(chan)
    t = a.timeout
    step = ""

    try:
        if a.verb == "version":
            r = rt.Version(pb.VersionRequest(version="v1"), timeout=t)
            print("%s %s (CRI %s)" % (r.runtime_name, r.runtime_version, r.runtime_api_version))
        elif a.verb == "status":
            r = rt.Status(pb.StatusRequest(), timeout=t)
            for c in r.status.conditions:
                print("%s %s%s" % (c.type, str(c.status).lower(),
                                   (" " + c.message) if c.message else ""))
            return 0 if all(c.status for c in r.status.conditions) else 1
        elif a.verb == "img":
            r = im.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=a.image)),
                               timeout=t)
            if not r.image.id:
                return 1
            print(r.image.id)
        elif a.verb == "runp":
            pod = parse_json(a.pod_json, pb.PodSandboxConfig())
            r = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod,
                                                         runtime_handler=a.runtime), timeout=t)
            print(r.pod_sandbox_id)
        elif a.verb == "create":
            ctr = parse_json(a.ctr_json, pb.ContainerConfig())
            pod = parse_json(a.pod_json, pb.PodSandboxConfig())
            r = rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=a.pod_id, config=ctr, sandbox_config=pod), timeout=t)
            print(r.container_id)
        elif a.verb == "run":
            ctr = parse_json(a.ctr_json, pb.ContainerConfig())
            pod = parse_json(a.pod_json, pb.PodSandboxConfig())
            step = "RunPodSandbox"
            r = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=pod,
                                                         runtime_handler=a.runtime), timeout=t)
            print(r.pod_sandbox_id, flush=True)
            step = "CreateContainer"
            c = rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=r.pod_sandbox_id, config=ctr, sandbox_config=pod), timeout=t)
            print(c.container_id, flush=True)
            step = "StartContainer"
            rt.StartContainer(pb.StartContainerRequest(container_id=c.container_id), timeout=t)
        elif a.verb == "start":
            rt.StartContainer(pb.StartContainerRequest(container_id=a.id), timeout=t)
        elif a.verb == "stop":
            rt.StopContainer(pb.StopContainerRequest(container_id=a.id,
                                                     timeout=a.stop_timeout), timeout=t)
        elif a.verb == "rm":
            rt.RemoveContainer(pb.RemoveContainerRequest(container_id=a.id), timeout=t)
        elif a.verb == "stopp":
            rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=a.id), timeout=t)
        elif a.verb == "rmp":
            if a.force:
                rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=a.id), timeout=t)
            rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=a.id), timeout=t)
        elif a.verb == "exec":
            if not a.cmd:
                ap.error("exec: no command")
            r = rt.ExecSync(pb.ExecSyncRequest(container_id=a.id, cmd=a.cmd,
                                               timeout=a.exec_timeout),
                            timeout=max(t, a.exec_timeout + 5))
            sys.stdout.buffer.write(r.stdout)
            sys.stderr.buffer.write(r.stderr)
            return r.exit_code
        elif a.verb == "inspect":
            print(to_json(rt.ContainerStatus(
                pb.ContainerStatusRequest(container_id=a.id, verbose=True), timeout=t)))
        elif a.verb == "inspectp":
            print(to_json(rt.PodSandboxStatus(
                pb.PodSandboxStatusRequest(pod_sandbox_id=a.id, verbose=True), timeout=t)))
        elif a.verb == "logs":
            r = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=a.id), timeout=t)
            if not r.status.log_path:
                sys.exit("cri.py: container %s has no log path" % a.id)
            # each line: TIMESTAMP STREAM TAG CONTENT (tag F: a full line, P: partial)
            with open(r.status.log_path, errors="replace") as f:
                for line in f:
                    parts = line.rstrip("\n").split(" ", 3)
                    if len(parts) < 3:
                        continue
                    content = parts[3] if len(parts) == 4 else ""
                    sys.stdout.write(content + ("\n" if parts[2] != "P" else ""))
    except grpc.RpcError as e:
        sys.exit("cri.py %s: %s%s: %s" % (a.verb, step + ": " if step else "", e.code().name,
                                          e.details()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
