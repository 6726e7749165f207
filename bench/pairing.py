"""Machine time of one full pairing exchange, both sides in one process, no network.

Run: ``python -m bench.pairing [--rounds N] [--json]``.

One round builds two :class:`~crosstalk.core.pairing.PairingMachine` sides with fresh random
entropy, nonces and keys, starts both and carries every message across by hand until both
are DONE: SPAKE2 (pure-Python Ed25519 group), key confirmation, sealed offers. This is the CPU
cost a pairing adds on top of the relay round trips (issue 4's goal: under 1 s wall on loopback).
It also times the SPAKE2 start and finish alone, which dominate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import nacl.utils

from crosstalk import crypto, crypto_pairing
from crosstalk.core.pairing import OfferReceived, PairingMachine, PairingState
from crosstalk.core.words import BYTES_PER_WORD, choose_words
from crosstalk.wire.pairing import Offer, Purpose, Role, RoomGrant


def _offer(role: Role) -> Offer:
    keys = crypto.Keys(nacl.utils.random(32), nacl.utils.random(32))
    room = RoomGrant(room_id="bench", key=nacl.utils.random(32)) if role is Role.INVITER else None
    return Offer(
        label=role.value,
        machine="bench",
        agent=False,
        ed_pub=keys.ed_pub,
        x_pub=keys.x_pub,
        relay_url="ws://127.0.0.1:8787/ws",
        relay_key=nacl.utils.random(32),
        room=room,
    )


def one_pairing() -> None:
    """Run one complete exchange; raise if it does not end DONE with both offers received."""
    words = choose_words(nacl.utils.random(4 * BYTES_PER_WORD), 4)
    sides = {}
    for role in Role:
        machine = PairingMachine(purpose=Purpose.ROOM, role=role, slot="1234")
        machine.start(
            words=words,
            offer=_offer(role),
            offer_nonce=nacl.utils.random(crypto.NONCE_SIZE),
            entropy=nacl.utils.random(crypto_pairing.SPAKE_ENTROPY_SIZE),
        )
        sides[role] = machine
    received = 0
    for _ in range(10):  # three messages each way; bounded
        moved = False
        for role, machine in sides.items():
            for index, data in machine.data_to_send():
                moved = True
                sides[role.other].message_received(index, data)
            received += sum(isinstance(e, OfferReceived) for e in machine.events_received())
        if not moved:
            break
    if received != 2 or any(m.state is not PairingState.DONE for m in sides.values()):
        raise SystemExit("the benchmark pairing did not complete")


def _spake_only() -> None:
    password = crypto_pairing.pairing_password("room", "1234", ["acorn", "apple", "bat", "cow"])
    identity = crypto_pairing.pairing_identity("room", "1234")
    state_a, message_a = crypto_pairing.spake_start(password, identity, nacl.utils.random(64))
    state_b, message_b = crypto_pairing.spake_start(password, identity, nacl.utils.random(64))
    crypto_pairing.spake_finish(state_a, message_b)
    crypto_pairing.spake_finish(state_b, message_a)


def _measure(work: Callable[[], None], rounds: int) -> dict[str, float]:
    work()  # warm-up: imports, caches
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(rounds):
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        work()
        wall.append(time.perf_counter() - wall_start)
        cpu.append(time.process_time() - cpu_start)
    wall.sort()
    return {
        "rounds": rounds,
        "wall_median_ms": round(statistics.median(wall) * 1000, 2),
        "wall_min_ms": round(wall[0] * 1000, 2),
        "wall_p95_ms": round(wall[max(0, int(len(wall) * 0.95) - 1)] * 1000, 2),
        "cpu_mean_ms": round(statistics.fmean(cpu) * 1000, 2),
    }


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {
        "full_exchange_both_sides": _measure(one_pairing, args.rounds),
        "spake2_only_both_sides": _measure(_spake_only, args.rounds),
    }
    if args.json:
        print(json.dumps(results))
        return
    for name, figures in results.items():
        print(
            f"{name}: median {figures['wall_median_ms']} ms wall "
            f"(min {figures['wall_min_ms']}, p95 {figures['wall_p95_ms']}), "
            f"{figures['cpu_mean_ms']} ms CPU mean over {figures['rounds']} rounds"
        )


if __name__ == "__main__":
    main()
