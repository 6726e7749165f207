"""Scenarios 10 and 12: a partition during a task claim (one winner everywhere once it heals), and
a flapping link (the proxy toggling ``freeze``/``pass`` every 200 ms for 30 s) while messages flow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import wait_until
from tests.resilience.conftest import Relay, paired
from tests.resilience.harness import Peer, ProxyProcess, Tally, drain_reads, link_connected

FLAP_PERIOD = 0.2
FLAP_FOR = 30.0
PARTITIONS = ("freeze", "partition up", "partition down")
# The claim race's heartbeat: a claim made while the link looks up waits two heartbeats for its
# outcome before answering `pending`, and the link notices a partition within a heartbeat; both
# scale with it, so a 2 s heartbeat is the same race as the default 5 s one, 18 s sooner.
CLAIM_HEARTBEAT = 2.0


def _claimers(peer: Peer) -> dict[str, str | None]:
    return {t["id"]: t["claimed_by"] for t in peer.call("tasks", {})["tasks"]}


def test_a_claim_race_across_a_partition_has_one_winner_after_it_heals(
    short_tmp: Path,
    relay: Relay,
    proxies: Callable[[str], ProxyProcess],
    crowd: list[Peer],
    tally: Tally,
) -> None:
    """ana is cut off (both ways, then each way alone); both claim; after healing both agree."""
    proxy = proxies("ana")
    ana, ben = paired(short_tmp, proxy.url, relay.url, crowd, heartbeat=CLAIM_HEARTBEAT)
    tasks = [ben.call("task_add", {"text": f"task behind {how}"})["id"] for how in PARTITIONS]
    wait_until(lambda: set(_claimers(ana)) == set(tasks), timeout=30, what="tasks at ana's")
    answers: dict[str, dict[str, Any]] = {}
    for how, task in zip(PARTITIONS, tasks, strict=True):
        proxy.command(how)
        answers[how] = {
            "ana": ana.call("task_claim", {"id": task}),
            "ben": ben.call("task_claim", {"id": task}),
        }
        tally.send(ana, ben, f"posted behind {how}")
        tally.send(ben, ana, f"posted towards {how}")
        proxy.command("pass")
        wait_until(lambda: link_connected(ana), timeout=30, what="ana's link after healing")

    def agreed() -> bool:
        mine, theirs = _claimers(ana), _claimers(ben)
        return mine == theirs and all(mine[t] is not None for t in tasks)

    wait_until(agreed, timeout=60, what="both replicas to agree on every claim")
    tally.wait_delivered(ana, ben, timeout=60)
    drain_reads(tally, ana, ben)
    winners = _claimers(ana)
    tally.notes.update(
        claims={how: {who: a["outcome"] for who, a in answers[how].items()} for how in PARTITIONS},
        winners={how: winners[task] for how, task in zip(PARTITIONS, tasks, strict=True)},
    )
    tally.record_restarts(ana, ben)
    for how in PARTITIONS:
        outcomes = [answers[how][who]["outcome"] for who in ("ana", "ben")]
        assert outcomes.count("won") <= 1, answers[how]  # never two winners told "won"
    assert set(winners.values()) <= {"ana", "ben"}
    tally.assert_clean()


def test_a_flapping_link_delivers_every_message_once(
    short_tmp: Path,
    relay: Relay,
    proxies: Callable[[str], ProxyProcess],
    crowd: list[Peer],
    tally: Tally,
) -> None:
    """ana's link freezes and thaws every 200 ms for 30 s while both send: all arrive once."""
    proxy = proxies("ana")
    ana, ben = paired(short_tmp, proxy.url, relay.url, crowd)
    stop = threading.Event()
    toggles: list[int] = []

    def flap() -> None:
        frozen = False
        count = 0
        deadline = time.monotonic() + FLAP_FOR
        while not stop.is_set() and time.monotonic() < deadline:
            frozen = not frozen
            proxy.command("freeze" if frozen else "pass")
            count += 1
            stop.wait(FLAP_PERIOD)
        proxy.command("pass")
        toggles.append(count)

    flapper = threading.Thread(target=flap)
    flapper.start()
    started = time.monotonic()
    try:
        n = 0
        while time.monotonic() - started < FLAP_FOR - 2:
            tally.send(ana, ben, f"through the flap {n}")
            tally.send(ben, ana, f"back through the flap {n}")
            if n % 5 == 0:
                tally.read(ana)
                tally.read(ben)
            n += 1
    finally:
        stop.set()
        flapper.join(timeout=FLAP_FOR + 10)
    assert not flapper.is_alive() and toggles and toggles[0] >= 20, toggles
    tally.wait_delivered(ana, ben, timeout=90)
    drain_reads(tally, ana, ben)
    tally.record_restarts(ana, ben)
    stats = proxy.command("stats")
    tally.notes.update(toggles=toggles[0], proxy_connections=stats["connections"])
    tally.assert_clean()
