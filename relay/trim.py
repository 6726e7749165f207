"""Giving memory back once a crowd of connections has gone (the shell's; it calls into libc).

CPython keeps the memory of freed objects for reuse, and a flood of connections leaves it
spread thin over many arenas. The relay cannot compact that, but once most of a crowd has gone
it can collect what cycles remain (the relay collects rarely: ``relay.main._tune_gc``) and ask
glibc to return its free pages (``malloc_trim``). Measured after floods of 2,000 connections
from one address (tests/relay/test_flood.py): about 1 MB of the 7 MB the flood left behind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

#: Connections that must have gone, from the peak since the last trim, before trimming again.
TRIM_AFTER_DROP = 64


class Trimmer:
    """Decides when to give memory back: when the connections have fallen to half of their
    peak since the last trim and by at least :data:`TRIM_AFTER_DROP`."""

    def __init__(self, drop: int = TRIM_AFTER_DROP) -> None:
        self._drop = drop
        self._peak = 0

    def observe(self, connections: int) -> bool:
        """Note the connections open now; True when it is time to :func:`give_back`."""
        self._peak = max(self._peak, connections)
        if self._peak - connections >= self._drop and connections <= self._peak // 2:
            self._peak = connections
            return True
        return False


def give_back() -> None:
    """Collect cycles, then return glibc's free memory to the OS (nothing more elsewhere)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)
