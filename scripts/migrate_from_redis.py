#!/usr/bin/env python3
"""Copies every key of a running Redis (or any server that answers SCAN, DUMP and PTTL in
Redis' format) into rediskv-server: SCAN each database, DUMP and PTTL each key, RESTORE it
with its remaining TTL (REPLACE: a key already in the target is overwritten).

usage: scripts/migrate_from_redis.py SOURCE_URL TARGET_URL [--db N ...] [--batch 500]
       scripts/migrate_from_redis.py redis://127.0.0.1:6379 redis://:password@127.0.0.1:6380

URLs are redis-py's (redis://[[user]:password@]host:port). Without --db, every database of
the source's keyspace (INFO keyspace) is copied into the database of the same number. Needs
redis-py (pip install redis). The copy is not a snapshot: stop writes to the source first,
or keys written during the copy may be missed. Keys that expire during the copy are skipped.
Prints one line per database and exits 1 when a RESTORE failed (each failure is printed).
"""
import argparse
import sys

import redis


def databases(source):
    """The numbers of the databases holding keys, from INFO keyspace."""
    return sorted(int(name[2:]) for name in source.info("keyspace") if name.startswith("db"))


def copy_database(source_url, target_url, db, batch):
    source = redis.Redis.from_url(source_url, db=db)
    target = redis.Redis.from_url(target_url, db=db)
    copied = skipped = failed = 0
    keys = []

    def flush():
        nonlocal copied, skipped, failed
        reads = source.pipeline(transaction=False)
        for key in keys:
            reads.dump(key)
            reads.pttl(key)
        answers = reads.execute()
        writes = target.pipeline(transaction=False)
        restored = []
        for key, payload, ttl in zip(keys, answers[0::2], answers[1::2]):
            if payload is None or ttl == -2:  # gone since SCAN found it
                skipped += 1
                continue
            writes.restore(key, max(ttl, 0), payload, replace=True)
            restored.append(key)
        for key, answer in zip(restored, writes.execute(raise_on_error=False)):
            if isinstance(answer, Exception):
                failed += 1
                print(f"db{db}: RESTORE {key!r}: {answer}", file=sys.stderr)
            else:
                copied += 1
        keys.clear()

    for key in source.scan_iter(count=batch):
        keys.append(key)
        if len(keys) >= batch:
            flush()
    if keys:
        flush()
    return copied, skipped, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--db", type=int, action="append", help="a database to copy (repeatable)")
    parser.add_argument("--batch", type=int, default=500, help="keys per pipeline (default 500)")
    args = parser.parse_args()
    dbs = args.db if args.db else databases(redis.Redis.from_url(args.source))
    any_failed = False
    for db in dbs:
        copied, skipped, failed = copy_database(args.source, args.target, db, args.batch)
        print(f"db{db}: {copied} keys copied, {skipped} gone before their copy, {failed} failed")
        any_failed |= failed > 0
    sys.exit(1 if any_failed else 0)


if __name__ == "__main__":
    main()
