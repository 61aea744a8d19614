"""Reads a callgrind dump made with `--dump-instr=yes`: how many times each instruction ran,
per object. Shared by `locked_instructions.py` and `hot_code.py`."""
import re
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
