#!/usr/bin/env python3
"""Counts a crate's public API from rustdoc's HTML (stable rustdoc, no JSON needed).

usage: cargo doc -p rediskv --no-deps && scripts/public_items.py [target/doc/rediskv] [Type]

Prints the items `all.html` lists (modules' functions, types, traits, constants, macros),
the members their pages document (inherent methods, fields, variants, trait items; trait
implementations left out), the sum, and the sum under each top-level module; with a type name, also that type's inherent methods.
"""
import collections
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "target/doc/rediskv"
items = re.findall(r'<li><a href="([^"]+)">', open(os.path.join(root, "all.html")).read())
kinds = collections.Counter(path.rsplit("/", 1)[-1].split(".")[0] for path in items)
MEMBER = re.compile(r'id="(method|tymethod|structfield|variant|associatedconstant|associatedtype)\.([A-Za-z0-9_]+)"')
END = re.compile(r'id="(trait-implementations|synthetic-implementations|blanket-implementations|implementors)"')
members = collections.Counter()
by_module = collections.Counter()
methods_of = {}
for path in items:
    text = open(os.path.join(root, path)).read()
    end = END.search(text)
    own = text[: end.start()] if end else text
    found = {(kind, name) for kind, name in MEMBER.findall(own)}
    members.update(kind for kind, _ in found)
    by_module[path.split("/")[0] if "/" in path else "(root)"] += 1 + len(found)
    name = path.rsplit("/", 1)[-1].split(".")[1]
    methods_of.setdefault(name, set()).update(n for k, n in found if k == "method")
print("items:", len(items), dict(sorted(kinds.items())))
print("members:", sum(members.values()), dict(sorted(members.items())))
print("public items:", len(items) + sum(members.values()))
print("by top module (items + members):", dict(by_module.most_common()))
for name in sys.argv[2:]:
    print(f"{name} public methods:", len(methods_of.get(name, ())))
