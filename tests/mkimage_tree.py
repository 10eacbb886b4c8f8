#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write a container image's root filesystem as the field lays out its RDMA userspace and
NCCL, for the image reader's tests (tests/test_image.c) and the e2e and VM cases.

    mkimage_tree.py LAYOUT DIR

The "libraries" are tiny ELF files that carry only what the reader looks at: a version
definition (libibverbs: IBVERBS_PRIVATE_<N>) or a version need (a provider), with the
dynamic string table their names are in. --real copies the host's libibverbs and rxe
provider instead (Debian's rdma-core), where the layout has them. The loader's cache is
written in glibc's new format, its entries sorted as ldconfig sorts them.
"""
import os
import shutil
import stat
import struct
import sys

MULTI = 'usr/lib/x86_64-linux-gnu'
HOST_VERBS = '/usr/lib/x86_64-linux-gnu/libibverbs.so.1'
HOST_RXE = '/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so'

SHT_STRTAB = 3
SHT_VERDEF = 0x6ffffffd
SHT_VERNEED = 0x6ffffffe


def elf(defines=(), needs=()):
    """An ELF64 little-endian file: section headers null, .dynstr, and .gnu.version_d
    (defines: version names) or .gnu.version_r (needs: version names of libibverbs.so.1)."""
    strtab = b'\0'
    offs = {}
    for name in ['libx.so', 'libibverbs.so.1'] + list(defines) + list(needs):
        if name not in offs:
            offs[name] = len(strtab)
            strtab += name.encode() + b'\0'
    sections = []  # (type, body, link)
    if defines:
        body = b''
        names = ['libx.so'] + list(defines)
        for i, name in enumerate(names):
            nxt = 28 if i < len(names) - 1 else 0
            # vd_version, vd_flags (base for the first), vd_ndx, vd_cnt, vd_hash, vd_aux, vd_next
            body += struct.pack('<HHHHIII', 1, 1 if i == 0 else 0, i + 1, 1, 0, 20, nxt)
            body += struct.pack('<II', offs[name], 0)
        sections.append((SHT_VERDEF, body, len(names)))
    if needs:
        body = struct.pack('<HHIII', 1, len(needs), offs['libibverbs.so.1'], 16, 0)
        for i, name in enumerate(needs):
            nxt = 16 if i < len(needs) - 1 else 0
            body += struct.pack('<IHHII', 0, 0, i + 2, offs[name], nxt)
        sections.append((SHT_VERNEED, body, 1))
    data = bytearray(64)
    layout = []
    for body in [strtab] + [s[1] for s in sections]:
        layout.append((len(data), len(body)))
        data += body
        data += b'\0' * (-len(data) % 8)
    shoff = len(data)
    shdrs = [struct.pack('<IIQQQQIIQQ', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    shdrs.append(struct.pack('<IIQQQQIIQQ', 0, SHT_STRTAB, 0, 0, layout[0][0], layout[0][1],
                             0, 0, 1, 0))
    for i, (typ, _body, count) in enumerate(sections):
        off, size = layout[i + 1]
        shdrs.append(struct.pack('<IIQQQQIIQQ', 0, typ, 0, 0, off, size, 1, count, 8, 0))
    data += b''.join(shdrs)
    ehdr = b'\x7fELF' + bytes([2, 1, 1, 0]) + b'\0' * 8
    ehdr += struct.pack('<HHIQQQIHHHHHH', 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                        len(shdrs), 0)
    data[:64] = ehdr
    return bytes(data)


def crafted_elf():
    """A hostile ELF file of about 16 KiB: 127 section headers, 124 of them version-need
    sections over the same 8 KiB, each of 256 entries of 256 names, every entry and name
    overlapping the next (each 16-byte record reads as both); a last, plain one needs
    IBVERBS_PRIVATE_25. Walked one entry at a time from the file it is 8 million names."""
    # each 16-byte record is a Verneed (vn_version 1, vn_cnt 256, vn_file, vn_aux 16,
    # vn_next 16) and a Vernaux whose vna_name (vn_aux's bytes: 16) and vna_next (16) are
    # the same numbers: the string table holds GLIBC_2.2.5 at 16
    strtab = b'\0libibverbs.so.\0GLIBC_2.2.5\0IBVERBS_PRIVATE_25\0'
    assert strtab.index(b'GLIBC_2.2.5') == 16
    private_at = strtab.index(b'IBVERBS_PRIVATE_25')
    rec = struct.pack('<HHIII', 1, 256, 1, 16, 16)
    records = rec * 512
    plain = struct.pack('<HHIII', 1, 1, 1, 16, 0) + struct.pack('<IHHII', 0, 0, 2, private_at, 0)
    data = bytearray(64)
    str_off = len(data)
    data += strtab + b'\0' * (-len(strtab) % 8)
    rec_off = len(data)
    data += records
    plain_off = len(data)
    data += plain
    shoff = len(data)
    shdrs = [struct.pack('<IIQQQQIIQQ', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
             struct.pack('<IIQQQQIIQQ', 0, SHT_STRTAB, 0, 0, str_off, len(strtab), 0, 0, 1, 0)]
    for _ in range(124):
        shdrs.append(struct.pack('<IIQQQQIIQQ', 0, SHT_VERNEED, 0, 0, rec_off, len(records),
                                 1, 255, 8, 0))
    shdrs.append(struct.pack('<IIQQQQIIQQ', 0, SHT_VERNEED, 0, 0, plain_off, len(plain), 1, 0,
                             8, 0))
    data += b''.join(shdrs)
    ehdr = b'\x7fELF' + bytes([2, 1, 1, 0]) + b'\0' * 8
    ehdr += struct.pack('<HHIQQQIHHHHHH', 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                        len(shdrs), 0)
    data[:64] = ehdr
    return bytes(data)


def libcmp(a, b):
    """glibc's order of names in ld.so.cache: digit runs by value."""
    i = j = 0
    while i < len(a):
        if a[i].isdigit() and j < len(b) and b[j].isdigit():
            si = i
            while i < len(a) and a[i].isdigit():
                i += 1
            sj = j
            while j < len(b) and b[j].isdigit():
                j += 1
            va, vb = int(a[si:i]), int(b[sj:j])
            if va != vb:
                return -1 if va < vb else 1
        elif a[i].isdigit():
            return 1
        elif j < len(b) and b[j].isdigit():
            return -1
        elif j >= len(b) or a[i] != b[j]:
            return ord(a[i]) - (ord(b[j]) if j < len(b) else 0)
        else:
            i += 1
            j += 1
    return -1 if j < len(b) else 0


def ldcache(entries, flags=0x0303):
    """glibc's new-format ld.so.cache: entries is [(name, path)]."""
    import functools
    entries = sorted(entries, key=functools.cmp_to_key(lambda x, y: libcmp(y[0], x[0])))
    head = 48 + 24 * len(entries)
    strings, recs, slen = [], [], 0
    for name, path in entries:
        key, value = name.encode() + b'\0', path.encode() + b'\0'
        k = head + slen
        v = k + len(key)
        strings += [key, value]
        slen += len(key) + len(value)
        recs.append(struct.pack('<iIIIQ', flags, k, v, 0, 0))
    hdr = b'glibc-ld.so.cache1.1' + struct.pack('<IIB3xI3I', len(entries), slen, 0,
                                                 0, 0, 0, 0)
    return hdr + b''.join(recs) + b''.join(strings)


class Tree:
    def __init__(self, root, real):
        self.root = root
        self.real = real

    def path(self, p):
        return os.path.join(self.root, p.lstrip('/'))

    def write(self, p, data, mode=0o644):
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'wb') as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        os.chmod(full, mode)

    def link(self, p, target):
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)

    def mkdir(self, p):
        os.makedirs(self.path(p), exist_ok=True)

    def copy(self, src, p):
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        shutil.copyfile(os.path.realpath(src), full)

    def verbs(self, libdir, abi=34, real_name='libibverbs.so.1.14.44.0'):
        self.link(f'{libdir}/libibverbs.so.1', real_name)
        if self.real:
            self.copy(HOST_VERBS, f'{libdir}/{real_name}')
        else:
            self.write(f'{libdir}/{real_name}',
                       elf(defines=['IBVERBS_1.0', 'IBVERBS_1.1', f'IBVERBS_PRIVATE_{abi}']))

    def provider(self, libdir, name, abi=34, needs=None):
        path = f'{libdir}/libibverbs/lib{name}-rdmav{abi}.so'
        if self.real and name == 'rxe' and abi == 34 and needs is None:
            self.copy(HOST_RXE, path)
        else:
            self.write(path, elf(needs=['IBVERBS_1.1',
                                        f'IBVERBS_PRIVATE_{needs if needs else abi}']))

    def driver(self, name, text=None):
        self.write(f'/etc/libibverbs.d/{name}.driver', text or f'driver {name}\n')


