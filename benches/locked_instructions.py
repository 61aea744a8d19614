#!/usr/bin/env python3
"""Locked instructions a callgrind dump counts, over N: `lock`-prefixed instructions and
`xchg` with memory (locked without the prefix). Each costs about as much as dozens of plain
ones on the machines benches/callgrind_commands.sh runs on, which instruction counts hide.

    locked_instructions.py <dump made with --dump-instr=yes> <N>

Reads the executed instructions' addresses per object from the dump (callgrind writes them
relative to the object's file, as objdump numbers them), finds the locked ones with
`objdump -d`, and prints their executions over N."""
import re
import subprocess
import sys
from collections import defaultdict


def executed(dump):
    """{object path: {address: executions}} from a callgrind dump."""
    names, counts = {}, defaultdict(lambda: defaultdict(int))
    obj, last, skip = None, 0, False
    for line in open(dump):
        if line.startswith(("ob=", "cob=")):
            m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
            if m and m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith("ob=") and m:
                obj = names[m.group(1)]
            continue
        if line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost
            continue
        if not line or line[0] not in "0123456789+-*":
            continue
        first, _, rest = line.partition(" ")
        if first.startswith("0x"):
            last = int(first, 16)
        elif first[0] == "+":
            last += int(first[1:])
        elif first[0] == "-":
            last -= int(first[1:])
        elif first != "*":
            last = int(first, 16)
        if skip:
            skip = False
            continue
        fields = rest.split()
        if len(fields) > 1 and obj:
            counts[obj][last] += int(fields[1])
    return counts


def locked(path):
    """The addresses of `path`'s locked instructions."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True).stdout
    found = set()
    for line in out.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(\S+)(.*)", line)
        if m and (m.group(2) == "lock" or (m.group(2).startswith("xchg") and "(" in m.group(3))):
            found.add(int(m.group(1), 16))
    return found


def main():
    dump, n = sys.argv[1], int(sys.argv[2])
    total = 0
    for obj, counts in executed(dump).items():
        addresses = locked(obj)
        total += sum(c for a, c in counts.items() if a in addresses)
    print(f"{total / n:.1f}")


main()
