"""A room of real daemons: building it, and a room op's way to its last member.

Run: ``python -m bench.big_room [--members 20] [--ops 30] [--quick] [--json]``.

One relay process and ``--members`` homes, each with its own daemon process, on this machine.
The first (the host) pairs with every other through the real CLI (``room new`` / ``room join``).
Then, timed as *building*, it creates a shared room, invites everyone and each accepts (the
``room_create``, ``room_invite`` and ``room_accept`` ops over the control socket, so no CLI
start-up is counted). The baseline, in the same run and on the same daemons, is the room of two
the host shares with the first guest since pairing.

Latency is a room op, one at a time: the host adds a fact (``fact_add``, through its control
socket) and the clock stops when the *last* other member's store holds it (``memory_records``,
polled read-only). The same on the room of two first; the ratio column compares the two.
With each, the CPU per op of the relay, of the host's daemon, of the guests' daemons (all and
the busiest) and of this process's polling: all share this machine's cores, so the room's
latency is bounded below by the CPU its members need per op divided by the cores.
Every process is stopped by its pid.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import cpu_seconds, progress, summary_ms
from crosstalk.client import call
from crosstalk.paths import Home
from tests.e2e.conftest import Person, read_json_line, reap, stop_pid
from tests.relay.process import RelayProcess

ARRIVAL_TIMEOUT = 60.0
WARM = 2  # ops before the timed ones
SETTLE_TIMEOUT = 600.0
SLOT_PACE = 2.0  # seconds between asks while the relay says rate_limited


def _held_everywhere(dbs: list[Path], record_id: str, timeout: float) -> None:
    """Return once every store in ``dbs`` holds the memory record ``record_id`` (bounded)."""
    deadline = time.monotonic() + timeout
    conns = [sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0) for db in dbs]
    try:
        waiting = list(conns)
        while waiting:
            waiting = [c for c in waiting if c.execute(
                "SELECT 1 FROM memory_records WHERE record_id = ?", (record_id,)).fetchone()
                is None]
            if waiting and time.monotonic() > deadline:
                raise TimeoutError(f"{len(waiting)} member(s) lack {record_id} after {timeout} s")
            if waiting:
                time.sleep(0.0005)
    finally:
        for conn in conns:
            conn.close()


def _fan_out(host: Home, room: str, others: list[Home], ops: int) -> list[float]:
    """Seconds from each ``facts add`` at the host until every other member holds it; the
    first :data:`WARM` ones (which warm the path up) come first and are not timed."""
    samples = []
    for i in range(ops + WARM):
        start = time.perf_counter()
        reply = call(host, "fact_add", {"text": f"bench fact {i} in {room}", "room": room})
        _held_everywhere([o.database for o in others], str(reply["id"]), ARRIVAL_TIMEOUT)
        samples.append(time.perf_counter() - start)
    return samples


def _settled(host_db: Path, guest_dbs: list[Path], name: str, timeout: float) -> float:
    """Seconds until no guest's memory of room ``name`` has a hole (bounded).

    A member who joins after ops were sequenced in a room (the host's key shares, the
    sessions members publish) has a hole in its memory from seq 1 and asks the members in turn
    for a snapshot, waiting for each; a member with a hole of its own does not answer. Built
    from 19 newcomers at once, a room of 20 took minutes to settle, and a fact added meanwhile
    waits for it: that is timed here, not as the fact's latency.
    """
    with contextlib.closing(sqlite3.connect(f"file:{host_db}?mode=ro", uri=True)) as conn:
        (room_id,) = conn.execute("SELECT room_id FROM rooms WHERE name = ?", (name,)).fetchone()
    start = time.perf_counter()
    waiting = list(guest_dbs)
    while waiting:
        waiting = [db for db in waiting if _has_hole(db, room_id)]
        if waiting and time.perf_counter() - start > timeout:
            raise TimeoutError(f"{len(waiting)} member(s) still have a memory hole in the "
                               f"room after {timeout:.0f} s")
        if waiting:
            time.sleep(0.2)
    return time.perf_counter() - start


def _has_hole(db: Path, room_id: str) -> bool:
    """Whether the member's memory of the room waits for a snapshot (no row: nothing waits)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)) as c:
        row = c.execute("SELECT hole_from FROM memory_rooms WHERE room_id = ?",
                        (room_id,)).fetchone()
    return row is not None and row[0] is not None


def _build(host: Home, guests: list[Home], names: list[str], room: str) -> float:
    """Create ``room``, invite every guest, each accepts (control requests, so no CLI start-up
    is counted); seconds until the last has accepted."""
    start = time.perf_counter()
    call(host, "room_create", {"name": room})
    call(host, "room_invite", {"room": room, "peers": names}, timeout=120.0)
    for guest in guests:
        call(guest, "room_accept", {"room": room}, timeout=120.0)
    return time.perf_counter() - start


