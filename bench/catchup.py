"""Memory catch-up cost: 10,000 missed ops from the log, and a 10,000-fact snapshot.

Run: ``python -m bench.catchup [--ops N] [--facts N] [--json]``.

*Missed ops*: N memory ops (adds, confirms, claims) sealed by another member and committed to
the room's inbound log as the relay link commits them; then, timed, the room actor catches up
as a daemon's does: batches of ``BATCH`` ops, each opened (seal and signature), decoded and
applied through the memory applier and its apply scope in one transaction, committed, and
handed to the applied listener. Bytes: what the relay would deliver (framed sealed bodies).

*Floor*: the same bodies opened (decrypted, signature checked) with nothing else, on one thread
and the way the room actor opens a batch (``room_open.open_all``, two threads): what the
catch-up costs at least, since every op must be opened and checked.

CPU seconds (both threads, ``time.process_time``) beside the wall seconds of the catch-up and of
the floor opened as the actor opens: on a machine shared with other work the wall seconds vary
with the load (the floor by up to 2x between runs), the CPU seconds much less, so their
difference is the steadier measure of what the catch-up does beyond opening.

*Snapshot*: a room with N facts (about 250 characters of varied words each). Timed on the
sender: canonical bytes, compress, split, sign. Timed on the receiver: the pieces go through the
applier of a member with a hole; the last one verifies the signature, decompresses, checks the
digest, parses and installs (rewriting the room's rows). Bytes: canonical JSON and the compressed
pieces.

Search: memory records are indexed after the transactions that write them (migration 28,
crosstalk/store/schema_search_queue.py). ``indexed_seconds`` is the catch-up until the room actor
has also indexed them (it does once it has applied everything); ``index_seconds`` of the snapshot
is indexing its facts after the install, as the room actor would next.

*Steps* (``--steps``): where the catch-up's time beyond opening goes, in µs per op, each step
timed alone on the same ops (one thread, best of 3, in CPU seconds, no profiler): decoding the
opened plaintexts, the memory follower and core applying them in batches of ``BATCH``, writing
the rows at each batch's end, and indexing the records for search after the batches committed.

*Appliers* (``--appliers``): what a real daemon adds per op that this catch-up does not count:
each applier its features plug in besides memory's (a ``Daemon`` built on a store of its own,
not started), timed alone on the same memory ops in transactions of ``BATCH`` inside the
daemon's apply scopes, as a room actor runs them; µs per op in CPU seconds, best of 3.

The network is not included (loopback adds roughly one round trip per batch).
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import nacl.utils
import trio
import trio.testing

from crosstalk import crypto
from crosstalk.actors import room_open
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import BATCH, Applier, ApplyScope, RoomActor
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.memory import MemoryState, canonical_bytes
from crosstalk.core.memory_transfer import pack_snapshot, signed_message
from crosstalk.core.room import Applied
from crosstalk.core.words import WORDS
from crosstalk.daemon.tree import Daemon
from crosstalk.paths import Home
from crosstalk.store import memory as m
from crosstalk.store import search_index
from crosstalk.store.db import Store, connect
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room
from crosstalk.wire.memory import FactAdd, FactConfirm, MemoryOp, OpContext, TaskAdd, TaskClaim
from crosstalk.wire.room_ops import (
    MemoryEnvelope,
    SyncChunk,
    decode_op,
    encode_op,
    frame_body,
    unframe_body,
)

ROOM = "bench-room"
ME = crypto.Keys(nacl.utils.random(32), nacl.utils.random(32))
PEER = crypto.Keys(nacl.utils.random(32), nacl.utils.random(32))
KEY = nacl.utils.random(32)


def _database_rows(conn: Any) -> None:
    add_room(conn, Room(ROOM, "peer", "direct", "joined", 0, 0.0), KEY)
    add_member(conn, RoomMember(ROOM, PEER.fingerprint, "peer", PEER.ed_pub, PEER.x_pub))


def _database(path: Path) -> Any:
    conn = connect(path)
    conn.execute("BEGIN")
    _database_rows(conn)
    conn.execute("COMMIT")
    return conn


def _op(n: int) -> MemoryOp:
    kind = n % 4
    if kind == 0:
        return FactAdd(f"f{n}", f"fact number {n}: " + "the upload path retries " * 8, ("api",))
    if kind == 1:
        return FactConfirm(f"f{n - 1}")
    if kind == 2:
        return TaskAdd(f"t{n}", f"task number {n}")
    return TaskClaim(f"t{n - 1}")


def _bodies(count: int) -> list[bytes]:
    bodies = []
    for n in range(count):
        plaintext = encode_op(MemoryEnvelope(_op(n), at=1000.0 + n, label="peer"))
        sealed = crypto.seal_op(PEER, KEY, plaintext, room_id=ROOM, epoch=0, op_id=f"op{n}",
                                nonce=nacl.utils.random(24))
        bodies.append(frame_body(0, sealed))
    return bodies


async def _catch_up(path: Path, count: int) -> tuple[float, float, float]:
    """Seconds the room actor takes to apply the ``count`` ops committed in ``path``, the CPU
    seconds of that (both opening threads), and the seconds until it has indexed them for
    search too."""
    store = await Store.open(path)
    follower = MemoryFollower(ME.fingerprint)
    done = trio.Event()

    async def heard(applied: list[Applied]) -> None:
        if applied[-1].seq == count:
            done.set()

    link_send, _link_receive = trio.open_memory_channel[LinkCommand](1)
    relay = RelayClient(link_send, LinkTimings())
    actor = RoomActor(room_id=ROOM, store=store, keys=ME, relay=relay,
                      appliers=[follower.applied], scopes=[follower.batch], on_applied=heard)
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=60.0)
        await nursery.start(supervisor.run)
        started, cpu = time.perf_counter(), time.process_time()
        await supervisor.start_actor(f"room-{ROOM}", actor)  # it catches up as it starts
        await done.wait()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        await trio.testing.wait_all_tasks_blocked()  # the actor has indexed and waits for more
        indexed = time.perf_counter() - started
        nursery.cancel_scope.cancel()
    assert not await store.read(search_index.unindexed)
    await store.close()
    return elapsed, cpu, indexed


def missed_ops(count: int, workdir: Path) -> dict[str, float]:
    bodies = _bodies(count)
    conn = _database(workdir / "ops.db")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?, 0)",
        [(ROOM, f"op{n}", n + 1, PEER.fingerprint, body, 1000.0 + n)
         for n, body in enumerate(bodies)],
    )
    conn.execute("COMMIT")
    conn.close()
    elapsed, cpu, indexed = trio.run(_catch_up, workdir / "ops.db", count)
    conn = connect(workdir / "ops.db")
    assert m.cursor(conn, ROOM).last_seq == count
    conn.close()
    return {"ops": count, "seconds": elapsed, "cpu_seconds": cpu, "indexed_seconds": indexed,
            "bytes": float(sum(len(b) for b in bodies))}


def open_floor(count: int) -> dict[str, float]:
    """Seconds to open ``count`` ops alone, on one thread and as the room actor opens a batch."""
    jobs = []
    for n, body in enumerate(_bodies(count)):
        epoch, sealed = unframe_body(body)
        jobs.append(room_open.ToOpen(KEY, sealed, PEER.ed_pub, epoch, f"op{n}"))
    started = time.perf_counter()
    opened = room_open.open_inline(ROOM, jobs)
    one_thread = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    for first in range(0, count, BATCH):
        room_open.open_all(ROOM, jobs[first : first + BATCH])
    as_the_actor, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert all(isinstance(plain, bytes) for plain in opened)
    return {"ops": count, "one_thread_seconds": one_thread, "as_actor_seconds": as_the_actor,
            "as_actor_cpu_seconds": cpu}


def _step_times(plains: list[bytes], conn: Any) -> dict[str, float]:
    """Seconds of each step beyond opening, for ``plains`` applied into ``conn``."""
    started = time.process_time()
    ops = [decode_op(p) for p in plains]
    times = {"decode": time.process_time() - started, "apply": 0.0, "write": 0.0}
    follower = MemoryFollower(ME.fingerprint)
    for first in range(0, len(ops), BATCH):
        conn.execute("BEGIN")
        scope = follower.batch(conn)
        scope.__enter__()
        started = time.process_time()
        for n in range(first, min(first + BATCH, len(ops))):
            follower.applied(conn, Applied(ROOM, n + 1, f"op{n}", PEER.fingerprint, 1000.0 + n,
                                           ops[n]))
        times["apply"] += time.process_time() - started
        started = time.process_time()
        scope.__exit__(None, None, None)
        times["write"] += time.process_time() - started
        conn.execute("COMMIT")
    started = time.process_time()
    while True:
        conn.execute("BEGIN")
        taken = search_index.index_records(conn)
        conn.execute("COMMIT")
        if not taken:
            break
    times["index"] = time.process_time() - started
    return times


def steps(count: int, workdir: Path) -> dict[str, float]:
    """µs per op of each step beyond opening (best of 3 runs)."""
    plains = [encode_op(MemoryEnvelope(_op(n), at=1000.0 + n, label="peer"))
              for n in range(count)]
    best: dict[str, float] = {}
    for run in range(3):
        conn = _database(workdir / f"steps{run}.db")
        for step, seconds in _step_times(plains, conn).items():
            best[step] = min(best.get(step, seconds), seconds)
        conn.close()
    return {step: 1e6 * seconds / count for step, seconds in best.items()}


def _name(applier: Applier) -> str:
    func = getattr(applier, "func", applier)  # a functools.partial's function
    return f"{func.__module__}.{func.__qualname__}"


async def _daemon_appliers(workdir: Path, count: int) -> dict[str, float]:
    """µs per memory op of each applier a real daemon runs besides memory's own (CPU, best of
    3, in transactions of ``BATCH``): the bench's catch-up installs the memory applier alone."""
    store = await Store.open(workdir / "appliers.db")
    (workdir / "home").mkdir()
    daemon = Daemon(Home.resolve(str(workdir / "home")), store, Supervisor(heartbeat=60.0), 60.0)
    await daemon.ensure_identity("me")
    await store.write(lambda conn: _database_rows(conn))
    others = [a for a in daemon.seams.appliers
              if not _name(a).startswith("crosstalk.features.memory.")]
    scopes = daemon.seams.apply_scopes
    entries = [Applied(ROOM, n + 1, f"op{n}", PEER.fingerprint, 1000.0 + n,
                       MemoryEnvelope(_op(n), at=1000.0 + n, label="peer")) for n in range(count)]
    result: dict[str, float] = {}
    for applier in others:
        best = float("inf")
        for _run in range(3):
            spent = 0.0
            for first in range(0, count, BATCH):
                timed = functools.partial(_timed_batch, applier=applier, scopes=scopes,
                                          part=entries[first : first + BATCH])
                spent += await store.write(timed, durable=False)
            best = min(best, spent)
        result[_name(applier)] = 1e6 * best / count
    await store.close()
    return result


