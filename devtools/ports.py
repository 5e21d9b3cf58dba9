"""A free local port: for a server the tests or the benchmarks start, or for a URL where nothing listens."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
