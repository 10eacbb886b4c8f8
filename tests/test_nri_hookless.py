#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`oci-rdma-hook nri` without OCI hooks ([containers] nri_hooks), the binary itself driven by
the fake runtime of test_nri_plugin.py: with nri_hooks = no, an annotated pod's container
(its pod's network namespace named by its path) gets no hook, and a read-only bind mount
of the /etc/nccl.conf copy the plugin wrote into its state directory, with the plan's
settings, its record there saying "served without hooks (nri_hooks = no ...)"; a
StateChange REMOVE_CONTAINER (runtimes before RemoveContainer's own call) removes that
directory. Under the default auto, the stage given as an OCI hook (nri_stage = hook; the
plugin that runs it at StartContainer gives no hook: test_nri_start.py): a container given hooks and removed when it had run
(state UNKNOWN with a creation time, as containerd 2.3 sends an exited one) changes
nothing; one given hooks and removed in state UNKNOWN with no creation time and no record
(what containerd's undo of a CreateContainer its validator rejected sends) makes the
plugin log the rejection once, naming reject_oci_hook_adjustment and nri_hooks, and the
next container is served without hooks, its record naming the rejection. A value other
than yes, no or auto is refused, naming the file, the line and the key. Root only (the
state directories are the host's /run/oci-rdma-hook); TAP output.

  test_nri_hookless.py HOOK SRCDIR
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_nri_plugin as t  # noqa: E402  (its fake runtime and messages)

from test_nri_plugin import check, f_bytes, f_varint, one  # noqa: E402

ANN = [('oci-rdma-hook/enable', 'true')]
NETNS = '/proc/self/ns/net'   # the worker's own: the host's network


def state_dir(cid):
    return os.path.join(t.RUN_DIR, t.RUN + cid)


def record(cid):
    try:
        with open(os.path.join(state_dir(cid), 'record.json')) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def hooks_of(a):
    return len(a['create_runtime']) + len(a['poststop'])


def create(rt, stream, cid):
    rt.request(stream, 'CreateContainer', t.create_req(cid, pod_ann=ANN, netns=NETNS))
    code, msg, payload = rt.response(stream)
    return code, msg, t.adjustment(payload)


def container(cid, state, created_at):
    """Container{id=1, pod_sandbox_id=2, state=4, created_at=14 (0: not sent)}"""
    return f_bytes(1, t.RUN + cid) + f_bytes(2, 'pod-' + t.RUN + cid) + f_varint(4, state) + \
        (f_varint(14, created_at) if created_at else b'')


def remove(rt, stream, cid, state, created_at=0, event_msg=False):
    pod = f_bytes(1, 'pod-' + t.RUN + cid)
    ctr = container(cid, state, created_at)
    if event_msg:   # StateChangeEvent{event=11 REMOVE_CONTAINER, pod=2, container=3}
        rt.request(stream, 'StateChange', f_varint(1, 11) + f_bytes(2, pod) + f_bytes(3, ctr))
    else:           # RemoveContainerRequest{pod=1, container=2}
        rt.request(stream, 'RemoveContainer', f_bytes(1, pod) + f_bytes(2, ctr))
    code, _, _ = rt.response(stream)
    return code


def mount_of(adj_raw):
    """The adjustment's mounts as (destination, type, source, options)."""
    return [(one(m, 1, b'').decode(), one(m, 2, b'').decode(), one(m, 3, b'').decode(),
             [o.decode() for o in t.many(m, 4)]) for m in t.many(adj_raw, 3)]


def plugin(tmp, node, conf_text):
    """The plugin started on a socket of tmp with conf_text as its node config, registered
    and configured: (its process, the fake runtime or None, Configure's status code); the
    ConfigureResponse's payload in CONFIGURED[0]."""
    conf = os.path.join(tmp, 'node-%d.conf' % len(os.listdir(tmp)))
    with open(conf, 'w') as f:
        f.write(conf_text)
    sock = os.path.join(tmp, 'nri-%d.sock' % len(os.listdir(tmp)))
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock)
    srv.listen(1)
    proc = t.start(sock, conf, node)
    try:
        rt, req = t.accept(srv, proc)
    except OSError:     # it did not connect: exited (its status), or hangs
        stop(proc)
        return proc, None, proc.returncode
    code, CONFIGURED[0] = t.register_and_configure(rt, req)
    return proc, rt, code


CONFIGURED = [b'']


def stop(proc):
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def hooks_no(rt, proc, want_hca):
    code, msg, a = create(rt, 3, 'no1')
    check('no: the container is served: devices, memlock, no hook',
          code == 0 and len(a['devices']) >= 9 and a['rlimits'] and hooks_of(a) == 0,
          (code, msg, a['devices'], a['create_runtime'], a['poststop']))
    copy = os.path.join(state_dir('no1'), 'nccl.conf')
    check('no: /etc/nccl.conf is the plugin\'s copy, bind-mounted read-only',
          ('/etc/nccl.conf', 'bind', copy, ['bind', 'ro', 'nosuid', 'nodev', 'noexec'])
          in mount_of(a['raw']), mount_of(a['raw']))
    try:
        with open(copy) as f:
            text = f.read()
    except OSError as e:
        text = str(e)
    check('no: the copy holds the plan\'s NCCL_IB_HCA (%s)' % want_hca,
          want_hca and want_hca[0] in text.splitlines(), text)
    r = record('no1')
    check('no: its record is the plugin\'s, served without hooks, nri_hooks = no',
          r.get('stage') == 'NRI plugin' and
          'served without hooks (nri_hooks = no in the node config)' in
          r.get('edited_by', ''), r)
    check('no: the record lists what was not done without hooks',
          any(w.startswith('not done without hooks: ') for w in r.get('warnings', [])),
          r.get('warnings'))
    code = remove(rt, 5, 'no1', 4, 1700000000000000000, event_msg=True)
    check('no: StateChange REMOVE_CONTAINER answered OK and the state directory removed',
          code == 0 and not os.path.exists(state_dir('no1')), code)
    stop(proc)


def sample(prefix):
    """A temporary directory with the sample RoCE node (seed001-roce) and a logs directory:
    (tmp, node, the base node config of activation = annotation, the plan's NCCL_IB_HCA
    line as a list, logs)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    node = os.path.join(tmp, 'node')
    subprocess.run(['python3', os.path.join(t.SRC, 'tests', 'mknode.py'),
                    os.path.join(t.SRC, 'tests', 'nodes', 'seed001-roce.json'), node],
                   check=True, stdout=subprocess.DEVNULL)
    base = '[node]\nmemlock = unlimited\n[containers]\nactivation = annotation\n'
    plan = subprocess.run([t.HOOK, '--sysroot', node, 'env'], capture_output=True, text=True)
    want_hca = [ln for ln in plan.stdout.splitlines() if ln.startswith('NCCL_IB_HCA=')]
    logs = os.path.join(tmp, 'logs')
    os.mkdir(logs)
    return tmp, node, base, want_hca, logs


def refused(tmp, node, key, value, why):
    """[containers] key = value refused, naming the file, the line and the key (exit 2)."""
    bad = os.path.join(tmp, 'bad-%s.conf' % key)
    with open(bad, 'w') as f:
        f.write('[containers]\n%s = %s\n' % (key, value))
    r = subprocess.run([t.HOOK, '--config', bad, '--sysroot', node, 'env'],
                       capture_output=True, text=True)
    check('%s = %s: refused, naming the file, the line and the key (exit 2)' % (key, value),
          r.returncode == 2 and
          "%s:2: [containers] key '%s': '%s' %s" % (bad, key, value, why) in r.stderr,
          (r.returncode, r.stderr))


def main():
    if os.geteuid() != 0:
        print('1..0 # SKIP root only (the state directories are /run/oci-rdma-hook\'s)')
        return 0
    tmp, node, base, want_hca, logs = sample('orh-nri-hookless-')
    try:
        refused(tmp, node, 'nri_hooks', 'maybe', 'is not yes, no or auto')
        # ---- nri_hooks = no ----
        proc, rt, code = plugin(logs, node, base + 'nri_hooks = no\n')
        check('no: the plugin takes nri_hooks = no: connects, is configured',
              rt is not None and code == 0, code)
        if rt is not None:
            hooks_no(rt, proc, want_hca)
        # ---- auto (the default), with the stage as an OCI hook ----
        proc, rt, code = plugin(logs, node, base + 'nri_stage = hook\n')
        check('auto: configured', rt is not None and code == 0, code)
        code, _, a = create(rt, 3, 'a0')
        check('auto: a container is given the nccl-conf hook', code == 0 and
              len(a['create_runtime']) == 1, a['create_runtime'])
        # containerd 2.3 sends an exited container's state as UNKNOWN, with its creation time
        code = remove(rt, 5, 'a0', 0, 1700000000000000000)
        code, _, a = create(rt, 7, 'a1')
        check('auto: one removed after it ran (state UNKNOWN, a creation time) changes '
              'nothing: the next has hooks',
              code == 0 and len(a['create_runtime']) == 1, a['create_runtime'])
        code = remove(rt, 9, 'a1', 0)
        check('auto: RemoveContainer of one never created (UNKNOWN, no creation time) is '
              'answered OK', code == 0, code)
        code, msg, a = create(rt, 11, 'a2')
        check('auto: the container after it is served without hooks, its copy mounted',
              code == 0 and hooks_of(a) == 0 and len(a['devices']) >= 9 and
              '/etc/nccl.conf' in [m[0] for m in mount_of(a['raw'])], (code, msg, a['mounts']))
        r = record('a2')
        check('auto: its record names the rejection',
              'served without hooks (the runtime rejected the OCI hooks given to container '
              + t.RUN + 'a1' in r.get('edited_by', '') and
              'reject_oci_hook_adjustment' in r.get('edited_by', ''), r.get('edited_by'))
        stop(proc)
        with open(os.path.join(logs, 'plugin.log'), errors='replace') as f:
            lines = [ln for ln in f if 'reject_oci_hook_adjustment' in ln and
                     'removed without ever being created' in ln]
        check('auto: one log line names the container, reject_oci_hook_adjustment and '
              'nri_hooks = no',
              len(lines) == 1 and t.RUN + 'a1' in lines[0] and 'nri_hooks = no' in lines[0] and
              'without hooks' in lines[0], lines)
        if t.failed:
            with open(os.path.join(logs, 'plugin.log'), errors='replace') as f:
                for ln in f.readlines()[-20:]:
                    print('# ' + ln.rstrip()[:400])
    finally:
        t.remove_state_dirs()
        shutil.rmtree(tmp, ignore_errors=True)
    print('1..%d' % t.n_test)
    return 1 if t.failed else 0


if __name__ == '__main__':
    sys.exit(main())
