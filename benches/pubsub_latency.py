#!/usr/bin/env python3
"""The latency of a PUBLISH reaching a subscriber: one connection SUBSCRIBEs to `lat` on
node SUB_PORT, another PUBLISHes to it on node PUB_PORT (the same port: one node), the next
message once the previous arrived. Prints the median, p90 and p99 of N rounds.

    python3 benches/pubsub_latency.py PUB_PORT SUB_PORT [N]
"""
import socket
import sys
import time


def connect(port):
    s = socket.create_connection(('127.0.0.1', port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def command(*args):
    return ('*%d\r\n' % len(args) + ''.join('$%d\r\n%s\r\n' % (len(a), a) for a in args)).encode()


def main():
    pub, sub = connect(int(sys.argv[1])), connect(int(sys.argv[2]))
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    sub.sendall(command('SUBSCRIBE', 'lat'))
    time.sleep(0.2)
    sub.recv(4096)
    rounds = []
    for i in range(n):
        started = time.perf_counter()
        pub.sendall(command('PUBLISH', 'lat', str(i)))
        # The message is the push's seventh line: its payload is the round's number.
        got = b''
        while not got.endswith(('%d\r\n' % i).encode()) or got.count(b'\r\n') < 7:
            got += sub.recv(4096)
        rounds.append(time.perf_counter() - started)
        pub.recv(4096)
    rounds.sort()
    print('n=%d median %.0f us, p90 %.0f us, p99 %.0f us'
          % (n, rounds[n // 2] * 1e6, rounds[n * 9 // 10] * 1e6, rounds[n * 99 // 100] * 1e6))


if __name__ == '__main__':
    main()
