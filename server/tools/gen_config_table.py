#!/usr/bin/env python3
"""Generates server/src/redis_config.tsv from a real redis-server 7.0.15 (run once, output committed).

For every parameter of `CONFIG GET *` it records its default value and what CONFIG SET
accepts, learnt from the server's own error replies: setting a nonsense word tells the kind
(yes/no, integer, memory, enum and its words, immutable, protected), setting both i64 bounds
tells an integer's range. Each probe that succeeds is undone by setting the default back.

usage: gen_config_table.py > server/src/redis_config.tsv
"""
import os, re, socket, subprocess, sys, tempfile, time

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def resp(sock, *args):
    sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args)))
    f = sock.makefile("rb")
    return read(f)

def read(f):
    line = f.readline().rstrip(b"\r\n")
    t, rest = line[:1], line[1:].decode()
    if t == b"+": return rest
    if t == b"-": return Exception(rest)
    if t == b":": return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0: return None
        data = f.read(n + 2)[:-2]; return data.decode()
    if t == b"*": return [read(f) for _ in range(int(rest))]
    raise ValueError(line)

# Defaults of a redis-server started without arguments (`dir` is its working directory).
BUILT_IN = {"port": "6379", "bind": "* -::*", "save": "3600 1 300 100 60 10000", "dir": "."}

def main():
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--daemonize", "no", "--dir", d], stdout=subprocess.DEVNULL)
        try:
            for _ in range(50):
                try: sock = socket.create_connection(("127.0.0.1", port)); break
                except OSError: time.sleep(0.1)
            flat = resp(sock, "CONFIG", "GET", "*")
            params = sorted(zip(flat[::2], flat[1::2]))
            for name, value in params:
                # The probe server's own command line changed these; print Redis' built-in default.
                shown = BUILT_IN.get(name, value)
                print("\t".join([name, kind(sock, name, value), shown]))
        finally:
            proc.terminate(); proc.wait()

def probe(sock, name, value, attempt):
    r = resp(sock, "CONFIG", "SET", name, attempt)
    if isinstance(r, Exception):
        m = re.search(r"- (.*)$", str(r))
        return m.group(1) if m else str(r)
    resp(sock, "CONFIG", "SET", name, value)
    return None

def kind(sock, name, value):
    err = probe(sock, name, value, "not-a-value")
    if err is None: return "str"
    if "immutable" in err: return "immutable"
    if "protected" in err: return "protected"
    if "'yes' or 'no'" in err: return "bool"
    m = re.match(r"argument\(s\) must be one of the following: (.*)", err)
    if m: return "enum:" + m.group(1).replace(" ", "")
    if "memory value" in err or "integer" in err:
        low = "0" if "memory" in err else "-9223372036854775808"
        lo = bound(probe(sock, name, value, low), low, 1)
        hi = bound(probe(sock, name, value, "9223372036854775807"), "9223372036854775807", 2)
        return ("mem" if "memory" in err else "int") + f":{lo}:{hi}"
    return "str"  # a parameter with its own validation (save, notify-keyspace-events, ...)

def bound(err, probe_value, group):
    if err is None: return probe_value
    m = re.search(r"between (-?\d+) and (-?\d+)", err)
    if not m: return probe_value
    return m.group(group)

main()