def _timed_batch(
    conn: Any, *, applier: Applier, part: list[Applied], scopes: list[ApplyScope]
) -> float:
    started = time.process_time()
    with ExitStack() as stack:  # as the room actor applies a batch: inside every apply scope
        for scope in scopes:
            stack.enter_context(scope(conn))
        for entry in part:
            applier(conn, entry)
    return time.process_time() - started


def daemon_appliers(count: int, workdir: Path) -> dict[str, float]:
    by_applier = trio.run(_daemon_appliers, workdir, count)
    return {"total": sum(by_applier.values()), **by_applier}


def _big_state(facts: int) -> MemoryState:
    """``facts`` facts of about 250 characters of varied words (so compression is not flattered)."""
    state = MemoryState(ROOM)
    rng = random.Random(7)
    for n in range(facts):
        text = f"fact {n}: " + " ".join(rng.choice(WORDS) for _ in range(60))
        ctx = OpContext(seq=n + 1, op_id=f"op{n}", sender=PEER.fingerprint, sender_label="peer",
                        ts=1000.0 + n)
        state.apply(FactAdd(f"f{n:05d}", text[:250], ("api",)), ctx)
    return state


def snapshot(facts: int, workdir: Path) -> dict[str, float]:
    source = _big_state(facts)
    started = time.perf_counter()
    snap = source.snapshot()
    digest, pieces = pack_snapshot(snap)
    sig = crypto.sign(PEER, signed_message(ROOM, "req", snap.last_seq, digest))
    send_s = time.perf_counter() - started
    chunks = [SyncChunk("req", snap.last_seq, i, len(pieces), digest, sig, p)
              for i, p in enumerate(pieces)]
    conn = _database(workdir / "snap.db")
    follower = MemoryFollower(ME.fingerprint)
    conn.execute("BEGIN")
    m.set_hole(conn, ROOM, 1)
    m.set_request(conn, ROOM, "req", PEER.fingerprint, 0.0)
    conn.execute("COMMIT")
    started = time.perf_counter()
    conn.execute("BEGIN")
    for i, chunk in enumerate(chunks):
        seq = snap.last_seq + 1 + i
        follower.applied(conn, Applied(ROOM, seq, f"c{i}", PEER.fingerprint, 0.0, chunk))
    conn.execute("COMMIT")
    receive_s = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute("BEGIN")
    search_index.index_all(conn)
    conn.execute("COMMIT")
    index_s = time.perf_counter() - started
    assert m.cursor(conn, ROOM).hole_from is None
    assert len(m.load_state(conn, ROOM).facts()) == facts
    conn.close()
    wire = sum(len(encode_op(c)) for c in chunks)
    return {
        "facts": facts, "canonical_bytes": float(len(canonical_bytes(snap))),
        "compressed_bytes": float(sum(len(p) for p in pieces)), "pieces": float(len(pieces)),
        "wire_bytes": float(wire), "send_seconds": send_s, "receive_seconds": receive_s,
        "index_seconds": index_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--steps", action="store_true", help="also time each step beyond opening")
    parser.add_argument("--appliers", action="store_true",
                        help="also time the appliers a daemon runs besides memory's, per op")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = {"missed_ops": missed_ops(args.ops, Path(tmp)),
                  "open_floor": open_floor(args.ops),
                  "snapshot": snapshot(args.facts, Path(tmp))}
        if args.steps:
            result["steps_us_per_op"] = steps(args.ops, Path(tmp))
        if args.appliers:
            result["daemon_appliers_us_per_op"] = daemon_appliers(args.ops, Path(tmp))
    if args.json:
        print(json.dumps(result))
        return
    ops, snap, floor = result["missed_ops"], result["snapshot"], result["open_floor"]
    print(f"{ops['ops']:.0f} missed ops: {ops['seconds']:.2f} s (CPU {ops['cpu_seconds']:.2f} s; "
          f"{ops['indexed_seconds']:.2f} s indexed for search too), {ops['bytes'] / 1e6:.2f} MB")
    print(f"opening them alone: {floor['one_thread_seconds']:.2f} s on one thread, "
          f"{floor['as_actor_seconds']:.2f} s as the room actor opens batches "
          f"(CPU {floor['as_actor_cpu_seconds']:.2f} s)")
    print(f"{snap['facts']:.0f}-fact snapshot: {snap['canonical_bytes'] / 1e6:.2f} MB canonical, "
          f"{snap['compressed_bytes'] / 1e6:.2f} MB compressed in {snap['pieces']:.0f} pieces "
          f"({snap['wire_bytes'] / 1e6:.2f} MB as ops); send {snap['send_seconds']:.2f} s, "
          f"receive+install {snap['receive_seconds']:.2f} s, then indexed for search "
          f"{snap['index_seconds']:.2f} s")
    if args.steps:
        print("beyond opening, µs per op: " + ", ".join(
            f"{step} {us:.1f}" for step, us in result["steps_us_per_op"].items()))
    if args.appliers:
        print("a daemon's other appliers, µs per memory op (CPU): " + ", ".join(
            f"{name.rsplit('.', 2)[-2]}.{name.rsplit('.', 1)[-1]} {us:.2f}"
            for name, us in result["daemon_appliers_us_per_op"].items() if name != "total")
            + f"; total {result['daemon_appliers_us_per_op']['total']:.1f}")


if __name__ == "__main__":
    main()
