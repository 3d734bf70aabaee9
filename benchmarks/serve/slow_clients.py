#!/usr/bin/env python3
"""Holds N slow connections open to a server until SIGTERM: each sends a request line, then one
header line every 2 s, never finishing its headers (a slow or stalled client). A connection the
server closes (its --header-timeout) is opened again at once, so N stay open all along.

    slow_clients.py N PORT            (prints a JSON line at the end: opened, closed by the server)
"""
import json
import selectors
import signal
import socket
import sys
import time

n, port = int(sys.argv[1]), int(sys.argv[2])
sel = selectors.DefaultSelector()
stats = {"slow_connections": n, "opened": 0, "closed_by_server": 0, "answers_to_slow": 0}
running = True


def stop(*_):
    global running
    running = False


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)


def open_one():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /recommend HTTP/1.1\r\nHost: slow\r\n")
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    stats["opened"] += 1
    return s


conns = [open_one() for _ in range(n)]
last = time.time()
while running:
    for key, _ in sel.select(timeout=0.5):
        s = key.fileobj
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if data:
            stats["answers_to_slow"] += 1  # a 408 or a 503; the close follows
            continue
        sel.unregister(s)
        s.close()
        conns.remove(s)
        stats["closed_by_server"] += 1
        if running:
            conns.append(open_one())
    if time.time() - last >= 2:
        last = time.time()
        for s in list(conns):
            try:
                s.send(b"X-Slow: 1\r\n")
            except OSError:
                pass
for s in conns:
    s.close()
print(json.dumps(stats), flush=True)
