#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`oci-rdma-hook nri` running the nccl-conf stage itself at StartContainer ([containers]
nri_stage = start, the default), the binary driven by the fake runtime of test_nri_plugin.py.
A created container is a real process as the runtime leaves it before the start: in a mount
namespace of its own, its root a bind mount of an image's directory (chroot), waiting. Checked:
  - Configure subscribes to StartContainer;
  - CreateContainer: the devices and memlock are given, no OCI hook; the state directory
    holds the node handed over and the mark (nri-start) that the plugin runs the stage;
  - StartContainer with the process's pid: answered OK; the image's /etc/nccl.conf holds its
    own line and the plan's settings; the record is the stage's, naming the plugin at
    StartContainer, the process's pid and the node the plugin read;
  - a read-only root: the image's file is left as it is, the container sees the merged file
    (a bind mount in its mount namespace);
  - the plugin restarted between CreateContainer and StartContainer: the new one runs the
    stage (the mark is on disk);
  - a StartContainer of a container the plugin did not serve: answered at once, nothing
    written;
  - a pid that is a host process (its root and mount namespace the plugin's), in the
    container's cgroup or not, or a created container whose cgroups name another container:
    the stage is not run on it; under on_error = fail, for a container that asked,
    StartContainer fails naming why; under warn it is answered OK;
  - RemoveContainer removes the state directory;
  - image_supply = yes: a glibc image without libibverbs gets the node's from the stage, read
    only, with its driver file and loader entry (where this machine has rdma-core's);
  - nccl_record = yes: the capture's tmpfs mounted in the container by the stage;
  - nri_stage = hook: the adjustment carries the nccl-conf hook, and no mark is left;
  - nri_stage = maybe: refused, naming the file, the line and the key.
Root only (the state directories are the host's /run/oci-rdma-hook, the mount namespaces
need CAP_SYS_ADMIN); TAP output.

  test_nri_start.py HOOK SRCDIR
"""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_nri_plugin as t  # noqa: E402  (its fake runtime and messages)
import test_nri_hookless as hl  # noqa: E402  (its plugin, record, remove)

from test_nri_plugin import check, f_bytes, f_varint, one  # noqa: E402

ANN = [('oci-rdma-hook/enable', 'true')]
NETNS = '/proc/self/ns/net'   # the worker's own: the host's network
IMAGE_LINE = 'NCCL_DEBUG=WARN'


def image(tmp, name):
    """An image's root: a static busybox as sleep, and its own /etc/nccl.conf."""
    root = os.path.join(tmp, name)
    os.makedirs(os.path.join(root, 'bin'))
    os.makedirs(os.path.join(root, 'etc'))
    os.makedirs(os.path.join(root, 'run'))
    shutil.copy2('/bin/busybox', os.path.join(root, 'bin', 'busybox'))
    os.symlink('busybox', os.path.join(root, 'bin', 'sleep'))
    with open(os.path.join(root, 'etc', 'nccl.conf'), 'w') as f:
        f.write(IMAGE_LINE + '\n')
    return root


CGROUP_ROOTS = ('/sys/fs/cgroup/unified', '/sys/fs/cgroup', '/sys/fs/cgroup/pids')
CGROUPS = []


def cgroup_named(cid, pid):
    """pid moved into a cgroup named after the container, as the runtimes name one."""
    for base in CGROUP_ROOTS:
        d = os.path.join(base, t.RUN + cid)
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, 'cgroup.procs'), 'w') as f:
                f.write(str(pid))
            CGROUPS.append(d)
            return True
        except OSError:
            continue
    return False


