#!/usr/bin/env python3
"""A writer through redis-py's Sentinel client, for sentinel.rs' failover test.
usage: sentinel_writer.py SENTINEL_PORTS MASTER_NAME WRITES_AFTER_RECOVERY

SENTINEL_PORTS is comma-separated. Writes `SET w:<i> <i>`, `INCR counter`, then
`WAIT 1 1000`, in a loop through `Sentinel.master_for(MASTER_NAME)`, retrying every failure
(a killed primary, a replica being promoted) on the primary Sentinel names. Prints, one line
each, flushed:
  ack <i> <counter>   a write that WAIT said at least one replica holds
  failed <unix time>  the first failure
  recovered <unix time>  the first SET accepted after it
  done                after WRITES_AFTER_RECOVERY acknowledged writes following the recovery
Exits non-zero if no recovery comes within 120 seconds of the failure."""
import sys
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

ports = [int(p) for p in sys.argv[1].split(",")]
name = sys.argv[2]
after_recovery = int(sys.argv[3])

sentinel = Sentinel([("127.0.0.1", p) for p in ports], socket_timeout=0.5)
# No retries inside redis-py: this loop retries, so the recovery time is not its backoff's.
primary = sentinel.master_for(name, socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))


def say(line):
    print(line, flush=True)


failed_at = None
recovered = False
acked_since_recovery = 0
i = 0
while acked_since_recovery < after_recovery:
    i += 1
    try:
        primary.set(f"w:{i}", i)
        if failed_at is not None and not recovered:
            recovered = True
            say(f"recovered {time.time():.3f}")
        counter = primary.incr("counter")
        replicas = primary.execute_command("WAIT", 1, 1000)
    except redis.RedisError:
        if failed_at is None:
            failed_at = time.time()
            say(f"failed {failed_at:.3f}")
        if time.time() - failed_at > 120:
            sys.exit("no primary accepted writes within 120 seconds")
        time.sleep(0.02)
        continue
    if replicas >= 1:
        say(f"ack {i} {counter}")
        if recovered:
            acked_since_recovery += 1
say("done")
