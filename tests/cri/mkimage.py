#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Pack a directory into a one-layer image archive in docker's `save` format, for
`ctr -n k8s.io images import` (no registry).

    mkimage.py ROOTFS NAME:TAG OUT.tar [--entrypoint ARG ...] [--cmd ARG ...]

ROOTFS becomes the layer as it is (files owned by root in the layer); NAME:TAG is the
image's name (e.g. localhost/orh-pause:1); the config says linux/amd64.
"""
import argparse
import hashlib
import io
import json
import tarfile


def layer_tar(rootfs):
    buf = io.BytesIO()

    def as_root(ti):
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        return ti

    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        t.add(rootfs, arcname=".", filter=as_root)
    return buf.getvalue()


def add_bytes(t, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = 0o644
    t.addfile(ti, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rootfs")
    ap.add_argument("name")
    ap.add_argument("out")
    ap.add_argument("--entrypoint", nargs="+", default=None)
    ap.add_argument("--cmd", nargs="+", default=None)
    a = ap.parse_args()
    write_image(a.rootfs, a.name, a.out, a.entrypoint, a.cmd)


def write_image(rootfs, name, out, entrypoint=None, cmd=None):
    """The archive OUT of ROOTFS as the image NAME (entrypoint and cmd: lists or None)."""
    layer = layer_tar(rootfs)
    layer_id = hashlib.sha256(layer).hexdigest()
    cfg = {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
    if entrypoint:
        cfg["Entrypoint"] = entrypoint
    if cmd:
        cfg["Cmd"] = cmd
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer_id]},
        "history": [{"created_by": "tests/cri/mkimage.py"}],
    }, sort_keys=True).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{
        "Config": config_name,
        "RepoTags": [name],
        "Layers": [layer_id + "/layer.tar"],
    }]).encode()
    with tarfile.open(out, "w") as t:
        add_bytes(t, config_name, config)
        add_bytes(t, layer_id + "/layer.tar", layer)
        add_bytes(t, "manifest.json", manifest)


if __name__ == "__main__":
    main()
