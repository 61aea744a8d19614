#!/usr/bin/env python3
"""Writes every command and subcommand of a running redis-server 7.0, one per line:
`name<TAB>subcommand<TAB>arity<TAB>group<TAB>ACL categories` (subcommand empty for a
top-level command; categories without their `@`, space-separated).

usage: scripts/gen_redis_commands.py PORT > scripts/redis_commands.tsv

server/tests/compatibility.rs probes rediskv-server with each line and renders
docs/compatibility.md from what it answers; the server's ACLs take command categories from it.
"""
import socket
import sys

from gen_command_table import call, pairs


def main():
    sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    f = sock.makefile("rb")
    docs = pairs(call(sock, f, "COMMAND", "DOCS"))
    rows = []
    for info in call(sock, f, "COMMAND", "INFO"):
        name, arity = info[0], info[1]
        doc = pairs(docs[name])
        if doc.get("group") == "module":
            continue
        cats = lambda i: " ".join(c.lstrip("@") for c in i[6])
        rows.append((name, "", arity, doc["group"], cats(info)))
        subdocs = pairs(doc.get("subcommands", []))
        for sub in info[9] if len(info) > 9 else []:
            full = sub[0]
            group = pairs(subdocs.get(full, [])).get("group", doc["group"])
            rows.append((name, full.split("|", 1)[1], sub[1], group, cats(sub)))
    for row in sorted(rows):
        print("\t".join(str(x) for x in row))


if __name__ == "__main__":
    main()