def created(root, cid, readonly=False):
    """A process as a runtime leaves a created container: its own mount namespace, its root
    a bind mount of the image's directory (read-only where asked), in a cgroup named after
    the container, waiting."""
    ro = 'mount -o remount,bind,ro "$0" && ' if readonly else ''
    p = subprocess.Popen(['unshare', '-m', '--propagation', 'private', '/bin/sh', '-c',
                          'read x; mount --bind "$0" "$0" && ' + ro +
                          'exec chroot "$0" /bin/sleep 300', root],
                         stdin=subprocess.PIPE)
    cgroup_named(cid, p.pid)
    p.stdin.write(b'go\n')
    p.stdin.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if os.readlink('/proc/%d/root' % p.pid) != '/' and \
                    open('/proc/%d/comm' % p.pid).read().strip() == 'sleep':
                return p
        except OSError:
            pass
        time.sleep(0.01)
    return p


def start_req(cid, pid, pod_ann=ANN):
    """StartContainerRequest{pod=1, container=2}: the CreateContainer's, the pid (12) added."""
    r = t.create_req(cid, pod_ann=pod_ann, netns=NETNS)
    return f_bytes(1, one(r, 1)) + f_bytes(2, one(r, 2) + f_varint(12, pid))


def start(rt, stream, cid, pid, pod_ann=ANN):
    rt.request(stream, 'StartContainer', start_req(cid, pid, pod_ann))
    code, msg, _ = rt.response(stream)
    return code, msg


def create(rt, stream, cid, pod_ann=ANN):
    rt.request(stream, 'CreateContainer', t.create_req(cid, pod_ann=pod_ann, netns=NETNS))
    code, msg, payload = rt.response(stream)
    return code, msg, t.adjustment(payload)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return 'unreadable: %s' % e


