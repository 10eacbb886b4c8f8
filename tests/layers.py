#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layering of the source (HACKING.md): base < node < decide < apply < cmd.

Every src/**/*.c and src/**/*.h belongs to the layer of its folder (src/cmd/configure/ is
cmd); every public header to the layer of its folder, include/orh/<layer>/*.h. The check fails on:

  - an upward include: a file that includes a header of a higher layer;
  - an upward call: a file that refers to a function or variable defined in a file of a
    higher layer (whichever header declared it);
  - a circle: files of one layer that use each other, a file using another when it refers
    to a name the other defines and gets it through a header it includes, or to a macro of
    a header that declares what one file alone defines (that file's macro);
  - a private header (one under src/) that declares what more than one file defines.

It prints each finding and the counts. EXEMPT names the exceptions, each with its reason;
they are printed too and do not fail the check.

  layers.py SRCROOT              check the tree
  layers.py --self-test SRCROOT  check copies of the tree with one fault added each (FAULTS):
                                 each must fail, naming its fault
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LAYERS = ['base', 'node', 'decide', 'apply', 'cmd']

# Made by the build: the configuration (meson.build) and the seccomp filter
# (src/base/seccomp-gen.c); neither includes anything of ours.
GENERATED = {'orh-config.h': 'base', 'seccomp-filter.h': 'base'}

# Exceptions, each with its reason. A circle is exempt when one of its files is named here;
# a private header when it is.
EXEMPT = {}

IDENT = re.compile(r'[A-Za-z_]\w*')
TAG = re.compile(r'\b(?:struct|union|enum)\s+\w+')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DEFINE = re.compile(r'^\s*#\s*define\s+(\w+)', re.M)


def strip(text):
    """The text without comments, string and character literals and preprocessor lines."""
    text = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: ' ' if m.group(0)[0] == '/' else '""', text, flags=re.S)
    return re.sub(r'^\s*#(?:[^\n]*\\\n)*[^\n]*', '', text, flags=re.M)


def definitions(code):
    """The functions and variables a stripped .c file defines at file scope, not static."""
    names = set()
    depth = 0
    chunk = []
    for c in code:
        if depth == 0 and c in '{;':
            head = ''.join(chunk).strip()
            chunk = []
            if c == '{':
                depth = 1
            first = head.split()[0] if head else ''
            if first in ('static', 'extern', 'typedef', '') or '__attribute__' in head[:14]:
                continue
            m = re.search(r'(\w+)\s*\((?:[^()]|\([^()]*\))*\)\s*$', head)
            if c == '{' and m and '=' not in head:
                names.add(m.group(1))
                continue
            decl = head.split('=')[0]
            if (c == '{' and '=' not in head) or '(' in decl or len(decl.split()) < 2 or \
               re.match(r'(struct|union|enum)\s+\w+\s*$', decl):
                continue
            m = re.search(r'(\w+)\s*(?:\[[^\]]*\]\s*)*$', decl)
            if m:
                names.add(m.group(1))
        elif c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
            if depth == 0:
                chunk = []
        elif depth == 0:
            chunk.append(c)
    names.discard('main')
    return names


def layer_of(rel):
    parts = rel.split('/')
    if parts[0] == 'src' and parts[1] in LAYERS:
        return parts[1]
    return None


def scan(root):
    """Every file: its layer, includes (resolved to keys) and identifiers."""
    files = {}
    for top in ('src', 'include'):
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if not n.endswith(('.c', '.h')):
                    continue
                path = os.path.join(d, n)
                rel = os.path.relpath(path, root)
                with open(path, encoding='utf-8') as f:
                    text = f.read()
                code = strip(text)
                files[rel] = {
                    'includes': INCLUDE.findall(text),
                    # a struct's tag is no use of a function of the same name
                    'idents': set(IDENT.findall(TAG.sub(' ', code))),
                    'defs': definitions(code) if n.endswith('.c') else set(),
                    'macros': set(DEFINE.findall(text)) if n.endswith('.h') else set(),
                }
    return files


def resolve(root, rel, inc):
    """The key of an included header: a file of the tree, or one of GENERATED."""
    local = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
    if os.path.exists(os.path.join(root, local)):
        return local
    if os.path.exists(os.path.join(root, 'include', inc)):
        return 'include/' + inc
    if inc in GENERATED:
        return inc
    return None


def header_layer(key):
    if key.startswith('include/'):
        parts = key.split('/')
        return parts[2] if len(parts) == 4 and parts[1] == 'orh' and parts[2] in LAYERS \
            else None
    if key in GENERATED:
        return GENERATED[key]
    return layer_of(key)


def circles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check(root):
    files = scan(root)
    problems, exempt = [], []
    owner = {}
    for rel, f in files.items():
        for name in f['defs']:
            owner.setdefault(name, rel)

    upward = 0
    for rel, f in sorted(files.items()):
        mine = header_layer(rel) if rel.startswith('include/') else layer_of(rel)
        if mine is None:
            problems.append('%s: no layer (a public header goes in include/orh/LAYER/)' % rel)
            continue
        for inc in f['includes']:
            key = resolve(root, rel, inc)
            if key is None:
                problems.append('%s: includes "%s", which is not in the tree' % (rel, inc))
                continue
            theirs = header_layer(key)
            if theirs is None:
                problems.append('%s: no layer (a public header goes in include/orh/LAYER/)' % key)
            elif LAYERS.index(theirs) > LAYERS.index(mine):
                upward += 1
                problems.append('upward include: %s (%s) includes %s (%s)' %
                                (rel, mine, inc, theirs))
        if not rel.endswith('.c'):
            continue
        for name in sorted(f['idents'] - f['defs']):
            other = owner.get(name)
            if other and LAYERS.index(layer_of(other)) > LAYERS.index(mine):
                upward += 1
                problems.append('upward call: %s (%s) uses %s of %s (%s)' %
                                (rel, mine, name, other, layer_of(other)))

    # a header's macros are the file's whose functions and variables it declares, where
    # that is one file (a header gathering several gives its macros to none)
    macro_owner = {}
    for rel, f in files.items():
        if f['macros']:
            owners = {owner[n] for n in f['idents'] if n in owner}
            if len(owners) == 1:
                macro_owner[rel] = owners.pop()

    # who uses whom through the headers they include
    edges = {}
    for rel, f in files.items():
        if not rel.endswith('.c'):
            continue
        for inc in f['includes']:
            key = resolve(root, rel, inc)
            if key not in files:
                continue
            for name in files[key]['idents'] & f['idents']:
                other = owner.get(name)
                if other and other != rel and layer_of(other) == layer_of(rel):
                    edges.setdefault(rel, set()).add(other)
            other = macro_owner.get(key)
            if other and other != rel and layer_of(other) == layer_of(rel) and \
               files[key]['macros'] & f['idents']:
                edges.setdefault(rel, set()).add(other)
    n_circles = 0
    for comp in circles([r for r in files if r.endswith('.c')], edges):
        line = 'circle: ' + ' <-> '.join(comp)
        reason = next((EXEMPT[c] for c in comp if c in EXEMPT), None)
        if reason:
            exempt.append('%s (exempt: %s)' % (line, reason))
        else:
            n_circles += 1
            problems.append(line)

    n_shared = 0
    for rel, f in sorted(files.items()):
        if not (rel.startswith('src/') and rel.endswith('.h')):
            continue
        owners = sorted({owner[n] for n in f['idents'] if n in owner})
        if len(owners) > 1:
            line = 'private header of %d files: %s (%s)' % (len(owners), rel, ', '.join(owners))
            if rel in EXEMPT:
                exempt.append('%s (exempt: %s)' % (line, EXEMPT[rel]))
            else:
                n_shared += 1
                problems.append(line)

    for line in problems + exempt:
        print(line)
    print('%d files: %d upward includes or calls, %d circles, %d shared private headers, '
          '%d exempt' % (len(files), upward, n_circles, n_shared, len(exempt)))
    return 1 if problems else 0


# Each fault: a file, the lines added after its first #include, and what the check of that
# copy must print, a regular expression matching a line of it (it must fail).
FAULTS = [
    # an upward include
    ('src/base/util.c', '#include "orh/cmd/commands.h"\n',
     r'upward include: src/base/util\.c \(base\) includes orh/cmd/commands\.h \(cmd\)$'),
    # an upward include in a header
    ('include/orh/decide/plan.h', '#include "orh/apply/target.h"\n',
     r'upward include: include/orh/decide/plan\.h \(decide\) includes orh/apply/target\.h '
     r'\(apply\)$'),
    # an upward call, with no include
    ('src/node/parse.c', 'bool orh_plan_port_usable(const struct orh_port *p);\n'
     'int orh_layers_fault(void);\nint orh_layers_fault(void)\n'
     '{\n\treturn orh_plan_port_usable(0);\n}\n',
     r'upward call: src/node/parse\.c \(node\) uses orh_plan_port_usable of src/decide/plan\.c'),
    # a circle: discover.c uses sysfs.c's helpers, and now sysfs.c uses orh_discover()
    ('src/node/sysfs.c', '#include "orh/node/inventory.h"\n'
     'int orh_layers_fault(void);\nint orh_layers_fault(void)\n'
     '{\n\treturn orh_discover(0, 0, 0);\n}\n',
     r'circle: .*src/node/discover\.c <-> .*src/node/sysfs\.c'),
    # a circle through a macro alone: handoff.c uses statedir.c's functions, and now
    # statedir.c uses handoff.h's ORH_HANDOFF_ENV, a macro of handoff.c's
    ('src/apply/statedir.c', '#include "orh/apply/handoff.h"\n'
     'const char *orh_layers_fault(void);\nconst char *orh_layers_fault(void)\n'
     '{\n\treturn ORH_HANDOFF_ENV;\n}\n',
     r'circle: .*src/apply/handoff\.c <-> .*src/apply/statedir\.c'),
]


def self_test(root):
    """Each fault of FAULTS in a copy of the tree: the check must fail, saying it."""
    bad = 0
    for path, line, expect in FAULTS:
        with tempfile.TemporaryDirectory() as tmp:
            for top in ('src', 'include'):
                shutil.copytree(os.path.join(root, top), os.path.join(tmp, top))
            target = os.path.join(tmp, path)
            with open(target, encoding='utf-8') as f:
                text = f.read()
            at = INCLUDE.search(text)
            end = text.index('\n', at.end()) + 1
            with open(target, 'w', encoding='utf-8') as f:
                f.write(text[:end] + line + text[end:])
            r = subprocess.run([sys.executable, __file__, tmp], capture_output=True, text=True)
            found = next((ln for ln in r.stdout.splitlines() if re.match(expect, ln)), None)
            print('self-test: %s: exit %d: %s' % (path, r.returncode,
                                                  found or 'NOT FOUND: ' + expect))
            if r.returncode == 0 or not found:
                bad += 1
    print('self-test: %d of %d faults missed' % (bad, len(FAULTS)))
    return 1 if bad else 0


def main(argv):
    if len(argv) == 3 and argv[1] == '--self-test':
        return self_test(argv[2])
    if len(argv) == 2:
        return check(argv[1])
    print('usage: layers.py [--self-test] SRCROOT', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
