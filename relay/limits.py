"""Token buckets and the relay's tunable limits (pure: time is passed in)."""

from __future__ import annotations

import ipaddress

import attrs


@attrs.frozen
class RelayConfig:
    """Every limit the relay enforces. Durations are float seconds."""

    retention: float = 24 * 3600.0
    op_rate: float = 100.0  # sustained ops per second per identity
    op_burst: float = 500.0
    max_backlog: int = 10_000  # held, unacknowledged ops per room (the slowest device's backlog)
    # Bytes of held op bodies per room (the log is in memory).
    max_backlog_bytes: int = 64 << 20
    # Ops a resumed device is replayed ahead of its acknowledgements (relay.replay): well under
    # the shell's outbox, so a device owed several full backlogs is never closed as too slow.
    replay_window: int = 5_000
    slot_ttl: float = 15 * 60.0
    guess_rate: float = 1 / 3  # slot joins per second per source address
    guess_burst: float = 20.0
    max_open_slots: int = 3  # per identity
    max_bad_frames: int = 20  # misbehaviour allowed on one connection before it is closed
    grant_ttl: float = 15 * 60.0  # how long a completed pairing counts as "shares a room"
    # Connections that have not authenticated (no valid hello yet). Each is closed after
    # hello_timeout; past either cap the oldest such connection is shed, so a newcomer (maybe
    # the real client) always gets its turn. The shell lowers the total to fit its fd limit.
    hello_timeout: float = 10.0
    max_unauthenticated_per_source: int = 64
    max_unauthenticated: int = 1024
    # Authenticated connections. Identities are free (a fresh key each), so the address is the
    # bound a stranger cannot multiply; the identity cap stops one key from hogging an address
    # shared with others (a NAT, our own tunnel). Past a cap the idlest connection of that
    # address or identity is shed; past the total, the idlest of the address holding the most
    # (see relay.crowd for why idlest, not newest). The shell lowers the total to fit its fds.
    # 128, not more: a flood from one address holding 256 left the relay's RSS 30% above its
    # start for good (CPython keeps the arenas its objects were spread over), 128 left 16%.
    max_per_source: int = 128
    max_per_identity: int = 32
    max_authenticated: int = 10_000
    # Pairing slot opens and joins at a live slot, per source address and per identity (misses
    # are guesses: guess_rate above). Live slots (open or joined) opened from one address are
    # capped too: a joined slot holds its number until it is closed or expires.
    slot_rate: float = 1 / 3  # per second per source address
    slot_burst: float = 20.0
    slot_identity_rate: float = 1 / 10  # per second per identity
    slot_identity_burst: float = 6.0
    max_slots_per_source: int = 64
    # Proof of work a stranger (an identity that shares no room with anyone here) pays for each
    # slot open or join, unless the other side of the slot is known; see relay.work. 0: none.
    slot_work_bits: int = 17


def source_key(address: str) -> str:
    """What per-address limits count by: an IPv4 address, or an IPv6 address's /64 (one
    subscriber is routinely given a whole /64, so its 2**64 addresses are one source)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


@attrs.define
class TokenBucket:
    """``burst`` tokens at most, refilled at ``rate`` per second; one token per action."""

    rate: float
    burst: float
    tokens: float
    stamp: float

    @classmethod
    def full(cls, rate: float, burst: float, now: float) -> TokenBucket:
        return cls(rate=rate, burst=burst, tokens=burst, stamp=now)

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def take(self, now: float) -> bool:
        """Spend one token if there is one; False means rate limited (nothing spent)."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def is_full(self, now: float) -> bool:
        """A full bucket carries no information and may be forgotten."""
        self._refill(now)
        return self.tokens >= self.burst


class Buckets:
    """One bucket per key, created full on first use, forgotten when full again."""

    def __init__(self, rate: float, burst: float) -> None:
        self._rate = rate
        self._burst = burst
        self._buckets: dict[str, TokenBucket] = {}

    def take(self, key: str, now: float) -> bool:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket.full(self._rate, self._burst, now)
        return bucket.take(now)

    def refund(self, key: str) -> None:
        """Give back the token of an action that turned out not to count."""
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.tokens = min(bucket.burst, bucket.tokens + 1.0)

    def sweep(self, now: float) -> None:
        self._buckets = {k: b for k, b in self._buckets.items() if not b.is_full(now)}

    def __len__(self) -> int:
        return len(self._buckets)
