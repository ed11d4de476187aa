#!/usr/bin/env python3
"""A learning Ethernet switch between qemu guests, over unix datagram sockets only.

Usage: l2hub.py DIR N    (ports 0..N-1)

Port i is the socket DIR/hub<i>; its guest's qemu netdev is
  -netdev dgram,id=n0,local.type=unix,local.path=DIR/g<i>,remote.type=unix,remote.path=DIR/hub<i>
so every frame a guest sends arrives on its own hub socket and the hub knows the port it
came from. Frames go to the port that last sent from their destination MAC, broadcast,
multicast and unknown destinations to every other port. No IP socket exists anywhere: no
guest gets a host address and nothing can leave the machine. Runs until killed (SIGTERM).
"""
import os
import select
import signal
import socket
import sys


def main():
    d, n = sys.argv[1], int(sys.argv[2])
    socks = []
    for i in range(n):
        p = os.path.join(d, f"hub{i}")
        if os.path.exists(p):
            os.unlink(p)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(p)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        socks.append(s)
    dest = [os.path.join(d, f"g{i}") for i in range(n)]
    mac_port = {}
    frames = [0] * n
    signal.signal(signal.SIGTERM, lambda *_: (print(f"l2hub: frames from each port {frames}", flush=True), sys.exit(0)))
    with open(os.path.join(d, "hub.ready"), "w"):
        pass
    while True:
        ready, _, _ = select.select(socks, [], [])
        for s in ready:
            i = socks.index(s)
            frame = s.recv(65536)
            if len(frame) < 14:
                continue
            frames[i] += 1
            dst, src = frame[0:6], frame[6:12]
            if not src[0] & 1:
                mac_port[src] = i
            j = mac_port.get(dst) if not dst[0] & 1 else None
            for k in ([j] if j is not None else range(n)):
                if k == i:
                    continue
                try:
                    socks[k].sendto(frame, dest[k])   # from the socket guest k talks to
                except OSError:
                    pass   # that guest is not up (yet) or gone: a lost frame, as on a wire


if __name__ == "__main__":
    main()
