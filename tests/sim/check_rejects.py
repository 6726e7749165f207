"""``rejected``: nothing a member sent is thrown away by another member for a reason the world
does not explain.

A room actor rejects an op for good (``sim_hooks.probe("room.rejected")``) only when it can never
open: sealed under an epoch from before we joined (``room.rejected_old_epoch``, which an honest
room can produce: a member posting under the key a rekey just replaced), or a body that does not
open or verify (no relay in the simulation forges ops: its lies are about membership). Anything
else rejected was an op an honest member sent while the receiver was a member, and it is lost to
that receiver: an op whose sender the roster has not brought yet must be held (issue 40: that
mutation once survived every seed). Counted per run, so it is lenient (the old-epoch probe also
counts the look-ahead's quiet decisions), never strict.
"""

from __future__ import annotations

from typing import Any

from tests.sim.truth import Failure, Truth
from tests.sim.world import World


def check_rejected(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    del truth, states
    rejected = world.coverage.get("probe:room.rejected", 0)
    if not rejected:
        return []
    world.count("check:rejected")
    explained = world.coverage.get("probe:room.rejected_old_epoch", 0)
    if rejected <= explained:
        return []
    return [Failure("rejected", f"{rejected - explained} of {rejected} ops rejected for no "
                    "reason the world explains (not an old epoch)")]
