#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`oci-rdma-hook nri`, the binary itself, driven by a fake runtime: this script listens on
a unix socket as containerd's NRI does, and speaks NRI's multiplexer, ttrpc and protobuf to
the plugin, written here by hand from the protocol's definitions (pkg/net/multiplex,
ttrpc's channel.go and request.proto, pkg/api/api.proto), apart from the plugin's C code.
It checks registration, Configure before the registration's reply, Synchronize with
`more`, CreateContainer answers field by field (an annotated pod's container on the sample
RoCE node, a device plugin's uverbs2 with its sysfs view, one that asked nothing, one
refused under on_error = fail, a decision that hangs given up in time while another is
answered; the node config says nri_stage = hook, so that the answers carry the nccl-conf
stage's hook entries), the node config read for each container, an unknown method, frames split and
frames of an unknown connection, reconnection after the runtime closes, a plugin started
by the runtime (NRI_PLUGIN_SOCKET on a socketpair), the binary started as a pre-installed
plugin (a link, no argument, its config in Configure's), pod text escaped in the log, SIGTERM,
and what a runtime can make the plugin hold: a CreateContainer of 1.9 million env entries
and a runtime that never reads its answers (the plugin's VmRSS from /proc, the lines of its
log, with margins well above what it takes). The sysfs view is made under
/run/oci-rdma-hook (root; otherwise that check is skipped), where the sweep removes it; so
is the node the plugin hands to a container's nccl-conf stage (node.json, bound to the
token in that stage's hook entry), in the state directory of each container id of this
run, which the script removes. TAP output.

  test_nri_plugin.py HOOK SRCDIR
"""
import json
import os
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HOOK, SRC = sys.argv[1], sys.argv[2]
# the container ids of this run (their state directories are made on the host's run dir)
RUN = 'orh-nri-test-%d-' % os.getpid()
RUN_DIR = '/run/oci-rdma-hook'
PLUGIN = 'nri.pkg.api.v1alpha1.Plugin'
RUNTIME = 'nri.pkg.api.v1alpha1.Runtime'
n_test = 0
failed = 0


def check(name, ok, detail=''):
    global n_test, failed
    n_test += 1
    if not ok:
        failed += 1
    print('%s %d - %s%s' % ('ok' if ok else 'not ok', n_test, name,
                            '' if ok else ' # ' + str(detail)[:300]), flush=True)


def n_test_skip(name):
    global n_test
    n_test += 1
    print('ok %d - %s # SKIP' % (n_test, name), flush=True)


# ---- protobuf, by hand ---------------------------------------------------------------
def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def f_varint(num, v):
    return varint(num << 3) + varint(v)


def f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def get_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """[(num, value)]: an int for a varint, bytes for a length-delimited field."""
    out, i = [], 0
    while i < len(b):
        key, i = get_varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = get_varint(b, i)
        elif wire == 2:
            n, i = get_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError('wire type %d' % wire)
        out.append((num, v))
    return out


def one(b, num, default=None):
    vals = [v for n, v in fields(b) if n == num]
    return vals[-1] if vals else default


def many(b, num):
    return [v for n, v in fields(b) if n == num]


def memlock_want():
    """What `memlock = unlimited` gives: unlimited where this process (as the plugin)
    could raise a hard limit (CAP_SYS_RESOURCE in the initial user namespace), else the
    hard limit it has."""
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    with open('/proc/self/status') as f:
        eff = int([ln.split()[1] for ln in f if ln.startswith('CapEff:')][0], 16)
    with open('/proc/self/uid_map') as f:
        init_ns = f.read().split() == ['0', '0', '4294967295']
    if (eff >> 24) & 1 and init_ns or hard == resource.RLIM_INFINITY:
        return (1 << 64) - 1
    return hard


def kv(k, v):
    return f_bytes(1, k) + f_bytes(2, v)


# ---- the runtime's side of the connection ---------------------------------------------
class Runtime:
    def __init__(self, conn):
        self.c = conn
        self.c.settimeout(10)
        self.buf = {1: b'', 2: b''}
        self.frames = []         # the length of each frame the plugin sent
        self.other = []          # ids of frames of another connection

    def send_frames(self, cid, data, split=None):
        parts = [data] if not split else [data[i:i + split] for i in range(0, len(data), split)]
        for p in parts:
            self.c.sendall(struct.pack('>II', cid, len(p)) + p)

    def send_msg(self, cid, stream, typ, payload, split=None, flags=0):
        self.send_frames(cid, struct.pack('>IIBB', len(payload), stream, typ, flags) + payload,
                         split)

    def request(self, stream, method, payload, split=None, service=PLUGIN):
        req = f_bytes(1, service) + f_bytes(2, method) + f_bytes(3, payload) + \
            f_varint(4, 2_000_000_000) + f_bytes(5, kv('x-meta', 'tolerated'))
        self.send_msg(1, stream, 1, req, split, flags=1)

    def recv_exact(self, n):
        b = b''
        while len(b) < n:
            c = self.c.recv(n - len(b))
            if not c:
                raise EOFError('the plugin closed the connection')
            b += c
        return b

    def read_msg(self, cid):
        """The next whole ttrpc message of connection cid: (stream, type, flags, payload)."""
        while True:
            b = self.buf[cid]
            if len(b) >= 10:
                ln, stream, typ, flags = struct.unpack('>IIBB', b[:10])
                if len(b) >= 10 + ln:
                    self.buf[cid] = b[10 + ln:]
                    return stream, typ, flags, b[10:10 + ln]
            hdr = self.recv_exact(8)
            fcid, ln = struct.unpack('>II', hdr)
            data = self.recv_exact(ln)
            self.frames.append(ln)
            if fcid in self.buf:
                self.buf[fcid] += data
            else:
                self.other.append(fcid)

    def response(self, want_stream):
        """The next response: (code, message, payload), and its stream when want_stream is
        None (any stream)."""
        stream, typ, _, payload = self.read_msg(1)
        assert typ == 2, 'type %d' % typ
        assert want_stream is None or stream == want_stream, \
            'stream %d, want %d' % (stream, want_stream)
        status = one(payload, 1, b'')
        res = one(status, 1, 0), (one(status, 2, b'') or b'').decode(), one(payload, 2, b'')
        return res if want_stream is not None else res + (stream,)


def start(sock, conf, node, extra=(), env=None):
    log = open(os.path.join(os.path.dirname(sock), 'plugin.log'), 'ab')
    return subprocess.Popen([HOOK, 'nri', '--socket', sock, '--config', conf, '--sysroot', node,
                             *extra], stdout=log, stderr=log, env=env)


def accept(srv, proc):
    srv.settimeout(10)
    c, _ = srv.accept()
    rt = Runtime(c)
    stream, typ, flags, payload = rt.read_msg(2)
    req = dict(service=one(payload, 1, b'').decode(), method=one(payload, 2, b'').decode(),
               payload=one(payload, 3, b''), stream=stream, type=typ)
    return rt, req


def register_and_configure(rt, req, timeout_ms=2000):
    # Configure before RegisterPlugin's reply: NRI allows it
    rt.request(1, 'Configure', f_bytes(2, 'fake-runtime') + f_bytes(3, 'v0') +
               f_varint(4, 5000) + f_varint(5, timeout_ms) + f_bytes(6, 'v0.12.0'))
    code, _, payload = rt.response(1)
    rt.send_msg(2, req['stream'], 2, f_bytes(1, b''))   # RegisterPlugin: Empty, OK
    return code, payload


# A CreateContainerRequest: pod annotations and a container
def create_req(cid, pod_ann=(), ctr_ann=(), env=('PATH=/bin',), uid=0, devices=(), netns=None,
               pod_name='trainer', mounts=()):
    cid = RUN + cid
    pod = f_bytes(1, 'pod-' + cid) + f_bytes(2, pod_name) + f_bytes(3, 'uid-1') + \
        f_bytes(4, 'default') + b''.join(f_bytes(6, kv(k, v)) for k, v in pod_ann)
    lin = b''.join(f_bytes(1, kv('ipc', '')) for _ in [0])
    if netns:
        lin += f_bytes(1, kv('network', netns))
    for path, major, minor in devices:
        lin += f_bytes(2, f_bytes(1, path) + f_bytes(2, 'c') + f_varint(3, major) +
                       f_varint(4, minor) + f_bytes(5, f_varint(1, 0o666)))
    lin += f_bytes(3, f_bytes(7, f_varint(1, 0) + f_bytes(5, 'rwm')))
    ctr = f_bytes(1, cid) + f_bytes(2, 'pod-' + cid) + f_bytes(3, 'main') + \
        b''.join(f_bytes(6, kv(k, v)) for k, v in ctr_ann) + f_bytes(7, 'sleep') + \
        b''.join(f_bytes(8, e) for e in env) + \
        f_bytes(9, f_bytes(1, '/etc/hosts') + f_bytes(2, 'bind') + f_bytes(3, '/x/hosts')) + \
        b''.join(f_bytes(9, f_bytes(1, d) + f_bytes(2, 'bind') + f_bytes(3, src))
                 for d, src in mounts) + \
        f_bytes(11, lin) + f_bytes(13, f_bytes(1, 'RLIMIT_NOFILE') + f_varint(2, 1024) +
                                   f_varint(3, 1024)) + \
        f_bytes(21, f_varint(1, uid) + f_varint(2, uid) + f_bytes(3, varint(5) + varint(6)))
    return f_bytes(1, pod) + f_bytes(2, ctr)


def adjustment(payload):
    adj = one(payload, 1, b'')
    lin = one(adj, 6, b'')
    devs = [dict(path=one(d, 1, b'').decode(), type=one(d, 2, b'').decode(),
                 major=one(d, 3, 0), minor=one(d, 4, 0)) for d in many(lin, 1)]
    hooks = one(adj, 5, b'')
    return dict(
        raw=adj,
        annotations=[(one(e, 1, b'').decode(), one(e, 2, b'').decode()) for e in many(adj, 2)],
        devices=devs,
        rules=many(one(lin, 2, b''), 7),
        rlimits=[(one(r, 1, b'').decode(), one(r, 2, 0), one(r, 3, 0)) for r in many(adj, 7)],
        env=[(one(e, 1, b'').decode(), one(e, 2, b'').decode()) for e in many(adj, 4)],
        mounts=[one(m, 1, b'').decode() for m in many(adj, 3)],
        create_runtime=[[a.decode() for a in many(h, 2)] for h in many(hooks, 2)],
        create_runtime_paths=[one(h, 1, b'').decode() for h in many(hooks, 2)],
        create_runtime_env=[[e.decode() for e in many(h, 3)] for h in many(hooks, 2)],
        poststop=[[a.decode() for a in many(h, 2)] for h in many(hooks, 6)],
    )


def rss_mib(pid):
    with open('/proc/%d/status' % pid) as f:
        return [int(ln.split()[1]) for ln in f if ln.startswith('VmRSS:')][0] / 1024


def log_lines(tmp):
    with open(os.path.join(tmp, 'plugin.log'), 'rb') as f:
        return f.read().count(b'\n')


def frame_req(stream, method, payload=b'', raw=None):
    """A request on connection 1, in one frame; raw: a ttrpc message of those bytes."""
    req = raw if raw is not None else f_bytes(1, PLUGIN) + f_bytes(2, method) + \
        f_bytes(3, payload)
    msg = struct.pack('>IIBB', len(req), stream, 1, 0) + req
    return struct.pack('>II', 1, len(msg)) + msg


def exchange(c, pending, until, deadline, pid, peak, want=0):
    """Send pending and read, until the response of stream `until` and `want` responses in
    all came, or deadline: the responses read, {stream: (code, payload)} in the order they
    came (those of streams from 100001 on) and their count in got[0]; peak[0]: the plugin's
    largest RSS seen."""
    buf, s1, at, got = bytearray(), bytearray(), 0, {0: 0}
    while time.monotonic() < deadline and (until not in got or got[0] < want):
        r, w, _ = select.select([c], [c] if pending else [], [], 0.05)
        peak[0] = max(peak[0], rss_mib(pid))
        if w:
            pending = pending[c.send(pending):]
        if not r:
            continue
        data = c.recv(1 << 20)
        if not data:
            break
        buf += data
        while len(buf) >= 8 and len(buf) >= 8 + struct.unpack('>II', buf[:8])[1]:
            cid, ln = struct.unpack('>II', buf[:8])
            if cid == 1:
                s1 += buf[8:8 + ln]
            del buf[:8 + ln]
        while len(s1) - at >= 10:
            ln, stream = struct.unpack('>II', s1[at:at + 8])
            if len(s1) - at < 10 + ln:
                break
            got[0] += 1
            if stream >= 100001:   # the checks' own; the flood's are below
                payload = bytes(s1[at + 10:at + 10 + ln])
                got[stream] = (one(one(payload, 1, b''), 1, 0), one(payload, 2, b''))
            at += 10 + ln
        del s1[:at]
        at = 0
    return got


def bounded(tmp, srv, sock, conf, node):
    """What a runtime can make the plugin hold: a runtime that never reads the answers while
    it keeps sending requests, and a CreateContainer of 1.9 million env entries."""
    env = dict(os.environ)
    if b'__asan_init' in open(HOOK, 'rb').read():   # freed memory kept aside would count
        env['ASAN_OPTIONS'] = env.get('ASAN_OPTIONS', '') + ':quarantine_size_mb=0'
    proc = start(sock, conf, node, env=env)
    try:
        rt, req = accept(srv, proc)
        register_and_configure(rt, req)
        c = rt.c
        c.setblocking(False)
        time.sleep(0.5)
        base = rss_mib(proc.pid)
        # 1.9 million empty env entries: 3.8 MB, within ttrpc's 4 MiB
        ctr = f_bytes(1, RUN + 'huge') + f_bytes(3, 'main') + b'\x42\x00' * 1900000
        big = f_bytes(1, f_bytes(1, 'pod') + f_bytes(2, 'p') + f_bytes(4, 'ns')) + f_bytes(2, ctr)
        peak, t = [base], time.monotonic()
        got = exchange(c, frame_req(100003, 'CreateContainer', big) +
                       frame_req(100005, 'Synchronize'), 100005, t + 10, proc.pid, peak)
        took = time.monotonic() - t
        check('a CreateContainer of 1.9 million env entries: a request after it is answered '
              'before it', [k for k in got if k][:1] == [100005], list(got))
        got.update(exchange(c, b'', 100003, time.monotonic() + 10, proc.pid, peak))
        time.sleep(0.5)
        after = rss_mib(proc.pid)
        print('# 3.8 MB CreateContainer: the next request answered in %.2f s; RSS %.1f -> %.1f '
              'MiB at most, %.1f MiB after' % (took, base, peak[0], after))
        check('and it is answered: OK, nothing given', got.get(100003) == (0, b''), got)
        with open(os.path.join(tmp, 'plugin.log'), 'rb') as f:
            log = f.read().decode(errors='replace')
        check('not read, the log says why: the field and the bound',
              'CreateContainerRequest: container field 8 (env): more than 65536 fields' in log,
              log[-500:])
        check('the plugin\'s RSS grows less than 32 MiB while it is read, less than 8 MiB '
              'after', peak[0] - base < 32 and after - base < 8, (base, peak[0], after))
        time.sleep(0.3)
        base, lines0 = rss_mib(proc.pid), log_lines(tmp)
        # answered at once, each with a line (a malformed request, Configure), or in a
        # worker (a CreateContainer with no container id), or without a line
        batch = b''.join(frame_req(2 * i + 1, 'NoSuchMethod') +
                         frame_req(2 * i + 3, 'Synchronize') +
                         frame_req(2 * i + 5, '', raw=b'\xff') +
                         frame_req(2 * i + 7, 'Configure', f_varint(5, 2000))
                         for i in range(50))
        batch += frame_req(401, 'CreateContainer', f_bytes(1, f_bytes(1, 'pod')))
        per = 4 * 50 + 1   # requests in a batch, each answered once
        pending, sent, peak, end = b'', 0, [base], time.monotonic() + 4
        while time.monotonic() < end:
            if len(pending) < len(batch):
                pending += batch
            _, w, _ = select.select([], [c], [], 0.05)
            peak[0] = max(peak[0], rss_mib(proc.pid))
            if w:
                n = c.send(pending)
                pending, sent = pending[n:], sent + n
        lines = log_lines(tmp) - lines0
        print('# a runtime that never reads: %.1f MB sent in 4 s, RSS %.1f -> %.1f MiB at most, '
              '%d log lines' % (sent / 1e6, base, peak[0], lines))
        check('a runtime that never reads its answers: the plugin\'s RSS grows less than 24 MiB',
              peak[0] - base < 24, (base, peak[0]))
        check('and it logs fewer than 250 lines in those 4 s', lines < 250, lines)
        # whole batches, all sent by now; a worker's answer may come after the last one's
        want = (sent + len(pending)) // len(batch) * per + 1
        got = exchange(c, pending + frame_req(100007, 'Synchronize'), 100007,
                       time.monotonic() + 30, proc.pid, [0], want)
        check('once the runtime reads again, every request is answered, the last one too',
              100007 in got and got[0] == want, (got[0], want))
        proc.send_signal(signal.SIGTERM)
        check('SIGTERM still ends it with status 0', proc.wait(5) == 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def preinstalled(tmp, node):
    """Started by the runtime from its plugin_path: a link of any name, no argument, only
    NRI_PLUGIN_SOCKET, NRI_PLUGIN_NAME and NRI_PLUGIN_IDX in the environment, and the node
    config in Configure's config (the only place naming the sample node: [node] sysroot)."""
    link = os.path.join(tmp, '10-rdma')
    os.symlink(os.path.abspath(HOOK), link)
    for text, want in (('[node]\nsysroot = %s\nmemlock = unlimited\n[containers]\n'
                        'activation = annotation\nnri_stage = hook\n' % node, None),
                       ('[node]\nbogus = 1\n', "Configure's config:2: [node] key 'bogus'")):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(NRI_PLUGIN_SOCKET=str(theirs.fileno()), NRI_PLUGIN_NAME='rdma',
                   NRI_PLUGIN_IDX='10')
        with open(os.path.join(tmp, 'plugin.log'), 'ab') as log:
            proc = subprocess.Popen([link], env=env, pass_fds=[theirs.fileno()], stdout=log,
                                    stderr=log)
        theirs.close()
        try:
            rt = Runtime(ours)
            stream, _, _, payload = rt.read_msg(2)
            p = one(payload, 3, b'')
            rt.request(1, 'Configure', f_bytes(1, text) + f_bytes(2, 'fake-runtime') +
                       f_varint(5, 2000))
            code, msg, _ = rt.response(1)
            rt.send_msg(2, stream, 2, f_bytes(1, b''))
            if want:
                check('pre-installed: a Configure config the node config\'s parser refuses is '
                      'refused, naming it, its line and key', code != 0 and want in msg,
                      (code, msg))
                continue
            check('pre-installed: with no argument it registers with the name and index of '
                  'its environment', one(payload, 2) == b'RegisterPlugin' and
                  one(p, 1) == b'rdma' and one(p, 2) == b'10', fields(p))
            check('pre-installed: Configure with a config is answered OK', code == 0, msg)
            rt.request(3, 'CreateContainer',
                       create_req('c13', pod_ann=[('oci-rdma-hook/enable', 'true')]))
            code, msg, payload = rt.response(3)
            a = adjustment(payload)
            check('pre-installed: it serves from the node Configure\'s config names (9 devices)',
                  code == 0 and len(a['devices']) == 9, (code, msg, a['devices']))
            if os.geteuid() == 0:
                copy = os.path.join(RUN_DIR, '.nri-10-rdma.conf')
                cfgs = {h[h.index('--config') + 1] for h in a['create_runtime']
                        if '--config' in h}
                with open(copy) as f:
                    check('pre-installed: its hook entry\'s --config is the copy of Configure\'s '
                          'config it wrote', cfgs == {copy} and f.read() == text, cfgs)
        finally:
            ours.close()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    check('pre-installed: it ends with status 0 when the runtime closes the connection',
          proc.returncode == 0, proc.returncode)
    r = subprocess.run([link], env={}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check('with no argument and no runtime\'s environment it prints its usage (status 2)',
          r.returncode == 2 and b'Usage' in r.stderr, (r.returncode, r.stderr[-300:]))
    try:
        os.unlink(os.path.join(RUN_DIR, '.nri-10-rdma.conf'))
    except OSError:
        pass


def remove_state_dirs():
    """The state directories of this run's containers (their node.json)."""
    try:
        names = os.listdir(RUN_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith(RUN):
            shutil.rmtree(os.path.join(RUN_DIR, name), ignore_errors=True)


def main():
    tmp = tempfile.mkdtemp(prefix='orh-nri-')
    node, nordma = os.path.join(tmp, 'node'), os.path.join(tmp, 'nordma')
    for name, dst in (('seed001-roce', node), ('nordma', nordma)):
        subprocess.run(['python3', os.path.join(SRC, 'tests', 'mknode.py'),
                        os.path.join(SRC, 'tests', 'nodes', name + '.json'), dst],
                       check=True, stdout=subprocess.DEVNULL)
    conf = os.path.join(tmp, 'node.conf')
    with open(conf, 'w') as f:
        # the stage as an OCI hook: the answers' hook entries are checked here (the stage
        # the plugin runs at StartContainer, the default: test_nri_start.py)
        f.write('[node]\nmemlock = unlimited\n[containers]\nactivation = annotation\n'
                'nri_stage = hook\n')
    strict = os.path.join(tmp, 'strict.conf')
    with open(strict, 'w') as f:
        f.write('[containers]\nactivation = annotation\non_error = fail\n')
    sock = os.path.join(tmp, 'nri.sock')
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock)
    srv.listen(4)
    t0 = time.monotonic()

    proc = start(sock, conf, node)
    try:
        rt, req = accept(srv, proc)
        check('the plugin registers first, on the runtime connection (2), as a request',
              req['type'] == 1 and req['service'] == RUNTIME and
              req['method'] == 'RegisterPlugin', req)
        check('its stream id is odd', req['stream'] % 2 == 1, req['stream'])
        p = req['payload']
        check('RegisterPlugin names the plugin and its index',
              one(p, 1) == b'oci-rdma-hook' and one(p, 2) == b'50', fields(p))
        check('RegisterPlugin says the NRI version', (one(p, 3) or b'').startswith(b'v0.'),
              fields(p))
        code, payload = register_and_configure(rt, req)
        check('Configure, before the registration is answered, is answered OK', code == 0, code)
        check('the plugin subscribes to CreateContainer, StartContainer and RemoveContainer '
              '(events 0x428)', one(payload, 2) == 0x428, fields(payload))

        rt.request(3, 'Synchronize', f_bytes(1, f_bytes(1, 'pod-a')) + f_varint(3, 1))
        code, _, payload = rt.response(3)
        check('Synchronize with more=true: OK, more echoed',
              code == 0 and one(payload, 2) == 1 and one(payload, 1) is None, fields(payload))
        rt.request(5, 'Synchronize', f_bytes(2, f_bytes(1, 'ctr-a')))
        code, _, payload = rt.response(5)
        check('Synchronize with more=false: OK, no more, no updates',
              code == 0 and payload == b'', payload)

        # an annotated pod on the RoCE node; the request sent in 100-byte frames
        rt.request(7, 'CreateContainer',
                   create_req('c1', pod_ann=[('oci-rdma-hook/enable', 'true')]), split=100)
        code, msg, payload = rt.response(7)
        a = adjustment(payload)
        check('an annotated pod\'s container: OK with an adjustment', code == 0 and a['raw'],
              (code, msg))
        uverbs = [d for d in a['devices'] if d['path'].startswith('/dev/infiniband/uverbs')]
        check('it is given the node\'s 8 uverbs devices (231:193..200)',
              sorted((d['major'], d['minor']) for d in uverbs) ==
              [(231, m) for m in range(193, 201)] and all(d['type'] == 'c' for d in uverbs),
              a['devices'])
        check('and rdma_cm (10:58)',
              any(d['path'] == '/dev/infiniband/rdma_cm' and (d['major'], d['minor']) ==
                  (10, 58) for d in a['devices']), a['devices'])
        check('no separate cgroup rule for a device added (the runtime adds those)',
              a['rules'] == [], a['rules'])
        want = memlock_want()
        check('RLIMIT_MEMLOCK unlimited, or what a runtime with our privileges can set',
              a['rlimits'] == [('RLIMIT_MEMLOCK', want, want)], (a['rlimits'], want))
        check('the nccl-conf createRuntime hook of this binary, with --config and --sysroot',
              len(a['create_runtime']) == 1 and
              a['create_runtime'][0] == ['oci-rdma-hook', '--config', conf, '--sysroot', node,
                                         'nccl-conf'] and
              os.path.realpath(a['create_runtime_paths'][0]) == os.path.realpath(HOOK),
              (a['create_runtime'], a['create_runtime_paths']))
        check('and the poststop hook',
              len(a['poststop']) == 1 and a['poststop'][0][-1] == 'poststop', a['poststop'])
        env = a['create_runtime_env'][0] if a['create_runtime_env'] else []
        check('the nccl-conf hook carries a token in its environment',
              len(env) == 1 and env[0].startswith('OCI_RDMA_HOOK_HANDOFF=') and
              len(env[0].split('=', 1)[1]) == 32, env)
        if os.geteuid() == 0:
            try:
                # the snapshot's object on its first line, the node's lines after it
                with open(os.path.join(RUN_DIR, RUN + 'c1', 'node.json')) as f:
                    snap = json.loads(f.readline())
                    snap['node_lines'] = f.read()
            except (OSError, ValueError) as e:
                snap = {'error': repr(e)}
            check("and the node it read is in the container's state directory, bound to that "
                  'token', env and snap.get('token') == env[0].split('=', 1)[1] and
                  snap.get('sysroot') == node and
                  snap.get('node_lines', '').startswith('orh-node\t'),
                  {k: snap.get(k) for k in ('token', 'sysroot', 'error')})
        else:
            n_test_skip('the node handed over is written under /run/oci-rdma-hook: root only')
        check('the pod\'s request goes into the container\'s annotations (the stages read them)',
              a['annotations'] == [('oci-rdma-hook/enable', 'true')], a['annotations'])
        check('no NCCL_ setting in the environment (they go to /etc/nccl.conf)',
              not any(k.startswith('NCCL_') for k, _ in a['env']), a['env'])
        big = max(rt.frames)
        check('every frame of the plugin is at most 4096 bytes', big <= 4096, big)

        rt.request(9, 'CreateContainer', create_req('c2', ctr_ann=[('io.example', 'x')],
                                                    pod_name='evil\x1b[2J\nname'))
        code, msg, payload = rt.response(9)
        check('a container that asked nothing: OK and an empty response',
              code == 0 and payload == b'', (code, msg, payload))

        rt.request(11, 'CreateContainer',
                   create_req('c3', ctr_ann=[('oci-rdma-hook/enable', 'false')],
                              pod_ann=[('oci-rdma-hook/enable', 'true')]))
        code, msg, payload = rt.response(11)
        check('the container\'s own annotation wins over the pod\'s: opted out, empty',
              code == 0 and payload == b'', (code, msg, payload))

        # a device plugin gave it uverbs2, its /sys shows the node's: the sysfs view of that
        # device alone, mounted over the classes (made under /run/oci-rdma-hook: root)
        rt.request(21, 'CreateContainer',
                   create_req('c12', pod_ann=[('oci-rdma-hook/enable', 'true')],
                              devices=[('/dev/infiniband/uverbs2', 231, 194)],
                              mounts=[('/sys', os.path.join(node, 'sys'))]))
        code, msg, payload = rt.response(21)
        a = adjustment(payload)
        check('a device plugin\'s uverbs2: not given again, no other uverbs, rdma_cm given',
              code == 0 and [d['path'] for d in a['devices']] == ['/dev/infiniband/rdma_cm'],
              (code, msg, a['devices']))
        check('and the allow rule of uverbs2, which the request did not have',
              len(a['rules']) == 1, a['rules'])
        views = [(one(m, 1, b'').decode(), one(m, 3, b'').decode(), many(m, 4))
                 for m in many(a['raw'], 3)]
        if os.geteuid() == 0:
            check('the sysfs view of uverbs2 mounted read-only over /sys/class/infiniband*',
                  sorted(d for d, _, _ in views) ==
                  ['/sys/class/infiniband', '/sys/class/infiniband_mad',
                   '/sys/class/infiniband_verbs'] and
                  all(src.startswith('/run/oci-rdma-hook/') and b'ro' in opts
                      for _, src, opts in views), views)
        else:
            n_test_skip('the sysfs view is made under /run/oci-rdma-hook: root only')

        # the node config is read again for every container: a change applies to the next
        # one, a broken file gives it nothing, and the plugin goes on
        with open(conf, 'w') as f:
            f.write('[node]\nmemlock = unlimited\n[containers]\nactivation = always\n')
        rt.request(17, 'CreateContainer', create_req('c10'))
        code, msg, payload = rt.response(17)
        check('activation = always written into the config: the next container that asked '
              'nothing is served', code == 0 and len(adjustment(payload)['devices']) >= 9,
              (code, msg))
        with open(conf, 'w') as f:
            f.write('[containers]\nactivation = sometimes\n')
        rt.request(19, 'CreateContainer',
                   create_req('c11', pod_ann=[('oci-rdma-hook/enable', 'true')]))
        code, msg, payload = rt.response(19)
        check('a config broken meanwhile: the container that asked gets nothing, OK',
              code == 0 and payload == b'', (code, msg, payload))
        with open(conf, 'w') as f:
            f.write('[node]\nmemlock = unlimited\n[containers]\nactivation = annotation\n')

        # a frame of a connection never opened is dropped; then a whole request in one frame
        rt.send_frames(7, b'\x00' * 20)
        rt.request(13, 'NoSuchMethod', b'')
        code, msg, _ = rt.response(13)
        check('an unknown method: UNIMPLEMENTED (12)', code == 12, (code, msg))
        rt.request(15, 'StopContainer', b'')
        code, msg, payload = rt.response(15)
        check('an event not subscribed to: an empty OK answer', code == 0 and payload == b'',
              (code, msg))

        # the runtime goes away: the plugin comes back and registers again
        rt.c.close()
        t = time.monotonic()
        rt, req = accept(srv, proc)
        check('after the connection is lost it connects again within 2 s and registers',
              req['method'] == 'RegisterPlugin' and time.monotonic() - t < 2.0,
              time.monotonic() - t)
        code, payload = register_and_configure(rt, req)
        check('and is configured again', code == 0 and one(payload, 2) == 0x428, code)
        rt.request(3, 'CreateContainer',
                   create_req('c4', pod_ann=[('oci-rdma-hook/enable', 'true')]))
        code, msg, payload = rt.response(3)
        check('and serves again', code == 0 and len(adjustment(payload)['devices']) >= 9,
              (code, msg))

        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(5)
        except subprocess.TimeoutExpired:
            rc = None
        check('SIGTERM ends the plugin with status 0', rc == 0, rc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # on_error = fail: a container that asked on a node without RDMA is refused; one that
    # did not ask starts
    proc = start(sock, strict, nordma, ['--name', 'rdma', '--idx', '07'])
    try:
        rt, req = accept(srv, proc)
        check('--name and --idx reach RegisterPlugin',
              one(req['payload'], 1) == b'rdma' and one(req['payload'], 2) == b'07',
              fields(req['payload']))
        register_and_configure(rt, req, timeout_ms=400)
        rt.request(3, 'CreateContainer',
                   create_req('c5', pod_ann=[('oci-rdma-hook/enable', 'true')]))
        code, msg, payload = rt.response(3)
        check('on_error = fail, asked, nothing to give: an error answer with the reason',
              code != 0 and 'oci-rdma-hook' in msg and len(msg) > 20, (code, msg))
        rt.request(5, 'CreateContainer', create_req('c6'))
        code, msg, payload = rt.response(5)
        check('on_error = fail, did not ask: OK and empty', code == 0 and payload == b'',
              (code, msg))
        # a decision that hangs (the network namespace's path is a FIFO nobody writes: its
        # open blocks) is given up at 3/4 of the request timeout, here 400 ms; another
        # container is answered meanwhile
        fifo = os.path.join(tmp, 'netns-fifo')
        os.mkfifo(fifo)
        t = time.monotonic()
        rt.request(7, 'CreateContainer',
                   create_req('c7', pod_ann=[('oci-rdma-hook/enable', 'true')], netns=fifo))
        rt.request(9, 'CreateContainer', create_req('c8'))
        first = rt.response(None)
        second = rt.response(None)
        took = time.monotonic() - t
        check('a container is answered while another one\'s decision hangs',
              first[3] == 9 and second[3] == 7, (first[3], second[3]))
        check('the hung decision is given up within the request timeout: refused, as it '
              'asked under on_error = fail',
              second[0] != 0 and 'in time' in second[1] and 0.25 < took < 2.0, (second, took))
        # the killed child is reaped once it has ended (within a second of the kill); the
        # plugin's resident worker (killed if it held the hung decision) may be started
        # again meanwhile: at most that one child, live
        end = time.monotonic() + 3
        while True:
            kids = subprocess.run(['pgrep', '-P', str(proc.pid)],
                                  stdout=subprocess.PIPE).stdout.split()
            states = []
            for k in kids:
                try:
                    with open('/proc/%s/stat' % k.decode()) as f:
                        st = f.read().rsplit(')', 1)[1].split()[0]
                    with open('/proc/%s/wchan' % k.decode()) as f:
                        states.append(st + ':' + f.read())
                except OSError:
                    states.append('gone')
            # not a zombie, not the hung decision (waiting for the FIFO's writer)
            fine = len(kids) <= 1 and all(x == 'gone' or (x[0] in 'SR' and
                                                          'partner' not in x)
                                          for x in states)
            if fine or time.monotonic() > end:
                break
            time.sleep(0.05)
        check('no child is left behind, not even a zombie: at most the resident worker, '
              'live', fine, list(zip(kids, states)))
        proc.send_signal(signal.SIGINT)
        check('SIGINT ends it with status 0', proc.wait(5) == 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # started by the runtime: the connection in NRI_PLUGIN_SOCKET (one end of a
    # socketpair), its name and index in NRI_PLUGIN_NAME and NRI_PLUGIN_IDX; when the
    # runtime closes it, the plugin ends
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ, NRI_PLUGIN_SOCKET=str(theirs.fileno()), NRI_PLUGIN_NAME='rdma',
               NRI_PLUGIN_IDX='33')
    with open(os.path.join(tmp, 'plugin.log'), 'ab') as log:
        proc = subprocess.Popen([HOOK, 'nri', '--socket', '/nonexistent', '--config', conf,
                                 '--sysroot', node], env=env, pass_fds=[theirs.fileno()],
                                stdout=log, stderr=log)
    theirs.close()
    try:
        rt = Runtime(ours)
        stream, typ, _, payload = rt.read_msg(2)
        p = one(payload, 3, b'')
        check('started by the runtime: it registers on the connection it was handed, with the '
              'name and index it was given', one(payload, 2) == b'RegisterPlugin' and
              one(p, 1) == b'rdma' and one(p, 2) == b'33', fields(p))
        code, _ = register_and_configure(rt, dict(stream=stream))
        rt.request(3, 'CreateContainer',
                   create_req('c9', pod_ann=[('oci-rdma-hook/enable', 'true')]))
        code, msg, payload = rt.response(3)
        check('and serves', code == 0 and len(adjustment(payload)['devices']) >= 9, (code, msg))
        ours.close()
        try:
            rc = proc.wait(5)
        except subprocess.TimeoutExpired:
            rc = None
        check('and ends with status 0 when the runtime closes that connection', rc == 0, rc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    preinstalled(tmp, node)
    bounded(tmp, srv, sock, conf, node)

    # no runtime yet: it keeps trying, and SIGTERM still ends it at once
    srv.close()
    os.unlink(sock)
    proc = start(sock, conf, node)
    time.sleep(0.3)
    check('with no runtime listening it keeps trying', proc.poll() is None)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(3)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    check('and SIGTERM ends it with status 0 while it waits', rc == 0, rc)
    with open(os.path.join(tmp, 'plugin.log'), 'rb') as f:
        log = f.read().decode(errors='replace')
    check('the pod\'s text is escaped in the log (no control character reaches it)',
          'evil\\x1b[2J\\x0aname' in log and '\x1b' not in log, log[-2000:])
    check('it logged one line for each container served',
          all(('container %s%s ' % (RUN, c)) in log for c in ('c1', 'c2', 'c3', 'c4', 'c5', 'c6',
                                                              'c7', 'c8', 'c9', 'c10', 'c11',
                                                              'c12')),
          log)
    print('# %.1f s' % (time.monotonic() - t0))
    subprocess.run(['rm', '-rf', tmp])
    remove_state_dirs()
    print('1..%d' % n_test)
    return 1 if failed else 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except Exception as e:  # the plugin did not connect, or broke the protocol
        check('the exchange with the plugin went on to its end', False, repr(e))
        remove_state_dirs()
        print('1..%d' % n_test)
        sys.exit(1)
