#!/usr/bin/env python3
"""redis-py (8.x) against a running rediskv-server: strings, hashes, pipelines, expiries and
the connection-level commands clients call. usage: redis_py_smoke.py PORT PROTOCOL [PASSWORD]
(PROTOCOL 2 or 3; redis-py 8 defaults to 3). With REDISKV_TLS_DIR set, over TLS: the CA is
that directory's ca.crt, the client certificate client.crt and client.key.

Exits non-zero (an assertion) on the first reply that differs from what Redis gives."""
import os
import sys
import time

import redis

port = int(sys.argv[1])
protocol = int(sys.argv[2])
password = sys.argv[3] if len(sys.argv) > 3 else None
tls_dir = os.environ.get("REDISKV_TLS_DIR")
tls = {}
if tls_dir:
    tls = {
        "ssl": True,
        "ssl_ca_certs": os.path.join(tls_dir, "ca.crt"),
        "ssl_certfile": os.path.join(tls_dir, "client.crt"),
        "ssl_keyfile": os.path.join(tls_dir, "client.key"),
    }
r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True, password=password, **tls)

assert r.ping() is True
r.flushall()

# Strings.
assert r.set("greeting", "hello") is True
assert r.get("greeting") == "hello"
assert r.set("greeting", "again", nx=True) is None
assert r.append("greeting", " world") == 11
assert r.mset({"a": "1", "b": "2"}) is True
assert r.mget("a", "b", "missing") == ["1", "2", None]
assert r.incr("counter") == 1
assert r.incrby("counter", 41) == 42
assert r.incrbyfloat("f", 1.5) == 1.5
assert r.getrange("greeting", 0, 4) == "hello"
try:
    r.hset("greeting", "f", "v")
    raise AssertionError("WRONGTYPE expected")
except redis.ResponseError as e:
    assert str(e).startswith("WRONGTYPE"), e

# Hashes.
assert r.hset("user:1", mapping={"name": "ada", "lang": "rust"}) == 2
assert r.hget("user:1", "name") == "ada"
assert r.hgetall("user:1") == {"name": "ada", "lang": "rust"}
assert r.hincrby("user:1", "visits", 3) == 3
assert sorted(r.hkeys("user:1")) == ["lang", "name", "visits"]
assert r.hdel("user:1", "lang") == 1
assert r.hlen("user:1") == 2

# Lists, sets, sorted sets, quickly.
assert r.rpush("l", "x", "y", "z") == 3
assert r.lrange("l", 0, -1) == ["x", "y", "z"]
assert r.sadd("s", "m1", "m2") == 2
assert r.smembers("s") == {"m1", "m2"}
assert r.zadd("z", {"one": 1, "two": 2}) == 2
# (redis-py gives pairs as tuples in RESP2, as lists in RESP3, from redis-server too.)
assert [tuple(p) for p in r.zrange("z", 0, -1, withscores=True)] == [("one", 1.0), ("two", 2.0)]

# Pipelines (no transaction): one round trip, replies in order.
pipe = r.pipeline(transaction=False)
pipe.set("p1", "v1").get("p1").incr("pc").hset("ph", "f", "v").hgetall("ph").delete("p1").exists("p1")
assert pipe.execute() == [True, "v1", 1, 1, {"f": "v"}, 1, 0]

# Transactions (MULTI/EXEC) and WATCH.
with r.pipeline() as tx:
    tx.set("t1", "a").incr("tc").get("t1")
    assert tx.execute() == [True, 1, "a"]
r.set("balance", 10)
def spend(pipe):
    value = int(pipe.get("balance"))
    pipe.multi()
    pipe.set("balance", value - 3)
r.transaction(spend, "balance")
assert r.get("balance") == "7"

# Expiries, relative and absolute from the server's clock.
assert r.set("temp", "v", ex=100) is True
assert 98 <= r.ttl("temp") <= 100
assert r.pexpire("temp", 50_000) is True
assert 48_000 < r.pttl("temp") <= 50_000
server_secs, _ = r.time()
assert abs(server_secs - time.time()) < 5
assert r.expireat("temp", int(server_secs) + 1000) is True
assert 990 < r.ttl("temp") <= 1000
assert r.persist("temp") is True
assert r.ttl("temp") == -1
assert r.set("short", "v", px=100) is True
time.sleep(0.3)
assert r.get("short") is None
assert r.ttl("short") == -2

# What clients and dashboards read.
info = r.info()
assert info["redis_version"] == "7.0.15" and info["role"] == "master", info
assert r.info("cluster") == {"cluster_enabled": 0}
assert "db0" in r.info("keyspace")
assert r.info("stats")["total_commands_processed"] > 10
assert r.config_get("maxmemory") == {"maxmemory": "0"}
assert r.config_set("timeout", 300) is True
assert r.config_get("timeout") == {"timeout": "300"}
assert r.config_set("timeout", 0) is True
try:
    r.config_set("no-such-parameter", "x")
    raise AssertionError("unknown parameter accepted")
except redis.ResponseError as e:
    assert "Unknown option" in str(e), e
assert r.client_setname("smoke") is True
assert r.client_getname() == "smoke"
me = r.client_info()
assert me["name"] == "smoke" and me["laddr"].endswith(f":{port}"), me
assert any(c["name"] == "smoke" for c in r.client_list())
assert r.echo("hi") == "hi"
assert r.dbsize() > 0

# Pub/sub: confirmations and messages (arrays in RESP2, pushes in RESP3).
p = r.pubsub()
p.subscribe("chan")
p.psubscribe("ch*")
assert p.get_message(timeout=2)["type"] == "subscribe"
assert p.get_message(timeout=2)["type"] == "psubscribe"
assert r.publish("chan", "hello") == 2
got = [p.get_message(timeout=2) for _ in range(2)]
assert sorted((m["type"], m["data"]) for m in got) == [("message", "hello"), ("pmessage", "hello")], got
assert r.pubsub_numsub("chan") == [("chan", 1)]
p.close()
print("redis-py", redis.__version__, f"RESP{protocol}", "smoke test passed")
