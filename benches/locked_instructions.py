#!/usr/bin/env python3
"""Locked instructions a callgrind dump counts, over N: `lock`-prefixed instructions and
`xchg` with memory (locked without the prefix). Each costs about as much as dozens of plain
ones on the machines benches/callgrind_commands.sh runs on, which instruction counts hide.

    locked_instructions.py <dump made with --dump-instr=yes> <N>

Reads the executed instructions' addresses per object from the dump (callgrind writes them
relative to the object's file, as objdump numbers them), finds the locked ones with
`objdump -d`, and prints their executions over N."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_dump import executed  # noqa: E402


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