def served(rt, proc, tmp, want_hca):
    root = image(tmp, 'rootfs-rw')
    code, msg, a = create(rt, 3, 's1')
    check('start: CreateContainer gives the devices and memlock, and no OCI hook',
          code == 0 and len(a['devices']) >= 9 and a['rlimits'] and hl.hooks_of(a) == 0,
          (code, msg, a['devices'], a['create_runtime'], a['poststop']))
    sd = hl.state_dir('s1')
    mark = read(os.path.join(sd, 'nri-start'))
    check('start: the state directory holds the node handed over and the mark with its token',
          os.path.exists(os.path.join(sd, 'node.json')) and len(mark) == 32 and
          all(c in '0123456789abcdef' for c in mark), (os.listdir(sd) if os.path.isdir(sd)
                                                       else 'none', mark))
    check('start: nothing written into the image before StartContainer',
          read(os.path.join(root, 'etc', 'nccl.conf')) == IMAGE_LINE + '\n')
    p = created(root, 's1')
    t0 = time.monotonic()
    code, msg = start(rt, 5, 's1', p.pid)
    took_ms = (time.monotonic() - t0) * 1000
    conf = read(os.path.join(root, 'etc', 'nccl.conf'))
    check('start: StartContainer answered OK', code == 0, (code, msg))
    check('start: the image\'s /etc/nccl.conf keeps its own line and has the plan\'s %s' %
          (want_hca[0][:40] if want_hca else 'NCCL_IB_HCA'),
          IMAGE_LINE in conf.splitlines() and want_hca and
          any(ln.startswith(want_hca[0]) for ln in conf.splitlines()), conf)
    r = hl.record('s1')
    check('start: the record is the stage\'s, run by the plugin at StartContainer, on the '
          'process the runtime named',
          r.get('stage') == 'nccl-conf' and 'at StartContainer' in r.get('edited_by', '') and
          r.get('pid') == p.pid, {k: r.get(k) for k in ('stage', 'edited_by', 'pid')})
    total = (r.get('time_ms') or {}).get('total', -1)
    check('start: the record times the stage, within StartContainer\'s %.1f ms, not the '
          'plugin\'s life (%s ms)' % (took_ms, total), 0 < total <= took_ms, r.get('time_ms'))
    check('start: the stage decided from the node the plugin read at CreateContainer',
          'by the NRI plugin' in json.dumps(r.get('node_read', '')),
          r.get('node_read'))
    p.kill()
    p.wait()
    code = hl.remove(rt, 7, 's1', 4, 1700000000000000000)
    check('start: RemoveContainer answered OK and the state directory removed',
          code == 0 and not os.path.exists(sd), (code, os.path.exists(sd)))

    # a read-only root
    root = image(tmp, 'rootfs-ro')
    code, msg, a = create(rt, 9, 's2')
    p = created(root, 's2', readonly=True)
    code, msg = start(rt, 11, 's2', p.pid)
    inside = read('/proc/%d/root/etc/nccl.conf' % p.pid)
    check('read-only root: StartContainer answered OK', code == 0, (code, msg))
    check('read-only root: the image\'s file is left as it is',
          read(os.path.join(root, 'etc', 'nccl.conf')) == IMAGE_LINE + '\n')
    check('read-only root: the container sees the image\'s line and the plan\'s',
          IMAGE_LINE in inside.splitlines() and want_hca and
          any(ln.startswith(want_hca[0]) for ln in inside.splitlines()), inside)
    p.kill()
    p.wait()

    # a container the plugin did not serve: activation = annotation, no annotation
    root = image(tmp, 'rootfs-none')
    code, msg, a = create(rt, 13, 's3', pod_ann=())
    p = created(root, 's3')
    t0 = time.monotonic()
    code, msg = start(rt, 15, 's3', p.pid, pod_ann=())
    check('not served: StartContainer answered OK, nothing written, no state directory',
          code == 0 and read(os.path.join(root, 'etc', 'nccl.conf')) == IMAGE_LINE + '\n' and
          not os.path.exists(hl.state_dir('s3')), (code, msg, time.monotonic() - t0))
    p.kill()
    p.wait()

    # a host process named as the container: the stage is not run on it (warn: OK), in the
    # container's cgroup or not
    code, msg, a = create(rt, 17, 's4')
    host = subprocess.Popen(['sleep', '300'])
    code, msg = start(rt, 19, 's4', host.pid)
    check('a host process as the container, on_error = warn: answered OK, no record',
          code == 0 and not hl.record('s4'), (code, msg, hl.record('s4')))
    cgroup_named('s4', host.pid)
    code, msg = start(rt, 21, 's4', host.pid)
    check('the same in a cgroup named after the container: answered OK, no record',
          code == 0 and not hl.record('s4'), (code, msg, hl.record('s4')))
    host.kill()
    host.wait()
    # a created container whose cgroups do not name it (a pid of another numbering)
    root = image(tmp, 'rootfs-other')
    code, msg, a = create(rt, 23, 's6')
    p = created(root, 's6-other')
    code, msg = start(rt, 25, 's6', p.pid)
    check('a created container whose cgroups name another: answered OK, nothing written',
          code == 0 and read(os.path.join(root, 'etc', 'nccl.conf')) == IMAGE_LINE + '\n' and
          not hl.record('s6'), (code, msg, hl.record('s6')))
    p.kill()
    p.wait()
    hl.stop(proc)

    # the plugin restarted between CreateContainer and StartContainer
    proc, rt, code = hl.plugin(tmp, NODE[0], BASE[0])
    root = image(tmp, 'rootfs-restart')
    code, msg, a = create(rt, 3, 's5')
    hl.stop(proc)
    proc, rt, code = hl.plugin(tmp, NODE[0], BASE[0])
    p = created(root, 's5')
    code, msg = start(rt, 5, 's5', p.pid)
    conf = read(os.path.join(root, 'etc', 'nccl.conf'))
    check('restarted plugin: the new one runs the stage the first one marked',
          code == 0 and want_hca and any(ln.startswith(want_hca[0])
                                          for ln in conf.splitlines()), (code, msg, conf))
    p.kill()
    p.wait()
    hl.stop(proc)


MULTI = 'usr/lib/x86_64-linux-gnu'


