"""Ports for the servers the tests start (the hub and its proxy, JupyterLab, slurmd, a container).

A port found free by binding port 0 comes from the kernel's ephemeral range, from which every
outgoing connection of the machine also draws its local port: between the test's check and the
server's bind, a kernel's, a browser's or a client's connection can take it (CI saw the hub's
proxy fail with EADDRINUSE). These ports are drawn below that range, which the kernel never
hands out by itself, at random, and checked free by binding each while the others are held.
"""

from __future__ import annotations

import random
import socket

# The lowest port drawn: above the well-known and most registered services' ports.
LOWEST = 10000


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_ports(count: int) -> list[int]:
    """`count` distinct ports nobody listens on now, below the ephemeral range."""
    high = _ephemeral_low()
    held: list[socket.socket] = []
    try:
        for _ in range(count * 200):
            if len(held) == count:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", random.randrange(LOWEST, high)))
            except OSError:
                s.close()
                continue
            held.append(s)
        if len(held) < count:
            raise RuntimeError(f"no {count} free ports between {LOWEST} and {high}")
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def free_port() -> int:
    """One port nobody listens on now, below the ephemeral range."""
    return free_ports(1)[0]
