"""The daemon's control ops, grouped by what they touch. ``register_all`` adds every one."""

from __future__ import annotations

from crosstalk import inbox
from crosstalk.actors.control import OpTable
from crosstalk.daemon import Daemon
from crosstalk.features.decisions import ops as decisions
from crosstalk.features.membership import ops as membership
from crosstalk.features.presence import ops as presence
from crosstalk.features.retention import ops as retention
from crosstalk.features.threads import ops as threads
from crosstalk.features.ui import ops as ui
from crosstalk.ops import (
    ask_ops,
    core_ops,
    identity_ops,
    link_ops,
    memory_ops,
    message_ops,
    pairing_ops,
    peers_ops,
    read_ops,
    room_admin_ops,
    trust_ops,
)


def register_all(ops: OpTable, daemon: Daemon) -> None:
    """Register every control op against ``daemon``."""
    core_ops.register(ops, daemon)
    identity_ops.register(ops, daemon)
    pairing_ops.register(ops, daemon)
    link_ops.register(ops, daemon)
    room_admin_ops.register(ops, daemon)
    membership.register(ops, daemon)  # keys for joiners who accepted with an older one
    message_ops.register(ops, daemon)
    read_ops.register(ops, daemon)
    ask_ops.register(ops, daemon)
    peers_ops.register(ops, daemon)
    trust_ops.register(ops, daemon)
    inbox.register(ops, daemon)  # Claude Code inbox-socket push of what the gate surfaced
    memory_ops.register(ops, daemon)
    decisions.register(ops, daemon)  # others' decisions announced through the gate
    ui.register(ops, daemon)  # the local web page (`crosstalk ui`)
    presence.register(ops, daemon)  # our sessions told to roommates, theirs kept for peers
    threads.register(ops, daemon)  # thread ID, thread close ID --summary
    retention.register(ops, daemon)  # `prune`, and the daily default retention
