#!/usr/bin/env python3
"""Regenerates src/commands/table_data.rs from a running redis-server 7.0's COMMAND INFO.

usage: scripts/gen_command_table.py PORT < names
       (one "name family [subcommand…]" per line; a container command gets a row per
       subcommand listed, or per subcommand Redis has when none is listed)

The table is data Redis reports about itself (arity, flags, key specs, ACL categories); the
engine must report the same, so it is read from the reference server instead of typed in.
"""
import socket
import sys

FLAGS = ["write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript", "blocking",
         "loading", "stale", "skip_monitor", "skip_slowlog", "asking", "fast", "no_auth",
         "may_replicate", "sentinel", "only_sentinel", "no_mandatory_keys", "no_async_loading", "protected",
         "module_no_cluster", "no_multi", "movablekeys", "allow_busy"]


def read(f):
    line = f.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind in (b"+", b"-"):
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode()
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read(f) for _ in range(n)]
    raise ValueError(line)


def call(sock, f, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    return read(f)


def pairs(flat):
    return dict(zip(flat[::2], flat[1::2]))


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Commands Redis 7.0 flags CMD_MAY_REPLICATE (its src/commands/*.json), a flag COMMAND INFO
# does not show.
MAY_REPLICATE = {"eval", "evalsha", "fcall", "pfcount", "publish", "spublish"}

# The engine's and the server's own attributes (`table::attr`), beside Redis' flags. An
# attribute of a container holds for each of its subcommands.
ATTRS = {
    # Kvrocks' admin commands: refused to a client logged in with a namespace token.
    "tenant_denied": [
        "flushall", "fsck", "compact", "save", "bgsave", "bgrewriteaof", "module", "config",
        "namespace", "debug", "shutdown", "slowlog", "latency", "monitor", "client|kill",
        "client|list", "client|pause", "client|unpause", "acl|deluser", "acl|dryrun",
        "acl|getuser", "acl|list", "acl|load", "acl|log", "acl|save", "acl|setuser", "acl|users",
        "psync", "sync", "replconf", "replicaof", "slaveof", "failover",
    ],
    # Reads whose reply tells whether their key was found (INFO keyspace_hits/misses).
    "keyed_read": [
        "dump", "get", "getex", "getrange", "hget", "hgetall", "hkeys", "hlen", "hmget",
        "hstrlen", "hvals", "lindex", "llen", "lrange", "mget", "scard", "smembers",
        "srandmember", "strlen", "zcard", "zrange", "zrangebyscore", "zrank", "zrevrange",
        "zrevrank", "zscore",
    ],
    # Redis' LOOKUP_NOTOUCH commands: their lookups leave the keys' last-use time alone.
    "no_touch": ["exists", "type", "ttl", "pttl", "expiretime", "pexpiretime", "object", "memory"],
    # What a RESP2 client may run while it subscribes to something.
    "subscribed": [
        "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe",
        "ping", "quit", "reset",
    ],
}

# Commands Redis does not have (Kvrocks' and this server's own): name -> COMMAND INFO fields
# (name, arity, flags, first key, last key, step, ACL categories, tips, key specs).
OWN = {
    "namespace": ["namespace", -2, ["admin", "noscript", "loading", "stale"], 0, 0, 0,
                  ["@admin", "@slow", "@dangerous"], [], []],
    "fsck": ["fsck", 1, ["admin", "noscript", "loading", "stale"], 0, 0, 0,
             ["@admin", "@slow", "@dangerous"], [], []],
    "compact": ["compact", 1, ["admin", "noscript", "loading", "stale"], 0, 0, 0,
                ["@admin", "@slow", "@dangerous"], [], []],
}


def attrs(name):
    container = name.split("|")[0]
    bits = ["attr::" + a.upper() for a, names in ATTRS.items() if name in names or container in names]
    if name.split("|")[0] in OWN:
        bits.append("attr::OWN")
    return " | ".join(bits) or "0"


def key_spec(spec):
    spec = pairs(spec)
    begin = pairs(spec["begin_search"])
    find = pairs(spec["find_keys"])
    bspec = pairs(begin["spec"])
    if begin["type"] == "index":
        b = "Begin::Index(%d)" % bspec["index"]
    elif begin["type"] == "unknown":
        b = "Begin::Unknown"
    else:
        b = "Begin::Keyword { keyword: %s, startfrom: %d }" % (rust_str(bspec["keyword"]), bspec["startfrom"])
    fspec = pairs(find["spec"])
    if find["type"] == "unknown":
        k = "Find::Unknown"
    elif find["type"] == "range":
        k = "Find::Range { lastkey: %d, step: %d, limit: %d }" % (fspec["lastkey"], fspec["keystep"], fspec["limit"])
    else:
        k = "Find::Keynum { keynumidx: %d, firstkey: %d, step: %d }" % (
            fspec["keynumidx"], fspec["firstkey"], fspec["keystep"])
    flags = ", ".join(rust_str(x) for x in spec["flags"])
    notes = "Some(%s)" % rust_str(spec["notes"]) if "notes" in spec else "None"
    return "KeySpec { notes: %s, flags: &[%s], begin: %s, find: %s }" % (notes, flags, b, k)


def main():
    port = int(sys.argv[1])
    names = [line.split() for line in sys.stdin if line.strip()]
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    rows = []

    def row(info, family, has_subcommands):
        cname, arity, flags, first, last, step, acl, _tips, specs = info[:9]
        if cname in MAY_REPLICATE:
            flags = sorted(flags + ["may_replicate"], key=FLAGS.index)
        idx = [FLAGS.index(fl) for fl in flags]
        assert idx == sorted(idx), (cname, flags)
        bits = " | ".join("flag::" + fl.upper() for fl in flags) or "0"
        specs = ", ".join(key_spec(s) for s in specs)
        return (cname,
            "    CommandInfo {\n"
            "        name: %s,\n        family: Family::%s,\n        arity: %d,\n        flags: %s,\n"
            "        legacy: (%d, %d, %d),\n        acl: %s,\n        keys: &[%s],\n"
            "        has_subcommands: %s,\n        attrs: %s,\n    },\n"
            % (rust_str(cname), family.capitalize(), arity, bits, first, last, step,
               rust_str(" ".join(acl)), specs, "true" if has_subcommands else "false", attrs(cname)))

    for name, family, *subs in names:
        info = OWN.get(name) or call(sock, f, "COMMAND", "INFO", name)[0]
        assert info is not None, name
        info = info + [[]] * (10 - len(info))
        children = [c for c in info[9] if not subs or c[0].split("|")[1] in subs]
        rows.append(row(info, family, bool(children)))
        rows.extend(row(c, family, False) for c in children)
    rows.sort()
    # Redis' commands and subcommands the table leaves out: ACL rules may still name them.
    served = {name for name, _ in rows}
    unserved = []
    for info in call(sock, f, "COMMAND"):
        info = info + [[]] * (10 - len(info))
        for c in [info] + info[9]:
            if c[0] not in served:
                unserved.append(row(c, "server", c is info and bool(info[9])))
    unserved.sort()
    rows = [r for _, r in rows]
    print("// Generated by scripts/gen_command_table.py from redis-server 7.0.15's COMMAND INFO;")
    print("// edit the script's input, not this file.")
    print()
    print("use super::table::{Begin, CommandInfo, Family, Find, KeySpec, attr, flag};")
    print()
    print("/// Every command the engine knows, sorted by name. A `static`, so that every crate sees one")
    print("/// copy: [`CommandInfo::position`] finds a row by its address in it.")
    print("pub(super) static TABLE: &[CommandInfo] = &[")
    sys.stdout.write("".join(rows))
    print("];")
    print()
    print("/// Redis' commands and subcommands the engine and the server do not run, sorted by name:")
    print("/// ACL rules may name them, as Redis' do.")
    print("pub(super) static UNSERVED: &[CommandInfo] = &[")
    sys.stdout.write("".join(r for _, r in unserved))
    print("];")


if __name__ == "__main__":
    main()
