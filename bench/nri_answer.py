#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The CreateContainerResponse `oci-rdma-hook nri` gives a container of a node, written to a
file: the answer bench/nri_floor.c gives every container (bench/nri_bench.py --floor).

    nri_answer.py HOOK NODE CONF OUT

The plugin is driven by the tests' fake runtime (tests/test_nri_plugin.py): registered,
configured, asked once for a container that asks for nothing (activation = always in CONF
serves it), stopped; the container's state directory it made is removed. Exit 0 when the
answer was written, 1 when the plugin did not answer OK or gave no device.
"""
import os
import shutil
import signal
import socket
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    hook, node, conf, out = sys.argv[1:5]
    sys.argv = [sys.argv[0], hook, REPO]
    sys.path.insert(0, os.path.join(REPO, "tests"))
    import test_nri_plugin as t
    t.RUN = "orh-nri-answer-%d-" % os.getpid()
    tmp = tempfile.mkdtemp(prefix="orh-nri-answer.")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock = os.path.join(tmp, "nri.sock")
    srv.bind(sock)
    srv.listen(1)
    proc = t.start(sock, conf, node)
    try:
        rt, req = t.accept(srv, proc)
        t.register_and_configure(rt, req)
        rt.request(3, "CreateContainer", t.create_req("c1"))
        code, msg, payload = rt.response(3)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        shutil.rmtree(os.path.join(t.RUN_DIR, t.RUN + "c1"), ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    devices = t.adjustment(payload)["devices"] if code == 0 else []
    if code != 0 or not devices:
        print(f"nri_answer: the plugin answered {code} {msg!r} with {len(devices)} devices",
              file=sys.stderr)
        return 1
    with open(out, "wb") as f:
        f.write(payload)
    print(f"nri_answer: {len(payload)} bytes, {len(devices)} devices", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
