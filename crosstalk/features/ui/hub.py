"""The page's shared state, between its control ops and its web app (which must not import
each other): the tokens it minted, its port, and a change counter for live updates."""

from __future__ import annotations

import hmac
import secrets
from collections import deque

import trio

#: Tokens stay valid while the daemon runs; only the latest few (tabs left open) are kept.
MAX_TOKENS = 16


class UiHub:
    """The page's shared state: its tokens, its port, and a change counter for live updates."""

    def __init__(self) -> None:
        self._tokens: deque[str] = deque(maxlen=MAX_TOKENS)
        self.port: int | None = None
        self.version = 0
        self._changed = trio.Event()

    def mint(self) -> str:
        """A fresh random token (256 bits), valid from now on."""
        token = secrets.token_urlsafe(32)
        self._tokens.append(token)
        return token

    def valid(self, token: str | None) -> bool:
        """Whether ``token`` is one we minted (compared in constant time)."""
        if not token:
            return False
        given = token.encode()
        return any(hmac.compare_digest(given, t.encode()) for t in self._tokens)

    def changed(self) -> None:
        """Something the page shows may have changed: wake every live stream."""
        self.version += 1
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self, seen: int) -> None:
        """Return once the version moved past ``seen`` (the caller bounds the wait)."""
        if self.version != seen:
            return
        await self._changed.wait()
