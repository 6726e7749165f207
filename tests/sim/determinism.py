"""Seams that make one ``trio.run`` replay bit for bit: time, randomness, threads, scheduling.

Installed once per process, before the product is imported (see the package docstring). Each
seam dispatches to the running simulation when there is one and to the real thing otherwise, so
importing this module outside a run changes nothing observable.

* ``time.time``: ``EPOCH + trio.current_time() + skew`` of the node whose task asks (``NODE``,
  a context variable set where each node's tasks start; Trio tasks inherit it).
* ``nacl.utils.random``, ``secrets.token_hex``, ``uuid.uuid4``, ``random``'s module functions:
  one seeded stream per node and purpose, so one node's extra draw does not reshuffle the rest.
* ``trio.to_thread.run_sync``: inline (a thread's completion order is wall-clock dependent, and
  the mock clock jumps while a thread runs). SQLite goes through ``Store(run_sync=...)``.
* Trio's scheduler: batches sorted by task counter then shuffled with a seeded ``_r``, which
  also tells the run's :class:`Canary` each batch it orders.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import random
import secrets
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import nacl.utils
import trio
import trio._core._run as _trio_run  # private: pinned names asserted below

EPOCH = 1_750_000_000.0
NODE: contextvars.ContextVar[str] = contextvars.ContextVar("sim_node", default="world")

assert hasattr(_trio_run, "_ALLOW_DETERMINISTIC_SCHEDULING") and hasattr(_trio_run, "_r"), (
    "trio's private scheduling seams moved; the simulation needs them (simulation.md §2)"
)

_real_time = time.time
_real_nacl_random = nacl.utils.random
_real_token_hex = secrets.token_hex
_real_uuid4 = uuid.uuid4
_real_to_thread = trio.to_thread.run_sync


class Canary:
    """Every task step of a run, by name, in the order they ran: the determinism canary.

    Told each batch of runnable tasks as the scheduler orders it (:class:`_Scheduling`); trio
    then steps the batch from its end (``batch.pop()``), so the steps are the batch reversed.
    Not a ``trio.abc.Instrument``: trio calls a ``before_task_step`` hook through a generic
    dispatcher at every step, and that cost about 5 % of a seed's CPU. (Were trio to step a
    batch in another order, the digest would still be a function of the scheduler's choices.)
    """

    def __init__(self) -> None:
        self._names: list[str] = []

    def ran(self, batch: list[trio.lowlevel.Task]) -> None:
        if len(batch) == 1:  # most batches: one task woke
            self._names.append(batch[0].name)
        else:
            self._names.extend([task.name for task in reversed(batch)])

    @property
    def steps(self) -> int:
        """Task steps so far."""
        return len(self._names)

    def hexdigest(self) -> str:
        """SHA-256 of the step names, one after the other."""
        return hashlib.sha256("".join(self._names).encode()).hexdigest()


class _Scheduling(random.Random):
    """Trio's scheduling randomness (it shuffles each batch with ``_run._r``), seeded for one
    run, telling that run's canary what it ordered."""

    def __init__(self, seed: int, canary: Canary) -> None:
        super().__init__(seed)
        self.canary: Canary | None = canary

    def shuffle(self, x: Any) -> None:
        if len(x) > 1:  # shuffling one task draws nothing: skip the call for most batches
            super().shuffle(x)
        if self.canary is not None:
            self.canary.ran(x)


class Entropy:
    """Per-run randomness and wall clocks: streams keyed by (node, purpose), skew per node, and
    the run's :class:`Canary`."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._streams: dict[tuple[str, str], random.Random] = {}
        self.skew: dict[str, float] = {}
        self.canary = Canary()

    def stream(self, purpose: str, node: str | None = None) -> random.Random:
        """The seeded stream for ``purpose`` at ``node`` (the calling task's node by default)."""
        key = (node if node is not None else NODE.get(), purpose)
        rng = self._streams.get(key)
        if rng is None:
            # Seeding from a str is stable across processes; hash() is not.
            rng = self._streams[key] = random.Random(f"{self.seed}/{key[0]}/{key[1]}")
        return rng

    def now(self) -> float:
        try:
            virtual = trio.current_time()
        except RuntimeError:
            virtual = 0.0
        return EPOCH + virtual + self.skew.get(NODE.get(), 0.0)


_active: Entropy | None = None


def _time() -> float:
    return _active.now() if _active is not None else _real_time()


def _nacl_random(size: int = 32) -> bytes:
    if _active is None:
        return _real_nacl_random(size)
    return _active.stream("bytes").randbytes(size)


def _token_hex(nbytes: int | None = None) -> str:
    if _active is None:
        return _real_token_hex(nbytes)
    return _active.stream("token").randbytes(32 if nbytes is None else nbytes).hex()


def _uuid4() -> uuid.UUID:
    if _active is None:
        return _real_uuid4()
    return uuid.UUID(int=_active.stream("uuid").getrandbits(128), version=4)


async def inline_run_sync(
    fn: Callable[..., Any], *args: Any, limiter: trio.CapacityLimiter | None = None,
    abandon_on_cancel: bool = False, **_: Any,
) -> Any:
    """``trio.to_thread.run_sync`` without the thread: hold the limiter, yield once, call."""
    del abandon_on_cancel
    async with limiter if limiter is not None else nullcontext():
        await trio.lowlevel.checkpoint()
        return fn(*args)


async def _to_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if _active is None:
        return await _real_to_thread(fn, *args, **kwargs)
    return await inline_run_sync(fn, *args, **kwargs)


def install() -> None:
    """Put the dispatching seams in place (idempotent; call before importing the product)."""
    time.time = _time
    nacl.utils.random = _nacl_random
    secrets.token_hex = _token_hex
    uuid.uuid4 = _uuid4
    trio.to_thread.run_sync = _to_thread  # type: ignore[assignment]  # same call, inline in a run


def activate(seed: int) -> Entropy:
    """Start a run: seed the scheduler and the module ``random``, route the seams to the run."""
    global _active
    _active = Entropy(seed)
    _trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]  # trio's own test switch
    _trio_run._r = _Scheduling(seed, _active.canary)
    random.seed(f"{seed}/module-random")
    return _active


def deactivate() -> None:
    global _active
    _active = None
    if isinstance(_trio_run._r, _Scheduling):
        _trio_run._r.canary = None  # later runs in this process are not this run's steps


def ensure_hashseed(argv: list[str], module: str = "tests.sim") -> None:
    """Re-exec ``python -m module`` under PYTHONHASHSEED=0 (set iteration order must not vary
    between processes)."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, "-m", module, *argv], env)





install()