def debian(t):
    t.verbs(MULTI)
    t.provider(MULTI, 'rxe')
    t.provider(MULTI, 'mlx5')
    t.driver('rxe')
    t.driver('mlx5', '# the Mellanox provider\ndriver mlx5\n')
    t.driver('efa')  # named, no library
    t.write('/etc/ld.so.cache', ldcache([
        ('libibverbs.so.1', f'/{MULTI}/libibverbs.so.1'),
        ('libc.so.6', f'/{MULTI}/libc.so.6'),
        ('libibverbs.so.10', '/nowhere/libibverbs.so.10'),
        ('libibumad.so.3', f'/{MULTI}/libibumad.so.3'),
        ('libz.so.1', f'/{MULTI}/libz.so.1'),
    ]))


def rhel(t):
    t.verbs('usr/lib64')
    t.provider('usr/lib64', 'mlx5')
    t.driver('mlx5')


def mofed(t):
    # MLNX_OFED: its own libibverbs in /usr/lib64, a driver file naming the provider by its
    # absolute path; a hidden file naming another (libibverbs reads it too)
    t.verbs('usr/lib64', real_name='libibverbs.so.1.14.2307.0')
    t.provider('usr/lib64', 'mlx5')
    t.provider('usr/lib64', 'rxe')
    t.write('/etc/libibverbs.d/mlx5.driver', 'driver /usr/lib64/libibverbs/libmlx5\n')
    t.write('/etc/libibverbs.d/.hidden', '\t driver\trxe  # soft-RoCE\n')


