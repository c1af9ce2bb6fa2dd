#!/usr/bin/env python3
"""Locked and fencing instructions (lock prefix, xchg, mfence) that coll
rdma and the libraries under it run per call, from callgrind --dump-instr=yes
files (one per rank): locked-instructions.py CALLS FILE... (an instruction
counts where it ran in at least half the calls)."""
import re, subprocess, sys, collections
RECORD = re.compile(r'^(c?ob|c?fn|fl|fi|fe|cfi|cfl)=\((\d+)\)(?: (.*))?$')
def parse(path):
    names = {'ob': {}, 'fn': {}}; cur = {'ob': None, 'fn': None}
    skip = False; addr = 0; costs = collections.Counter(); fnmin = {}
    for line in open(path):
        line = line.rstrip('\n')
        if not line: continue
        m = RECORD.match(line)
        if m:
            kind, ident, text = m.groups()
            t = 'ob' if kind.endswith('ob') else ('fn' if kind.endswith('fn') else None)
            if t is None: continue
            if text: names[t][ident] = text
            if not kind.startswith('c'): cur[t] = names[t][ident]
            continue
        if line.startswith('calls='): skip = True; continue
        if line[0] in '0123456789+-*':
            f = line.split()
            if f[0].startswith('0x'): addr = int(f[0], 16)
            elif f[0][0] in '+-': addr += int(f[0])
            if skip: skip = False; continue
            costs[(cur['ob'], addr)] += int(f[2]) if len(f) > 2 else 0
            k = (cur['ob'], cur['fn'])
            fnmin[k] = min(fnmin.get(k, addr), addr)
    return costs, fnmin
objcache = {}
def objinfo(ob):
    if ob in objcache: return objcache[ob]
    out = subprocess.run(['objdump', '-d', '-C', '--no-show-raw-insn', ob], capture_output=True, text=True).stdout
    syms = {}; locks = {}; cur = None
    for l in out.splitlines():
        m = re.match(r'^([0-9a-f]+) <(.*)>:$', l)
        if m: cur = m.group(2); syms.setdefault(cur, int(m.group(1), 16)); continue
        m = re.match(r'^\s+([0-9a-f]+):\s+(.*)$', l)
        if m and re.search(r'\block\b|xchg|mfence', m.group(2)):
            locks[int(m.group(1), 16)] = (cur, m.group(2).strip())
    objcache[ob] = (syms, locks); return objcache[ob]
calls = int(sys.argv[1])
for path in sys.argv[2:]:
    costs, fnmin = parse(path)
    print('==', path)
    for ob in sorted({o for o, _ in costs if o}):
        if not any(s in ob for s in ('mca_coll_rdma', 'libmpi', 'libopen-pal', 'libc.so', 'mca_coll', 'mca_btl')): continue
        syms, locks = objinfo(ob)
        bases = collections.Counter()
        for (o, fn), a in fnmin.items():
            if o == ob and fn in syms: bases[a - syms[fn]] += 1
        if not bases: continue
        base = bases.most_common(1)[0][0]
        rows = []
        for (o, a), c in costs.items():
            if o == ob and (a - base) in locks and c >= calls // 2:
                fn, ins = locks[a - base]
                rows.append((c / calls, fn[:90], ins))
        tot = sum(r[0] for r in rows)
        if rows:
            print(f'  {ob.split("/")[-1]}: {tot:.2f} locked/fence per call (base matched by {bases.most_common(1)[0][1]} fns)')
            for r in sorted(rows, reverse=True)[:12]: print(f'     {r[0]:6.2f} {r[2]:40s} {r[1]}')