def _pair_paced(host: Person, guest: Person, within: float = 300.0) -> None:
    """Pair ``host`` and ``guest`` through the CLI, waiting out the relay's per-identity limit
    on pairing slots (bursts of 6, then one per 10 s) that pairing one host with 19 guests
    meets: ``room new`` answers ``rate_limited``, and is asked again a little later."""
    deadline = time.monotonic() + within
    while True:
        new = host.spawn("room", "new", "--json", "--label", host.home.name)
        try:
            invite = read_json_line(new, timeout=60)
            code = invite.get("error", {}).get("code")
            if code == "rate_limited" and time.monotonic() < deadline:
                time.sleep(SLOT_PACE)
                continue
            if code is not None:
                raise RuntimeError(f"room new failed: {invite['error']}")
            guest.json("room", "join", invite["invite"], "--label", guest.home.name)
            read_json_line(new, timeout=60)
            return
        finally:
            reap(new)


def run(members: int, ops: int) -> dict[str, Any]:
    """Measure; a JSON-ready dict. A failed run keeps its directory (every daemon's log)."""
    tmp = Path(tempfile.mkdtemp(prefix="ctb-", dir="/tmp"))
    # Every process is on 127.0.0.1: one address, whose pairing slots are limited too.
    relay = RelayProcess(tmp / "relay", tmp / "relay.stderr", "--slot-rate", "1000")
    people: list[Person] = []
    try:
        relay.start()
        result = _measure(relay, people, tmp, members, ops)
    except BaseException:
        progress(f"failed; the homes, their daemon logs and the relay's are kept in {tmp}")
        raise
    finally:  # before the homes go: each daemon's pid is read from its home
        for person in people:
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
        relay.kill(signal.SIGTERM)
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def _measure(relay: RelayProcess, people: list[Person], tmp: Path, members: int, ops: int
             ) -> dict[str, Any]:
    """Pair, time the room of 2, build the big room, time it (``people`` fills as they come)."""
    url = f"ws://127.0.0.1:{relay.port}"
    host = Person(tmp / "host", url)
    people.append(host)
    for n in range(1, members):
        progress(f"pairing the host with guest {n} of {members - 1}")
        guest = Person(tmp / f"g{n:03d}", url)
        people.append(guest)
        _pair_paced(host, guest)
    homes = [Home.resolve(str(p.home)) for p in people]
    direct = next(r["id"] for r in host.json("room", "list")["rooms"]
                  if r["kind"] == "direct" and any(m["label"] == "g001" for m in r["members"]))
    pids = _pids(relay, people)
    progress("room of 2: facts one at a time")
    cpu = _cpu(pids)
    two = _fan_out(homes[0], direct, homes[1:2], ops)
    two_cpu = _cpu_per_op(cpu, _cpu(pids), len(two))
    progress(f"building the room of {members}")
    built = _build(homes[0], homes[1:], [p.home.name for p in people[1:]], "big")
    progress(f"room of {members}: waiting until every member's memory has no hole")
    settled = _settled(homes[0].database, [h.database for h in homes[1:]], "big", SETTLE_TIMEOUT)
    progress(f"room of {members}: facts one at a time")
    cpu = _cpu(pids)
    big = _fan_out(homes[0], "big", homes[1:], ops)
    big_cpu = _cpu_per_op(cpu, _cpu(pids), len(big))
    base, wide = summary_ms(two[WARM:]), summary_ms(big[WARM:])
    wide["first_ms"] = round(big[0] * 1000, 1)  # the first fact after the room was built
    return {"members": members, "ops": ops, "build_s": round(built, 2),
            "memory_settled_s": round(settled, 1),
            "room_of_2": base, f"room_of_{members}": wide,
            "p50_ratio": round(wide["p50_ms"] / base["p50_ms"], 2),
            "cpu_ms_per_op": {"room_of_2": two_cpu, f"room_of_{members}": big_cpu}}


def _pids(relay: RelayProcess, people: list[Person]) -> dict[str, int]:
    """The processes whose CPU is counted: the relay, the host's daemon, each guest's."""
    assert relay.proc is not None
    pids = {"relay": relay.proc.pid}
    for i, person in enumerate(people):
        pid = person.daemon_pid()
        assert pid is not None, f"{person.home.name} has no daemon"
        pids["host" if i == 0 else person.home.name] = pid
    return pids


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    return {"bench": cpu_seconds(), **{name: cpu_seconds(pid) for name, pid in pids.items()}}


def _cpu_per_op(before: dict[str, float], after: dict[str, float], ops: int
                ) -> dict[str, float]:
    """CPU milliseconds per op: the relay, the host's daemon, all guests' daemons together and
    the busiest guest's, and this process (which polls every member's store)."""
    spent = {name: (after[name] - before[name]) * 1000 / ops for name in before}
    guests = [v for name, v in spent.items() if name not in ("bench", "relay", "host")]
    return {"relay": round(spent["relay"], 2), "host": round(spent["host"], 2),
            "guests_total": round(sum(guests), 2), "busiest_guest": round(max(guests), 2),
            "bench_poller": round(spent["bench"], 2)}


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--ops", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="4 members, 3 ops: a smoke run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    members, ops = (4, 3) if args.quick else (args.members, args.ops)
    result = run(members, ops)
    if args.json:
        print(json.dumps(result))
        return
    print(f"room of {members}: built in {result['build_s']} s; fact → last member p50 "
          f"{result[f'room_of_{members}']['p50_ms']} ms ({result['p50_ratio']}× a room of 2); "
          f"memory settled {result['memory_settled_s']} s after the build; "
          f"CPU ms per op: {result['cpu_ms_per_op']}")


if __name__ == "__main__":
    main()
