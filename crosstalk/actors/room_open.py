"""Opening a room's batch of sealed ops on two cores: this thread and one worker thread.

Theory of operation
-------------------
Opening an op (decrypt, then check its Ed25519 signature: :func:`crosstalk.crypto.open_op`) is
most of what a catch-up costs, and nearly all of that is libsodium's C code, which PyNaCl calls
through cffi with the GIL released. :func:`open_all` opens a batch of :data:`PARALLEL_FROM` ops
or more with a worker thread beside the caller's: both take the next chunk of :data:`CHUNK` ops
in turn and open it, until none is left; the caller then waits for the chunks the worker took
and returns every result in the batch's order. Decoding and applying stay with the caller,
after the whole batch is open, exactly as when it is opened inline.

Why not a pipeline (open the next ops on the worker while the caller decodes and applies): that
work is Python, which holds the GIL, and a thread coming back from a C call waits for the GIL
until the holder lets it go, up to the interpreter's switch interval (5 ms). Measured here, a
worker that only verifies signatures did a sixth of its work while the other thread ran Python.
Two threads that both spend most of their time in libsodium rarely wait for each other.

Work goes to whichever thread takes it, so a worker that is slow to start (a busy machine)
costs at most the chunk it took: if it takes none, the caller opens everything itself.

Nothing about *what* is checked changes: every op is opened by the same pure function with the
same key, seal, signer, room, epoch and op id as inline, and its result (the plaintext, or the
:class:`crosstalk.crypto.OpenFailed` it raised) is returned unchanged for the caller to accept
or refuse as before. Any other exception is raised in the caller's thread; of several, the one
of the earliest op, as inline. A smaller batch, such as the one op of a live message, is opened
inline: a thread hand-off would cost more than it saves.

The worker comes from trio's own thread cache (``trio.lowlevel.start_thread_soon``), which
needs no running event loop and reuses idle threads, so nothing here owns a pool.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence

import attrs
import trio

from crosstalk import crypto

CHUNK = 8
"""Ops a thread takes at once: small, since the caller may wait for the worker's last chunk."""

PARALLEL_FROM = 32
"""Batches with at least this many ops to open are opened on two threads."""


@attrs.frozen
class ToOpen:
    """One op to open: its seal, the key and signer it must open and verify under."""

    key: bytes
    sealed: bytes
    signer: bytes  # the roster's Ed25519 key for the op's sender
    epoch: int
    op_id: str


Opened = bytes | crypto.OpenFailed
"""An op's plaintext, or why it did not open or verify."""


def open_one(room_id: str, job: ToOpen) -> Opened:
    """Open ``job`` here, returning (not raising) an :class:`~crosstalk.crypto.OpenFailed`."""
    try:
        return crypto.open_op(
            job.key, job.sealed, sender_ed_pub=job.signer, room_id=room_id, epoch=job.epoch,
            op_id=job.op_id,
        )
    except crypto.OpenFailed as exc:
        return exc


def open_inline(room_id: str, jobs: Sequence[ToOpen]) -> list[Opened]:
    """Open every job on this thread, in order."""
    return [open_one(room_id, job) for job in jobs]


def open_all(room_id: str, jobs: Sequence[ToOpen]) -> list[Opened]:
    """Every job's result, in order; a large batch is opened on two threads (module note)."""
    if len(jobs) < PARALLEL_FROM:
        return open_inline(room_id, jobs)
    return _Shared(room_id, jobs).run()


class _Shared:
    """One batch opened by the caller and a worker, each taking the next chunk in turn."""

    def __init__(self, room_id: str, jobs: Sequence[ToOpen]) -> None:
        self._room = room_id
        self._chunks = [jobs[i : i + CHUNK] for i in range(0, len(jobs), CHUNK)]
        self._results: list[list[Opened] | BaseException | None] = [None] * len(self._chunks)
        self._next = 0
        self._lock = threading.Lock()
        self._by_worker = 0  # chunks the worker took
        self._worker_done: queue.SimpleQueue[None] = queue.SimpleQueue()  # one per chunk done

    def run(self) -> list[Opened]:
        def work() -> None:
            while (index := self._take(by_worker=True)) is not None:
                self._open_chunk(index)
                self._worker_done.put(None)

        trio.lowlevel.start_thread_soon(work, _nothing, name="crosstalk room open")
        while (index := self._take(by_worker=False)) is not None:
            self._open_chunk(index)
        with self._lock:  # every chunk is taken: the worker takes no more
            by_worker = self._by_worker
        for _ in range(by_worker):
            self._worker_done.get()
        opened: list[Opened] = []
        for result in self._results:
            if not isinstance(result, list):
                raise result if result is not None else AssertionError("a chunk was lost")
            opened.extend(result)
        return opened

    def _take(self, *, by_worker: bool) -> int | None:
        with self._lock:
            if self._next >= len(self._chunks):
                return None
            self._next += 1
            self._by_worker += by_worker
            return self._next - 1

    def _open_chunk(self, index: int) -> None:
        try:
            self._results[index] = open_inline(self._room, self._chunks[index])
        except BaseException as exc:  # raised in the caller's thread, in the batch's order
            self._results[index] = exc


def _nothing(_result: object) -> None:
    """The worker hands everything through :class:`_Shared`; its own outcome is empty."""
