"""bench/send_passes.py counts scheduler passes, which do not depend on the machine: the counts
of the send path after issue 41 are held here, so a hand-off added back shows as a failure."""

from __future__ import annotations

import trio

from bench.send_passes import _count


def test_a_send_reaches_the_socket_and_its_caller_in_few_passes() -> None:
    """Three sends and three arrivals: the post frame reaches the socket within 5 passes, the
    caller hears ``queued`` within 4, and an arrival is applied within 4 (8, 9 and 5 before)."""
    counts = trio.run(_count, 3)
    assert max(counts["passes_to_socket"]) <= 5
    assert max(counts["passes_to_reply"]) <= 4
    assert len(counts["passes_to_applied"]) == 3
    assert max(counts["passes_to_applied"]) <= 4
