"""Scenarios 5 and 6: ``kill -9`` at random moments during a message exchange, again and again:
of a daemon (either side, chosen by the seeded random) and of the relay (restarted at once on the
same data directory and port).

One exchange of ``MESSAGES`` messages (ana and ben alternate, each reads every few sends) is cut
into ``KILLS`` rounds; in each round a killer thread fires after a seeded random delay while the
sends and reads are in flight, so a kill can land inside a send, a read, a commit or an ack. A send
the daemon never answered is ``unanswered`` (it may or may not arrive); every answered send must
arrive exactly once.
"""

from __future__ import annotations

import os
import random
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from tests.e2e.conftest import pid_alive, wait_until
from tests.resilience.conftest import Relay, paired
from tests.resilience.harness import Peer, Tally, drain_reads

SEED = 11
# The issue asks for 20 repetitions of a 500-message exchange; that is 10,000 messages and 20
# process restarts per scenario, far past the suite's time budget. Each scenario runs one exchange
# of MESSAGES messages with KILLS kills instead (docs/resilience.md states these numbers).
MESSAGES = 200
KILLS = 10
READ_EVERY = 5
# Seconds into a round at which the kill fires: inside the round's sends, which take about 0.2 s
# on a quiet machine (more under load). With 0.05-1.5 s, 9 of 10 kills came after the sends were
# done, on an idle daemon, and the test waited the rest of the window for nothing.
KILL_WINDOW = (0.01, 0.2)


def _exchange(
    tally: Tally, ana: Peer, ben: Peer, kill: Callable[[], None], rng: random.Random
) -> list[float]:
    """Run the exchange with one kill per round; returns the kill delays used."""
    per_round = MESSAGES // KILLS
    delays = []
    for round_ in range(KILLS):
        delay = round(rng.uniform(*KILL_WINDOW), 3)
        delays.append(delay)
        failures: list[BaseException] = []
        killer = threading.Timer(delay, _guarded, args=(kill, failures))
        killer.start()
        try:
            for n in range(per_round):
                sender, receiver = (ana, ben) if n % 2 == 0 else (ben, ana)
                if tally.send(sender, receiver, f"round {round_} message {n}") is None:
                    killer.join(timeout=KILL_WINDOW[1] + 30)  # let the restart finish first
                if n % READ_EVERY == 0:
                    tally.read(receiver)
        finally:
            killer.join(timeout=KILL_WINDOW[1] + 30)
        assert not killer.is_alive()
        if failures:
            raise failures[0]
    return delays


def _guarded(kill: Callable[[], None], failures: list[BaseException]) -> None:
    """Run ``kill`` in the killer thread; a failure is handed to the test thread, not swallowed."""
    try:
        kill()
    except BaseException as exc:
        failures.append(exc)


def _kill_9(peer: Peer) -> None:
    pid = peer.daemon_pid()
    if pid is None:
        return
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(pid), timeout=10, what=f"{peer.name}'s daemon to die")


def test_daemon_kill_9_at_random_moments_loses_and_repeats_nothing(
    short_tmp: Path, relay: Relay, crowd: list[Peer], tally: Tally
) -> None:
    """kill -9 of either daemon, 10 times in 200 messages: each answered send arrives once."""
    ana, ben = paired(short_tmp, relay.url, relay.url, crowd)
    rng = random.Random(SEED)
    victims: list[str] = []

    def kill() -> None:
        victim = rng.choice([ana, ben])
        victims.append(victim.name)
        _kill_9(victim)
        victim.start_daemon()

    delays = _exchange(tally, ana, ben, kill, rng)
    tally.wait_delivered(ana, ben, timeout=120)
    drain_reads(tally, ana, ben)
    tally.record_restarts(ana, ben)
    tally.notes.update(seed=SEED, kills=len(victims), victims=victims, kill_delays_s=delays)
    assert len(victims) == KILLS
    tally.assert_clean()


def test_relay_kill_9_at_random_moments_loses_and_repeats_nothing(
    short_tmp: Path, relay: Relay, crowd: list[Peer], tally: Tally
) -> None:
    """kill -9 of the relay (restarted at once, same port and data), 10 times in 200 messages."""
    ana, ben = paired(short_tmp, relay.url, relay.url, crowd)
    rng = random.Random(SEED)

    def kill() -> None:
        relay.kill(signal.SIGKILL)
        relay.start()

    delays = _exchange(tally, ana, ben, kill, rng)
    tally.wait_delivered(ana, ben, timeout=180)
    drain_reads(tally, ana, ben)
    tally.record_restarts(ana, ben)
    tally.notes.update(seed=SEED, relay_restarts=relay.restarts, kill_delays_s=delays)
    assert relay.restarts == KILLS
    tally.assert_clean()
