"""How many scheduler passes and task steps a send takes inside one daemon, counted, not timed.

Run: ``python -m bench.send_passes [--sends N] [--json]``.

One daemon (real store, supervisor, room actor and relay link) linked to an in-memory relay
(tests/actors' ``FakeRelay``: the real relay core behind memory-channel sockets), so the count is
the daemon's own and the same on every machine. For each send, from the call of ``send_op`` (what
the control connection's task calls for ``send``) a trio instrument counts:

* *passes*: rounds of trio's run loop (each one polls the I/O and then runs every ready task),
* *steps*: task steps (a task run from one ``await`` that yields to the next),

until the post frame reaches the socket's ``send_message``, and until ``send_op`` returns to its
caller (the outbox commit is behind both). Then the other way: from the relay pushing an op of
Ben's until the room's applier sees it (inside the room's apply transaction, after the link's
commit of the op). Each hand-off from one task to another over a channel
costs at least one pass, and so does each store call (its checkpoint) and each socket send: this is
where the scheduler share of the CPU in docs/performance.md comes from.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import tempfile
from pathlib import Path

import attrs
import trio
import trio.testing

from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.daemon.tree import Daemon
from crosstalk.features.feature import Feature, Plugs
from crosstalk.features.membership.history import create_frame
from crosstalk.paths import Home
from crosstalk.store.identity import IdentityRecord, save_identity
from crosstalk.store.settings import RELAY_URL, set_setting
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import MessageOp
from tests.actors.fakes import running
from tests.actors.test_relay_link_fakes import URL, FakeRelay
from tests.actors.test_room_hold import ANA, BEN, ROOM, _sealed, room_store


@attrs.define(eq=False)
class Counter(trio.abc.Instrument):
    """Counts run-loop passes and task steps since the last ``mark``."""

    passes: int = 0
    steps: int = 0

    def before_io_wait(self, timeout: float) -> None:
        self.passes += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1

    def mark(self) -> tuple[int, int]:
        return self.passes, self.steps


class CountingRelay(FakeRelay):
    """The fake relay, noting the counter when a ``post`` frame reaches it."""

    def __init__(self, counter: Counter) -> None:
        super().__init__()
        self.counter = counter
        self.posted_at: tuple[int, int] | None = None

    def received(self, conn: int, text: str) -> None:
        if self.posted_at is None and isinstance(w.decode_client_frame(text), w.Post):
            self.posted_at = self.counter.mark()
        super().received(conn, text)


KEYS = ("passes_to_socket", "steps_to_socket", "passes_to_reply", "steps_to_reply",
        "passes_to_applied", "steps_to_applied")


def _at_fake_relay(conn: sqlite3.Connection) -> None:
    """Point the daemon at the fake relay, which does not know the room yet: no cursor for it,
    so the link's resume does not report it missing (which would mark us removed)."""
    set_setting(conn, RELAY_URL, URL)
    conn.execute("DELETE FROM relay_cursors WHERE room_id = ?", (ROOM,))


async def _count(sends: int) -> dict[str, list[int]]:
    counter = Counter()
    relay = CountingRelay(counter)
    applied: list[tuple[int, int]] = []

    def note(_conn: sqlite3.Connection, _entry: Applied) -> None:
        applied.append(counter.mark())

    probe = Feature("probe", lambda caps: Plugs(appliers=(note,)))
    out: dict[str, list[int]] = {k: [] for k in KEYS}
    with tempfile.TemporaryDirectory(prefix="ct-passes-") as root:
        home = Home(Path(root))
        save_identity(home.identity, IdentityRecord("ana", "m", ANA.ed_seed, ANA.x_secret, 0.0),
                      keyring=False)
        async with room_store() as store, running(Supervisor(heartbeat=5.0)) as sup:
            await store.write(_at_fake_relay)
            daemon = Daemon(home, store, sup, 5.0, features=(probe,), connect=relay.connect)
            await daemon.start()
            await daemon.room_inbox(ROOM)
            create, _ = create_frame(ANA, ROOM)  # the relay has never heard of the room
            await (await daemon.relay()).request(create, w.Ok)
            await trio.testing.wait_all_tasks_blocked()
            trio.lowlevel.add_instrument(counter)
            for i in range(sends):
                await _one_send(daemon, relay, counter, i, out)
            for i in range(sends):
                await _one_arrival(relay, counter, sends + 1 + i, applied, out)
            trio.lowlevel.remove_instrument(counter)
    return out


async def _one_send(
    daemon: Daemon, relay: CountingRelay, counter: Counter, i: int, out: dict[str, list[int]]
) -> None:
    await trio.testing.wait_all_tasks_blocked()
    relay.posted_at = None
    start = counter.mark()
    await daemon.send_op(ROOM, MessageOp(msg_id=f"m{i}", text="hi"), op_id=f"m{i}")
    replied = counter.mark()
    await trio.testing.wait_all_tasks_blocked()
    posted = relay.posted_at or counter.mark()
    out["passes_to_socket"].append(posted[0] - start[0])
    out["steps_to_socket"].append(posted[1] - start[1])
    out["passes_to_reply"].append(replied[0] - start[0])
    out["steps_to_reply"].append(replied[1] - start[1])


async def _one_arrival(
    relay: CountingRelay, counter: Counter, seq: int, applied: list[tuple[int, int]],
    out: dict[str, list[int]],
) -> None:
    """Ben's op pushed by the relay, until the room's applier sees it (inside its commit)."""
    await trio.testing.wait_all_tasks_blocked()
    applied.clear()
    op_id = f"b{seq}"
    push = w.Op(ROOM, seq, BEN.fingerprint, op_id, _sealed(BEN, op_id), 0.0)
    start = counter.mark()
    relay.inject(w.encode_frame(push))
    await trio.testing.wait_all_tasks_blocked()
    if applied:
        out["passes_to_applied"].append(applied[0][0] - start[0])
        out["steps_to_applied"].append(applied[0][1] - start[1])


def run(sends: int) -> dict[str, float]:
    counts = trio.run(_count, sends)
    return {name: statistics.median(values) if values else math.nan
            for name, values in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.sends)
    if args.json:
        print(json.dumps(result))
        return
    for name, value in result.items():
        print(f"{name:>18}: {value:g}")


if __name__ == "__main__":
    main()