def empty(t):
    t.mkdir('bin')
    t.write('/bin/sh', b'\x7fELF not a shell')
    t.mkdir('etc')


def nccl(t):
    debian(t)
    t.write(f'/{MULTI}/libnccl.so.2.28.3', elf())
    t.link(f'/{MULTI}/libnccl.so.2', 'libnccl.so.2.28.3')
    t.mkdir('/opt/venv/lib/python3.12/site-packages/nvidia_nccl_cu12-2.28.9.dist-info')
    t.mkdir('/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib')
    t.mkdir('/opt/venv/lib/python3.12/site-packages/torch-2.9.0.dist-info')
    t.mkdir('/usr/local/lib/python3.12/dist-packages/nvidia_nccl_cu13-2.27.7.dist-info')
    t.mkdir('/usr/local/lib/python3.12/dist-packages/nvidia_nccl_cu12-bad.dist-info')


def broken_cache(t):
    debian(t)
    os.unlink(t.path('/etc/ld.so.cache'))
    t.write('/etc/ld.so.cache', b'glibc-ld.so.cache1.1' + struct.pack('<I', 4000) + b'\0' * 30)


def abi_mismatch(t):
    t.verbs(MULTI, abi=34)
    t.provider(MULTI, 'rxe', abi=25)            # an older rdma-core's provider
    t.provider(MULTI, 'mlx5', abi=34, needs=33)  # named for 34, built for 33
    t.driver('rxe')
    t.driver('mlx5')


