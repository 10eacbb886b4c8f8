#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The engine snippets of oci-rdma-hook-registration(7) are what `configure --dry-run` prints.

Usage: man_snippets.py MANPAGE BINARY WORKDIR

Each snippet follows a roff comment line `.\\" configure-dry-run ENGINE`: the text between
the next .nf and .fi, unescaped, must be exactly what `BINARY configure --engine ENGINE
--dry-run` prints on a node whose files are the ones set up below (paths shown without the
--root it ran under). BINARY must be built with prefix /usr (the package), as the page is.
"""
import os
import re
import subprocess
import sys

# what each engine's node holds before configure runs (relative to --root)
SETUP = {
    "containerd": {"etc/containerd/config.toml": "version = 2\n",
                   "etc/oci-rdma-hook/oci-rdma-hook.conf": "[node]\n"},
    "crio": {"usr/libexec/crio/crun": None, "usr/libexec/crio/conmon": None,
             "etc/oci-rdma-hook/oci-rdma-hook.conf": "[node]\n"},
    "docker": {"etc/oci-rdma-hook/oci-rdma-hook.conf": "[node]\n"},
    "podman": {},
}


def unroff(line):
    for a, b in (("\\-", "-"), ("\\(dq", '"'), ("\\(aq", "'"), ("\\e", "\\"), ("\\&", "")):
        line = line.replace(a, b)
    return line


def snippets(page):
    lines = open(page).read().split("\n")
    found = {}
    for i, line in enumerate(lines):
        m = re.match(r'^\.\\" configure-dry-run (\S+)$', line)
        if not m:
            continue
        start = lines.index(".nf", i) + 1
        end = lines.index(".fi", start)
        found[m.group(1)] = "".join(unroff(l) + "\n" for l in lines[start:end])
    return found


def dry_run(binary, engine, root):
    os.makedirs(root, exist_ok=True)
    for rel, text in SETUP[engine].items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" if text is None else text)
        if text is None:
            os.chmod(path, 0o755)
    out = subprocess.run([binary, "configure", "--engine", engine, "--root", root, "--dry-run"],
                         capture_output=True, text=True, check=True).stdout
    return out.replace("# " + root + "/", "# /")


def main():
    page, binary, work = sys.argv[1:4]
    found = snippets(page)
    bad = 0
    if sorted(found) != sorted(SETUP):
        print("snippets for %s, expected %s" % (sorted(found), sorted(SETUP)))
        bad = 1
    for engine, text in sorted(found.items()):
        got = dry_run(binary, engine, os.path.join(work, engine))
        if got != text:
            print("%s: the page shows\n%s\nconfigure --dry-run prints\n%s" % (engine, text, got))
            bad = 1
    sys.exit(bad)


if __name__ == "__main__":
    main()
