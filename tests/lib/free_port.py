#!/usr/bin/env python3
"""Prints a free loopback port for a server a test starts.

The ports come from below the kernel's ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range), never from it: a port the kernel
hands out for bind(("127.0.0.1", 0)) can be taken a moment later as the source
port of some outgoing connection (and held in TIME_WAIT for a minute), and the
server the test starts on it then fails to bind. The port is checked free for
TCP and UDP (the test DNS server listens on both). With SIGNET_PORTS_GIVEN
naming a file, the ports listed there are not given again and the new one is
added to it.
"""
import os
import random
import socket
import sys


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def is_free(port):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: a TIME_WAIT socket counts as taken
        except OSError:
            return False
        finally:
            s.close()
    return True


def main():
    lo, hi = ephemeral_range()
    if lo > 11000:
        candidates = range(10000, lo)
    elif hi < 64000:
        candidates = range(hi + 1, 65536)
    else:
        sys.exit("free_port.py: no ports outside the ephemeral range %d-%d" % (lo, hi))
    given_file = os.environ.get("SIGNET_PORTS_GIVEN")
    given = set()
    if given_file and os.path.exists(given_file):
        with open(given_file) as f:
            given = {int(line) for line in f if line.strip()}
    for _ in range(1000):
        port = random.choice(candidates)
        if port not in given and is_free(port):
            break
    else:
        sys.exit("free_port.py: no free port found in %d-%d" % (candidates.start, candidates.stop - 1))
    if given_file:
        with open(given_file, "a") as f:
            f.write("%d\n" % port)
    print(port)

if __name__ == "__main__":
    main()
