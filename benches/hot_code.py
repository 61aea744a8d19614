#!/usr/bin/env python3
"""The code a server runs for every command, from a callgrind dump of N commands: the
distinct 64-byte lines (the instruction cache's unit) holding an instruction that ran at
least N/2 times, over all objects, in KiB, and the distinct such instructions.

    hot_code.py <dump made with --dump-instr=yes> <N>

Prints "<KiB> <instructions>". When a command's hot lines pass the first-level instruction
cache (32 KiB on most x86 cores), each command evicts the code the next one needs: the
simulated misses (`--cache-sim=yes`) show it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_dump import executed  # noqa: E402


def main():
    dump, n = sys.argv[1], int(sys.argv[2])
    lines, instructions = 0, 0
    for counts in executed(dump).values():
        hot = [address for address, c in counts.items() if 2 * c >= n]
        instructions += len(hot)
        lines += len({address >> 6 for address in hot})
    print(f"{lines * 64 / 1024:.1f} {instructions}")


main()
