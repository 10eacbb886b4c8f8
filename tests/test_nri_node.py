#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The node `oci-rdma-hook nri` keeps: read when the plugin starts, restored by each
CreateContainer decision that reads the node as it was read, read again when it is old,
on SIGHUP, or when the kernel says the node changed; and the resident worker that makes
those decisions one after another. The binary is driven by the fake
runtime of test_nri_plugin.py. Checked:
  - a served container's decision restored the node kept: its node.json (the node handed
    to its nccl-conf stage) says how old the reading was, and the record of the stage the
    plugin runs at StartContainer says it too;
  - a fake tree (--sysroot) changed under a running plugin: the next container still gets
    the node kept (a fake tree has no kernel to say it changed);
  - SIGHUP: the plugin says it reads the node again, and the next container gets the tree
    as it is now;
  - a --sysroot link re-pointed to another tree: the next decision reads that tree;
  - a node config changed after the node was read, its reading options different
    (roce_version = 1): the decision reads the node itself, and says no age;
  - the resident worker: three CreateContainer answered by the one child the plugin keeps;
    killed, the next container is answered by a worker of its own and a new resident is
    started; SIGHUP replaces it (it held the node read before); killed while it holds a
    request, a worker of its own decides that request again;
  - on "/" (no --sysroot), in a network and mount namespace of its own where /sys holds
    the sample node's tree and the namespace's real net devices (veths named as the node's
    RDMA ports' net devices, a bridge, another veth pair): a container is served from the
    node kept; an address or link change of an unrelated device does not make the plugin
    read the node again; an address of an RDMA port's net device, its link joining a
    bridge, and an address of that bridge (a device on top of it: its lower_ link) each
    do, once the node was read again after the one before.
Root only (the state directories are the host's /run/oci-rdma-hook; the network namespace
needs CAP_SYS_ADMIN); TAP output.

  test_nri_node.py HOOK SRCDIR
"""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_nri_plugin as t  # noqa: E402  (its fake runtime and messages)
import test_nri_hookless as hl  # noqa: E402  (its plugin, state directories)
import test_nri_start as st  # noqa: E402  (its created containers)

from test_nri_plugin import check  # noqa: E402

ANN = [('oci-rdma-hook/enable', 'true')]
KEPT_MAX_MS = 30000


def node_json(cid):
    """The handed-over node's first line (its JSON object without the node's text)."""
    try:
        with open(os.path.join(hl.state_dir(cid), 'node.json')) as f:
            import json
            return json.loads(f.readline())
    except (OSError, ValueError):
        return {}


def log_lines(logs, text):
    try:
        with open(os.path.join(logs, 'plugin.log'), errors='replace') as f:
            return sum(1 for ln in f if text in ln)
    except OSError:
        return 0


def wait_lines(logs, text, n, secs):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if log_lines(logs, text) >= n:
            return True
        time.sleep(0.05)
    return log_lines(logs, text) >= n


def listening(tmp, name, conf_text):
    """A node config NAME.conf holding conf_text, and the fake runtime's socket NAME.sock,
    listening: (the config's path, the socket's, the listening socket)."""
    conf = os.path.join(tmp, name + '.conf')
    with open(conf, 'w') as f:
        f.write(conf_text)
    sock = os.path.join(tmp, name + '.sock')
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock)
    srv.listen(1)
    return conf, sock, srv


def kept(tmp, node, base, logs):
    proc, rt, code = hl.plugin(logs, node, base)
    check('kept: the plugin connects and is configured', rt is not None and code == 0, code)
    if rt is None:
        return
    code, msg, a1 = st.create(rt, 3, 'k1')
    n1 = node_json('k1')
    age = n1.get('node_age_ms')
    check('kept: CreateContainer restored the node the plugin read at its start (node.json '
          'says its age: %s ms)' % age,
          code == 0 and len(a1['devices']) >= 9 and isinstance(age, int) and
          0 <= age < KEPT_MAX_MS, (code, msg, len(a1['devices']), n1))

    # the stage the plugin runs at StartContainer: its record says the age too
    root = st.image(tmp, 'img-k1')
    p = st.created(root, 'k1')
    code, msg = st.start(rt, 5, 'k1', p.pid)
    r = hl.record('k1')
    check('kept: the stage\'s record says the node was the plugin\'s, kept %s ms' %
          r.get('node_age_ms'),
          code == 0 and 'by the NRI plugin' in str(r.get('node_read')) and
          isinstance(age, int) and r.get('node_age_ms') == age,
          (code, msg, r.get('node_read'), r.get('node_age_ms')))
    p.kill()
    p.wait()

    # the fake tree changes under the running plugin: one device gone
    ib = os.path.join(node, 'sys', 'class', 'infiniband')
    gone = sorted(os.listdir(ib))[-1]
    live = subprocess.run([t.HOOK, '--sysroot', node, 'env'], capture_output=True, text=True)
    path = os.path.join(ib, gone)
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
    else:
        shutil.rmtree(path)
    live2 = subprocess.run([t.HOOK, '--sysroot', node, 'env'], capture_output=True, text=True)
    check('kept: the tree changed (%s removed): read as it is now, the plan differs' % gone,
          live.stdout != live2.stdout, (live.stdout[-200:], live2.stdout[-200:]))
    code, msg, a2 = st.create(rt, 7, 'k2')
    check('kept: the next container gets the node kept (a fake tree is not watched): the '
          'same %d devices' % len(a1['devices']),
          code == 0 and a2['devices'] == a1['devices'] and
          isinstance(node_json('k2').get('node_age_ms'), int), (len(a2['devices']),
                                                                 node_json('k2')))

    # SIGHUP: read again
    proc.send_signal(1)
    check('SIGHUP: the plugin says it reads the node again',
          wait_lines(logs, 'SIGHUP: reading the node again', 1, 5), '')
    time.sleep(0.2)
    code, msg, a3 = st.create(rt, 9, 'k3')
    age3 = node_json('k3').get('node_age_ms')
    check('SIGHUP: the next container gets the tree as it is now: one device fewer (%d), '
          'from the node read again (%s ms old)' % (len(a3['devices']), age3),
          code == 0 and len(a3['devices']) == len(a1['devices']) - 1 and
          isinstance(age3, int), (len(a3['devices']), node_json('k3')))
    hl.stop(proc)

    # a sysroot that is a link, re-pointed to another tree: the next decision reads it
    link = os.path.join(tmp, 'node-link')
    other = os.path.join(tmp, 'node-ib')
    subprocess.run(['python3', os.path.join(t.SRC, 'tests', 'mknode.py'),
                    os.path.join(t.SRC, 'tests', 'nodes', 'ib.json'), other],
                   check=True, stdout=subprocess.DEVNULL)
    os.symlink(node, link)
    proc, rt, code = hl.plugin(logs, link, base)
    code, msg, a6 = st.create(rt, 3, 'k6')
    os.unlink(link)
    os.symlink(other, link)
    code2, msg2, a7 = st.create(rt, 5, 'k7')
    check('re-pointed: a --sysroot link re-pointed to another tree: the next decision reads '
          'it (no age in node.json), its devices the other tree\'s (%d, then %d)' %
          (len(a6['devices']), len(a7['devices'])),
          code == 0 and code2 == 0 and isinstance(node_json('k6').get('node_age_ms'), int) and
          'node_age_ms' not in node_json('k7') and a7['devices'] and
          a7['devices'] != a6['devices'], (code, code2, node_json('k7'), a7['devices'][:3]))
    hl.stop(proc)

    # a node config changed after the plugin read the node, its reading options others:
    # the next decision reads the node itself
    conf, sock, srv = listening(tmp, 'opts', base)
    proc = t.start(sock, conf, node)
    rt, req = t.accept(srv, proc)
    t.register_and_configure(rt, req)
    with open(conf, 'w') as f:
        f.write(base.replace('[node]\n', '[node]\nroce_version = 1\n'))
    code, msg, a5 = st.create(rt, 3, 'k5')
    check('other options: a config changed to roce_version = 1 after the node was read: '
          'the decision reads the node itself (node.json says no age)',
          code == 0 and len(a5['devices']) >= 1 and 'node_age_ms' not in node_json('k5') and
          os.path.exists(os.path.join(hl.state_dir('k5'), 'node.json')),
          (code, msg, node_json('k5')))
    hl.stop(proc)
    srv.close()


# The plugin's view, on "/" (no --sysroot): its own network namespace and mount namespace,
# a tmpfs on /sys holding the sample node's tree, the namespace's own net devices under
# /sys/class/net (the real sysfs's, mounted apart), the sample node's /proc/devices; eth0
# (the default route's) and eth1 (mlx5_1's RoCE net device) are veths, as are v2/v3, and a
# bridge br0.
def children(pid):
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
            return sorted(int(x) for x in f.read().split())
    except OSError:
        return []


def wait_children(pid, want, secs=5):
    """Wait until the plugin's children are want(kids) (a predicate): its last children."""
    deadline = time.monotonic() + secs
    while True:
        kids = children(pid)
        if want(kids) or time.monotonic() > deadline:
            return kids
        time.sleep(0.05)


