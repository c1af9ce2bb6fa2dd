#!/usr/bin/env python3
"""Common-path instructions per call of coll rdma, from callgrind output
files made with --dump-instr=yes (one per rank):

    common-path-instructions.py CALLS callgrind.out.PID...

Each instruction of mca_coll_rdma.so counts at most once per call
(min(executions, CALLS)), and only if it ran in at least half the calls:
a wait's spin loop counts once whatever the number of polls, and the
setup's one-off code and the waits' rare branches (yield, sleep, stall
checks) not at all. Code of the waits themselves is left out by function
name (as /tmp/cgsum.sh did) and, where the compiler inlined it into its
caller, by source file (btl-ibmc/src/wait*, patterns/meet.rs). So the
figure moves little with the load on the machine or with how long the
peer took, unlike a plain sum of the instructions."""
import re
import sys

WAIT_FUNCTION = re.compile(
    r'SavedAllgather|request_test|progress_others|yield_now|local_flag|wait_at_least|local_at_least'
    r'|yield_and_watch|sub_timespec|deadline_passed|Timespec|elapsed|sleep_until')
WAIT_SOURCE = re.compile(r'btl-ibmc/src/wait|patterns/meet\.rs')


# A name record: `ob`/`cob` an object, `fn`/`cfn` a function, `fl`, `fi`,
# `fe` (code inlined from another file), `cfi`/`cfl` a source file. The
# `c` forms name a call's target and leave the current one as it is.
RECORD = re.compile(r'^(c?ob|c?fn|fl|fi|fe|cfi|cfl)=\((\d+)\)(?: (.*))?$')
TABLE = {'ob': 'ob', 'cob': 'ob', 'fn': 'fn', 'cfn': 'fn', 'fl': 'fl', 'fi': 'fl', 'fe': 'fl', 'cfi': 'fl', 'cfl': 'fl'}


def common_path(path, calls):
    names = {'ob': {}, 'fn': {}, 'fl': {}}
    current = {'ob': None, 'fn': None, 'fl': ''}
    skip_call_cost = False
    address = 0
    costs = {}
    for line in open(path):
        line = line.rstrip('\n')
        if not line:
            continue
        m = RECORD.match(line)
        if m:
            kind, ident, text = m.groups()
            table = names[TABLE[kind]]
            if text:
                table[ident] = text
            if not kind.startswith('c'):
                current[TABLE[kind]] = table[ident]
            continue
        if line.startswith('calls='):
            skip_call_cost = True  # the next line is the call's inclusive cost
            continue
        if line[0] in '0123456789+-*':
            fields = line.split()
            if fields[0].startswith('0x'):
                address = int(fields[0], 16)
            elif fields[0][0] in '+-':
                address += int(fields[0])
            if skip_call_cost:
                skip_call_cost = False
                continue
            obj, function, source = current['ob'], current['fn'], current['fl']
            if obj and 'mca_coll_rdma' in obj and function and not WAIT_FUNCTION.search(function) \
                    and not WAIT_SOURCE.search(source):
                key = (function, address)
                costs[key] = costs.get(key, 0) + int(fields[-1])
    return sum(min(c, calls) for c in costs.values() if c >= calls // 2) / calls


if __name__ == '__main__':
    calls = int(sys.argv[1])
    for path in sys.argv[2:]:
        print(f"{path}: {common_path(path, calls):.0f} instructions per call")