def hostile(t):
    t.verbs(MULTI)
    t.provider(MULTI, 'rxe')
    # a config file leading out of the root, resolved inside it: not there
    t.link('/etc/libibverbs.d/escape.driver', '../../../../../../etc/libibverbs.d/x')
    # a huge one: not read
    t.write('/etc/libibverbs.d/huge.driver', 'driver rxe\n' + '#' * (1 << 20))
    # a FIFO: never opened for reading
    os.makedirs(t.path('/etc/libibverbs.d'), exist_ok=True)
    os.mkfifo(t.path('/etc/libibverbs.d/fifo.driver'))
    # the provider through a link that climbs above the root: resolved inside it
    t.link(f'/{MULTI}/libibverbs/libmlx5-rdmav34.so', '/../../../../' + MULTI +
           '/libibverbs/librxe-rdmav34.so')
    t.driver('mlx5')
    # the loader's cache a FIFO
    os.mkfifo(t.path('/etc/ld.so.cache'))
    # NCCL's link leading out of the root
    t.link(f'/{MULTI}/libnccl.so.2', '../../../../../../../tmp/libnccl.so.2.99.0')


def ldpath(t):
    # a userspace of its own under /opt, found only through LD_LIBRARY_PATH
    t.verbs('opt/rdma/lib')
    t.provider('opt/rdma/lib', 'mlx5')
    t.driver('mlx5')


def rxe_only_utils(t):
    """libibverbs and the ibverbs-utils' view of it, without the rxe provider (the VM's
    'no provider' image)."""
    t.verbs(MULTI)
    t.provider(MULTI, 'mlx5')
    t.driver('mlx5')


def with_libc(t):
    """debian's, with a glibc of its own: a libc.so.6 defining up to GLIBC_2.36."""
    debian(t)
    t.write(f'/{MULTI}/libc.so.6', elf(defines=['GLIBC_2.2.5', 'GLIBC_2.34', 'GLIBC_2.36']))


CRAFTED_PROVIDERS = ['mlx5', 'rxe', 'efa', 'erdma', 'irdma', 'bnxt_re', 'qedr', 'hns']


def crafted(t):
    """with_libc's, its libc.so.6 and eight providers (mlx5 first), each named by a driver
    file, the crafted ELF file."""
    with_libc(t)
    for name in CRAFTED_PROVIDERS:
        t.write(f'/{MULTI}/libibverbs/lib{name}-rdmav34.so', crafted_elf())
        if not os.path.exists(t.path(f'/etc/libibverbs.d/{name}.driver')):
            t.driver(name)
    t.write(f'/{MULTI}/libc.so.6', crafted_elf())


def cache_walk(t):
    """debian's, its loader's cache 65536 entries of libibverbs.so.1, none of this
    machine's kind: a lookup walks every one."""
    debian(t)
    os.unlink(t.path('/etc/ld.so.cache'))
    t.write('/etc/ld.so.cache', ldcache([('libibverbs.so.1', '/nowhere/libibverbs.so.1')] *
                                        65536, flags=0x0003))


def abi_overflow(t):
    """libibverbs defining IBVERBS_PRIVATE_000000333960: a number past the bound; and in
    /abi, a library defining each of a few such names (the file's name is the number)."""
    t.verbs(MULTI, abi='000000333960')
    t.provider(MULTI, 'rxe')
    t.driver('rxe')
    for n in ('0034', '99999', '100000', '000000333960', '4294967296'):
        t.write(f'/abi/{n}', elf(defines=[f'IBVERBS_PRIVATE_{n}']))


LAYOUTS = {
    'debian': debian, 'rhel': rhel, 'mofed': mofed, 'empty': empty, 'nccl': nccl,
    'broken-cache': broken_cache, 'abi-mismatch': abi_mismatch, 'hostile': hostile,
    'no-rxe': rxe_only_utils, 'ldpath': ldpath, 'libc': with_libc, 'crafted': crafted,
    'cache-walk': cache_walk, 'abi-overflow': abi_overflow,
}


def main():
    args = sys.argv[1:]
    real = '--real' in args
    args = [a for a in args if a != '--real']
    if len(args) != 2 or args[0] not in LAYOUTS:
        sys.exit(f'usage: mkimage_tree.py [--real] {{{"|".join(LAYOUTS)}}} DIR')
    os.makedirs(args[1], exist_ok=True)
    LAYOUTS[args[0]](Tree(args[1], real))


if __name__ == '__main__':
    main()