def resident(tmp, node, base, logs):
    """The resident worker: one child decides one CreateContainer after another."""
    proc, rt, code = hl.plugin(logs, node, base)
    if rt is None:
        check('resident: the plugin connects', False, code)
        return
    kids = wait_children(proc.pid, lambda k: len(k) == 1)
    seen, answered = [], True
    for i, stream in enumerate((3, 5, 7)):
        code, msg, a = st.create(rt, stream, 'r%d' % i)
        answered = answered and code == 0 and len(a['devices']) >= 8
        seen.append(wait_children(proc.pid, lambda k: len(k) == 1))
    check('resident: three CreateContainer answered by the one child the plugin keeps (pid '
          '%s), no process of their own' % kids,
          answered and len(kids) == 1 and all(k == kids for k in seen), (kids, seen))
    os.kill(kids[0], 9)
    code, msg, a = st.create(rt, 9, 'r3')
    check('resident: killed, the next container is still answered (by a worker of its own)',
          code == 0 and len(a['devices']) >= 8, (code, msg))
    again = wait_children(proc.pid, lambda k: len(k) == 1 and k != kids)
    check('resident: a new one is started once the plugin is idle (%s after %s)' %
          (again, kids), len(again) == 1 and again != kids, again)
    proc.send_signal(1)
    wait_lines(logs, 'SIGHUP: reading the node again', 2, 5)
    fresh = wait_children(proc.pid, lambda k: len(k) == 1 and k != again)
    check('resident: SIGHUP reads the node again, and the resident that held the old one is '
          'replaced (%s after %s)' % (fresh, again), len(fresh) == 1 and fresh != again, fresh)
    code, msg, a = st.create(rt, 11, 'r4')
    check('resident: the new one answers', code == 0 and len(a['devices']) >= 8 and
          isinstance(node_json('r4').get('node_age_ms'), int), (code, msg, node_json('r4')))
    hl.stop(proc)

    # killed while it holds a request (its decision waits on a FIFO as the container's
    # network namespace): a worker of its own decides that request again, in time, and
    # serves it (the FIFO let through is no namespace: a warning); without it, under
    # on_error = fail, the container would be refused with "no decision"
    proc, rt, code = hl.plugin(logs, node, base + 'on_error = fail\n')
    held = wait_children(proc.pid, lambda k: len(k) == 1)
    fifo = os.path.join(tmp, 'netns-fifo')
    os.mkfifo(fifo)
    rt.request(3, 'CreateContainer', t.create_req('r5', pod_ann=ANN, netns=fifo))
    time.sleep(0.3)
    os.kill(held[0], 9)
    deadline, wfd = time.monotonic() + 1.0, -1
    while wfd < 0 and time.monotonic() < deadline:
        try:   # the worker deciding again opens the FIFO too: let it through
            wfd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.02)
    code, msg, payload = rt.response(3)
    if wfd >= 0:
        os.close(wfd)
    devices = t.adjustment(payload)['devices'] if code == 0 else []
    check('resident: killed holding a request, a worker of its own decides it again and '
          'serves it (%d devices), not refused with "no decision" (on_error = fail)' %
          len(devices), len(held) == 1 and wfd >= 0 and code == 0 and len(devices) >= 8,
          (held, wfd, code, msg))
    hl.stop(proc)


