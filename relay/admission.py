"""Who may take a socket on the relay before authenticating, and where it comes from.

The shell (:mod:`relay.server`) accepts every stream, but connections that have not signed their
``hello`` yet may hold only part of the process's file descriptors (:func:`fd_budget`), at most
:data:`MAX_HANDSHAKING` may sit before their WebSocket upgrade, and the core sheds the oldest
waiting one past its own limits. The source address (:func:`peer_source`, or what a tunnel on
this machine reports: :func:`tunnel_source`) is what slot guesses are rate-limited by.
"""

from __future__ import annotations

import trio

from relay.http import RequestHead

#: File descriptors kept free for authenticated clients, storage and logs: connections that have
#: not authenticated (before or after the WebSocket upgrade) may use at most what is left.
FD_RESERVE_FRACTION = 0.25
FD_RESERVE_MIN = 128
#: The most accepted streams that may sit before their WebSocket upgrade at once.
MAX_HANDSHAKING = 512
#: Close code for a connection the relay sheds (RFC 6455 1008: policy violation).
SHED_CODE = 1008


def fd_budget() -> int:
    """Descriptors unauthenticated connections may hold: the soft limit (raised to the hard
    limit first) less a reserve, halved (each connection costs one here and its peer one
    elsewhere on a shared machine; halving also leaves authenticated clients the rest)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    reserve = max(FD_RESERVE_MIN, int(soft * FD_RESERVE_FRACTION))
    return max(16, (soft - reserve) // 2)


def tunnel_source(head: RequestHead, peer: str, header: str | None) -> str:
    """The client address a tunnel reports in ``header``, trusted only from a loopback peer
    (the tunnel runs on this machine), else the peer's own address."""
    if header is None or peer not in {"127.0.0.1", "::1"}:
        return peer
    import ipaddress

    reported = head.headers.get(header.lower(), "").split(",")[0].strip()
    try:
        return str(ipaddress.ip_address(reported))
    except ValueError:
        return peer


def peer_source(stream: trio.abc.Stream) -> str:
    """The peer's address, used to rate-limit slot guesses per source."""
    inner = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    if isinstance(inner, trio.SocketStream):
        try:
            return str(inner.socket.getpeername()[0])
        except OSError:
            return "unknown"
    return "unknown"