def supplied(tmp, logs):
    """image_supply = yes: the node's RDMA userspace given to a glibc image without
    libibverbs by the stage at StartContainer, seen from inside the container."""
    if not os.path.exists('/%s/libibverbs.so.1' % MULTI):
        print('# no libibverbs on this machine: the supply case is not run')
        return
    node = os.path.join(tmp, 'node-dgx')
    subprocess.run(['python3', os.path.join(t.SRC, 'tests', 'mknode.py'),
                    os.path.join(t.SRC, 'tests', 'nodes', 'dgx-h100.json'), node],
                   check=True, stdout=subprocess.DEVNULL)
    os.makedirs(os.path.join(node, MULTI, 'libibverbs'))
    os.makedirs(os.path.join(node, 'etc', 'libibverbs.d'))
    for lib in ('libibverbs.so.1', 'libnl-3.so.200', 'libnl-route-3.so.200'):
        shutil.copy(os.path.realpath('/%s/%s' % (MULTI, lib)), os.path.join(node, MULTI, lib))
    shutil.copy(os.path.realpath('/%s/libibverbs/libmlx5-rdmav34.so' % MULTI),
                os.path.join(node, MULTI, 'libibverbs', 'libmlx5-rdmav34.so'))
    with open(os.path.join(node, 'etc', 'libibverbs.d', 'mlx5.driver'), 'w') as f:
        f.write('driver mlx5\n')
    root = image(tmp, 'rootfs-glibc')
    os.makedirs(os.path.join(root, 'lib64'))
    os.makedirs(os.path.join(root, MULTI))
    shutil.copy(os.path.realpath('/lib64/ld-linux-x86-64.so.2'),
                os.path.join(root, 'lib64', 'ld-linux-x86-64.so.2'))
    shutil.copy(os.path.realpath('/%s/libc.so.6' % MULTI), os.path.join(root, MULTI, 'libc.so.6'))
    proc, rt, code = hl.plugin(logs, node, BASE[0] + 'image_check = warn\nimage_supply = yes\n')
    code, msg, a = create(rt, 3, 'u1')
    p = created(root, 'u1')
    code, msg = start(rt, 5, 'u1', p.pid)
    inside = '/proc/%d/root' % p.pid
    libs = sorted(os.listdir(inside + '/run/oci-rdma-hook/lib')) \
        if os.path.isdir(inside + '/run/oci-rdma-hook/lib') else []
    check('supply: StartContainer answered OK; the container has the node\'s libibverbs, '
          'libnl and mlx5 provider under /run/oci-rdma-hook/lib',
          code == 0 and libs == ['libibverbs.so.1', 'libmlx5-rdmav34.so', 'libnl-3.so.200',
                                 'libnl-route-3.so.200'], (code, msg, libs))
    check('supply: a driver file names the provider by its path, the loader has its entry',
          read(inside + '/etc/libibverbs.d/oci-rdma-hook-mlx5.driver').strip() ==
          'driver /run/oci-rdma-hook/lib/libmlx5' and
          '/run/oci-rdma-hook/lib' in read(inside + '/etc/ld.so.conf.d/00-oci-rdma-hook.conf'),
          (read(inside + '/etc/libibverbs.d/oci-rdma-hook-mlx5.driver'),
           read(inside + '/etc/ld.so.conf.d/00-oci-rdma-hook.conf')))
    try:
        with open(inside + '/run/oci-rdma-hook/lib/libibverbs.so.1', 'ab'):
            writable = True
    except OSError:
        writable = False
    check('supply: the given library is there and read-only in the container',
          'libibverbs.so.1' in libs and not writable, (libs, writable))
    p.kill()
    p.wait()
    hl.stop(proc)


def captured(tmp, logs):
    """nccl_record = yes: the capture's tmpfs mounted in the container by the stage."""
    proc, rt, code = hl.plugin(logs, NODE[0], BASE[0] + 'nccl_record = yes\n')
    root = image(tmp, 'rootfs-capture')
    code, msg, a = create(rt, 3, 'c1')
    p = created(root, 'c1')
    code, msg = start(rt, 5, 'c1', p.pid)
    mounts = [ln.split() for ln in read('/proc/%d/mountinfo' % p.pid).splitlines()]
    capture = [m for m in mounts if len(m) > 4 and m[4] == '/run/oci-rdma-hook-nccl']
    mode = os.stat('/proc/%d/root/run/oci-rdma-hook-nccl' % p.pid).st_mode & 0o7777 \
        if capture else None
    check('nccl_record = yes: the stage mounts the capture\'s tmpfs, mode 1777, in the '
          'container', code == 0 and len(capture) == 1 and 'tmpfs' in capture[0] and
          mode == 0o1777, (code, msg, capture, oct(mode or 0)))
    check('nccl_record = yes: nothing of it on the image\'s storage',
          not os.path.ismount(os.path.join(root, 'run', 'oci-rdma-hook-nccl')) and
          os.listdir(os.path.join(root, 'run', 'oci-rdma-hook-nccl')) == [])
    p.kill()
    p.wait()
    hl.stop(proc)


