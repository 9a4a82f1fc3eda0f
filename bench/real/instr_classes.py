#!/usr/bin/env python3
"""Instructions executed in one binary, by class of opcode: where a probe's off cost goes.

  bench/real/instr_classes.py CALLGRIND_OUT BINARY

CALLGRIND_OUT from `valgrind --tool=callgrind --dump-instr=yes --dump-line=no BINARY ...`; only the
instructions of BINARY itself (its object name's basename) are counted. Each executed address is
looked up in `objdump -d BINARY` and counted as: `probe` (the gate probe's off path: the load of
`__hcct_gate_ptr`, the byte load or test and the branch after it), push, pop, `rsp adj` (add/sub of
a constant to %rsp), call, ret, jump, mov, other. docs/BENCHMARKS.md, "Session 14: plugin14".
"""
import collections
import os
import re
import subprocess
import sys


def executed(path, binary_name):
    """{address: times executed} for the instructions of the object named binary_name. Positions
    are absolute (0x...), relative (+n, -n) or the same (*); the cost line after `calls=` is the
    call's inclusive cost, not the instruction's own."""
    counts = collections.Counter()
    names, obj, addr, after_calls = {}, None, 0, False
    for line in open(path):
        m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3).strip()
            if m.group(1) == "ob":
                obj = names[m.group(2)]
            continue
        if line.startswith("calls="):
            after_calls = True
            continue
        if not line or line[0] not in "0+-*":
            continue
        parts = line.split()
        p = parts[0]
        addr = (int(p, 16) if p.startswith("0x") else addr + int(p[1:]) if p[0] == "+"
                else addr - int(p[1:]) if p[0] == "-" else addr)
        if after_calls:
            after_calls = False
            continue
        if obj and os.path.basename(obj) == binary_name and len(parts) > 1:
            counts[addr] += int(parts[1])
    return counts


def disassembly(binary):
    """[(address, mnemonic, operands)] in address order."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True, text=True,
                         check=True).stdout
    return [(int(m.group(1), 16), m.group(2), m.group(3))
            for m in re.finditer(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", out, re.M)]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    counts = executed(sys.argv[1], os.path.basename(sys.argv[2]))
    insns = disassembly(sys.argv[2])
    probe = set()
    for i, (a, op, args) in enumerate(insns):
        if op.startswith("mov") and "<__hcct_gate_ptr>" in args:
            probe.add(a)
            for b, op2, args2 in insns[i + 1:i + 6]:  # the byte's test and its branch follow
                if op2.startswith(("movzb", "cmpb")) or (op2 == "test" and "%al" in args2) or op2 in ("jne", "je"):
                    probe.add(b)
                    if op2 in ("jne", "je"):
                        break
    by_addr = {a: (op, args) for a, op, args in insns}
    classes = collections.Counter()
    for a, n in counts.items():
        op, args = by_addr.get(a, ("?", ""))
        cls = ("probe" if a in probe else "push" if op.startswith("push") else "pop" if op.startswith("pop")
               else "rsp adj" if op in ("add", "sub") and args.endswith(",%rsp") and args.startswith("$")
               else "call" if op.startswith("call") else "ret" if op.startswith("ret")
               else "jump" if op.startswith("j") else "mov" if op.startswith("mov") else "other")
        classes[cls] += n
    print(f"{sys.argv[2]}: {sum(counts.values()):,} instructions")
    for cls, n in classes.most_common():
        print(f"  {cls:8} {n:>14,}")


if __name__ == "__main__":
    main()
