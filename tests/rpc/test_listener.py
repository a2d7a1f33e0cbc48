"""The Connect listener is a TCP-protocol socket, so asyncio sets TCP_NODELAY on every accepted connection."""

from __future__ import annotations

import socket

from pyruntime.net.listener import bind_listener


def test_listener_is_created_with_the_tcp_protocol() -> None:
    # With protocol 0, asyncio skips TCP_NODELAY and each kept-alive response waits ~40 ms for a delayed ACK
    # (measured by bench/bench_csharp_rpc.py: 44 ms -> 0.6 ms per Health call).
    sock = bind_listener("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()