NODE, BASE = [None], [None]


def skip_reason(tools, packages):
    """Why the test cannot run here (its TAP skip line), or None."""
    if os.geteuid() != 0:
        return 'root only (the state directories are /run/oci-rdma-hook\'s)'
    for tool in tools:
        if not shutil.which(tool):
            return '%s not found (%s)' % (tool, packages)
    if not os.path.exists('/bin/busybox'):
        return '/bin/busybox not found (busybox-static)'
    return None


def main():
    why = skip_reason(('unshare', 'chroot', 'mount'), 'util-linux, coreutils')
    if why:
        print('1..0 # SKIP ' + why)
        return 0
    tmp, node, base, want_hca, logs = hl.sample('orh-nri-start-')
    NODE[0], BASE[0] = node, base
    try:
        hl.refused(tmp, node, 'nri_stage', 'maybe', 'is not start or hook')
        proc, rt, code = hl.plugin(logs, node, base)
        events = one(hl.CONFIGURED[0], 2, 0)
        hl.stop(proc)
        check('Configure subscribes to CreateContainer (4), StartContainer (6) and '
              'RemoveContainer (11)',
              code == 0 and events == (1 << 3) | (1 << 5) | (1 << 10), (code, bin(events)))
        proc, rt, code = hl.plugin(logs, node, base)
        check('start: the plugin connects and is configured (nri_stage = start, the default)',
              rt is not None and code == 0, code)
        if rt is not None:
            served(rt, proc, logs, want_hca)

        supplied(tmp, logs)
        captured(tmp, logs)

        # on_error = fail: a container that asked fails at StartContainer where its stage
        # cannot run
        proc, rt, code = hl.plugin(logs, node, base + 'on_error = fail\n')
        code, msg, a = create(rt, 3, 'f1')
        host = subprocess.Popen(['sleep', '300'])
        code, msg = start(rt, 5, 'f1', host.pid)
        check('on_error = fail: StartContainer of a host process fails, naming why',
              code != 0 and msg.startswith('oci-rdma-hook: ') and
              'none of its cgroups names the container' in msg, (code, msg))
        host.kill()
        host.wait()
        hl.stop(proc)

        # nri_stage = hook: as before, the runtime runs the stage
        proc, rt, code = hl.plugin(logs, node, base + 'nri_stage = hook\n')
        code, msg, a = create(rt, 3, 'h1')
        check('nri_stage = hook: the adjustment carries the nccl-conf hook, no mark left',
              code == 0 and len(a['create_runtime']) == 1 and
              not os.path.exists(os.path.join(hl.state_dir('h1'), 'nri-start')),
              (a['create_runtime'], os.listdir(hl.state_dir('h1'))
               if os.path.isdir(hl.state_dir('h1')) else None))
        hl.stop(proc)
        if t.failed:
            with open(os.path.join(logs, 'plugin.log'), errors='replace') as f:
                for ln in f.readlines()[-25:]:
                    print('# ' + ln.rstrip()[:400])
    finally:
        cleanup(tmp)
    print('1..%d' % t.n_test)
    return 1 if t.failed else 0


def cleanup(tmp):
    """This run's state directories, the cgroups named after its containers, tmp."""
    t.remove_state_dirs()
    for d in CGROUPS:
        try:
            os.rmdir(d)
        except OSError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