NETNS_SETUP = """set -e
node=$0 ready=$1
shift
real=$node.sysfs
mkdir "$real"
mount -t sysfs sysfs "$real"
mount -t tmpfs tmpfs /sys
cp -a "$node/sys/." /sys/
rm -rf /sys/class/net
mkdir -p /sys/class/net /sys/devices/virtual/net
mount --bind "$real/class/net" /sys/class/net
mount --bind "$real/devices/virtual/net" /sys/devices/virtual/net
mount --bind "$node/proc/devices" /proc/devices
ip link set lo up
ip link add eth0 type veth peer name p0
ip link set eth0 up
ip addr add 10.0.60.3/24 dev eth0
ip route add default via 10.0.60.1 dev eth0
ip link add eth1 type veth peer name p1
ip link set eth1 up
ip link add br0 type bridge
ip link add v2 type veth peer name v3
echo ready >"$ready"
exec "$@"
"""


def kernel(tmp, node, base, logs):
    """On the host's sysfs as the plugin sees it, in namespaces of its own."""
    conf, sock, srv = listening(tmp, 'host', base)
    ready = os.path.join(tmp, 'netns-ready')
    log = open(os.path.join(logs, 'plugin.log'), 'ab')
    proc = subprocess.Popen(['unshare', '-n', '-m', '--propagation', 'private', 'sh', '-c',
                             NETNS_SETUP, node, ready, t.HOOK, 'nri', '--socket', sock,
                             '--config', conf], stdout=log, stderr=log)
    try:
        rt, req = t.accept(srv, proc)
        code, _ = t.register_and_configure(rt, req)
    except OSError as e:
        check('kernel: the plugin in its namespaces connects', False, e)
        hl.stop(proc)
        return
    check('kernel: the plugin in namespaces of its own, on "/" (the sample node\'s tree on '
          '/sys, the namespace\'s net devices), connects', code == 0 and os.path.exists(ready),
          code)
    code, msg, a = st.create(rt, 3, 'n1')
    check('kernel: a container is served from the node kept (%d devices, %s ms old)' %
          (len(a['devices']), node_json('n1').get('node_age_ms')),
          code == 0 and len(a['devices']) >= 8 and
          isinstance(node_json('n1').get('node_age_ms'), int), (code, msg, node_json('n1')))

    def ip(*args):
        return subprocess.run(['nsenter', '-t', str(proc.pid), '-n', 'ip', *args],
                              capture_output=True, text=True)

    said = 'the kernel says the node changed'
    n0 = log_lines(logs, said)
    ip('addr', 'add', '10.9.8.1/24', 'dev', 'v3')
    ip('link', 'set', 'v3', 'up')
    time.sleep(1)
    check('kernel: an address and a link change of an unrelated device: the node is not '
          'read again', log_lines(logs, said) == n0, log_lines(logs, said) - n0)
    r = ip('addr', 'add', '25.11.128.9/27', 'dev', 'eth1')
    check('kernel: an address of an RDMA port\'s net device (eth1): the plugin reads the '
          'node again', r.returncode == 0 and wait_lines(logs, said, n0 + 1, 5), r.stderr)
    time.sleep(0.6)  # read again (250 ms after the reading before, at most)
    r = ip('link', 'set', 'eth1', 'master', 'br0')
    check('kernel: eth1 joins a bridge (its link message): read again, so the node was read '
          'after the address', r.returncode == 0 and wait_lines(logs, said, n0 + 2, 5),
          r.stderr)
    time.sleep(0.6)
    r = ip('addr', 'add', '10.9.7.1/24', 'dev', 'br0')
    check('kernel: an address of the bridge on top of eth1 (its lower_eth1 link): read '
          'again', r.returncode == 0 and wait_lines(logs, said, n0 + 3, 5), r.stderr)
    hl.stop(proc)
    srv.close()


def main():
    why = st.skip_reason(('unshare', 'nsenter', 'chroot', 'mount', 'ip'),
                         'util-linux, coreutils, iproute2')
    if why:
        print('1..0 # SKIP ' + why)
        return 0
    tmp, node, base, want_hca, logs = hl.sample('orh-nri-node-')
    st.NODE[0], st.BASE[0] = node, base
    try:
        kept(tmp, node, base, logs)
        resident(tmp, node, base, logs)
        kernel(tmp, node, base, logs)
        if t.failed:
            with open(os.path.join(logs, 'plugin.log'), errors='replace') as f:
                for ln in f.readlines()[-25:]:
                    print('# ' + ln.rstrip()[:400])
    finally:
        st.cleanup(tmp)
    print('1..%d' % t.n_test)
    return 1 if t.failed else 0


if __name__ == '__main__':
    sys.exit(main())
