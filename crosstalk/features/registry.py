"""The daemon's features, in the order it plugs them in: :data:`FEATURES`.

The order is written down because it is behaviour, not taste. Each seam runs in this order:

- *appliers* run in one room transaction per op, in this order. Rooms (invitations, rekeys,
  names) and membership (key shares) come before anything that reads keys or names; messages
  hold a message before ``read`` owes its ``delivered`` receipt, and before asks, the gate
  (attention), memory and decisions look at it.
- *children* (``Plugs.children``) start in this order once the daemon's own actors (fan-out,
  membership, router) are up, each feature's *start hooks* right after its children: the gate
  (attention) is running before the inbox push that delivers what it surfaces, and memory's
  start (its sync actor and first probes) is what first reaches for the relay link. Moving
  memory's start after presence, retention and edits changes the simulation's schedules (seed
  127 then forks a room's reservations: the conceded-memory family of known_failures.txt).
- *listeners* are told in this order by the fan-out (each through its own lane, so the order
  only decides who is first in line).

A new feature goes at the end unless one of those reasons says otherwise.
"""

from __future__ import annotations

from crosstalk.features import (
    asks,
    attention,
    decisions,
    edits,
    identity,
    inbox,
    membership,
    memory,
    messages,
    pairing,
    peers,
    presence,
    read,
    retention,
    rooms,
    search,
    status,
    threads,
    ui,
)
from crosstalk.features.feature import Feature

FEATURES: tuple[Feature, ...] = (
    status.FEATURE,  # status, health
    identity.FEATURE,  # secure
    pairing.FEATURE,  # room new/join, link
    rooms.FEATURE,  # named rooms: invitations, rekeys, names
    membership.FEATURE,  # key shares for joiners who accepted with an older key
    messages.FEATURE,  # send, answer, post, sent; holds messages, takes receipts
    read.FEATURE,  # read, ack; owes delivered receipts, the receipts actor
    asks.FEATURE,  # ask, wait, watch
    peers.FEATURE,  # peers, rename, cost
    attention.FEATURE,  # the gate; trust, mute, sessions, notices
    inbox.FEATURE,  # the Claude Code inbox-socket push of what the gate surfaced
    memory.FEATURE,  # facts, tasks, decide, working set; the memory-sync actor
    decisions.FEATURE,  # others' decisions announced through the gate
    ui.FEATURE,  # the local web page (`crosstalk ui`)
    presence.FEATURE,  # our sessions told to roommates, theirs kept for peers
    threads.FEATURE,  # thread, thread close
    retention.FEATURE,  # prune, and the daily default retention
    edits.FEATURE,  # which files our agents wrote, told to rooms that share the repository
    search.FEATURE,  # search what we hold (its index is kept by triggers, not by a seam)
)
