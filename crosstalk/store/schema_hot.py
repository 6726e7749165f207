"""Indexes for the per-event paths (migration step 11): cost bounded by pending work, not history.

A daemon runs for months, so nothing a hook event, a ``read``, an ``ack``, a ``status`` or an
arriving op runs may grow with the number of messages ever held. Each query on those paths finds
its rows through an index whose size is what is still pending: the partial indexes below hold
only unfinished rows (a notice not yet shown nor withdrawn, a notice still held, a post still
queued), so a finished row leaves them the moment it is finished, and the scans over them cost
what is left to do. The rest look rows up by key. ``tests/store/test_query_plans.py`` runs
``EXPLAIN QUERY PLAN`` on every hot query and fails on a full scan of a growing table. Finished
rows themselves leave the tables after the retention period (``crosstalk prune``,
crosstalk/features/retention/).
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    # Surfaced notices still to show (the hook's `notices {pending}`, the inbox push).
    "CREATE INDEX notices_to_show ON notices (created_at, id) "
    "WHERE surfaced_at IS NOT NULL AND shown_at IS NULL AND withdrawn_at IS NULL",
    # Held notices still waiting to surface (the gate's release, its idle watcher).
    "CREATE INDEX notices_held ON notices (created_at, id) "
    "WHERE surfaced_at IS NULL AND withdrawn_at IS NULL",
    # Per sender (peers, cost) and per room (the page, asks, leaving a room).
    "CREATE INDEX notices_by_sender ON notices (sender, shown_at)",
    "CREATE INDEX held_messages_by_sender ON held_messages (sender, read_at)",
    "CREATE INDEX held_messages_by_room ON held_messages (room_id, received_at)",
    # Posts still waiting for the relay (the link's flush on every (re)connect).
    "CREATE INDEX outbox_queued ON outbox (id) WHERE state = 'queued'",
    # Sent messages by recipient, by time (`sent`, newest first) and by thread.
    "CREATE INDEX sent_messages_by_label ON sent_messages (to_label)",
    "CREATE INDEX sent_messages_by_time ON sent_messages (created_at)",
    "CREATE INDEX sent_messages_by_thread ON sent_messages (thread)",
    # Retention: finished rows by age (crosstalk/features/retention/).
    "CREATE INDEX relay_inbound_by_time ON relay_inbound (received_at)",
    "CREATE INDEX outbox_by_time ON outbox (created_at)",
    "CREATE INDEX notices_by_time ON notices (created_at)",
    "CREATE INDEX refused_ops_by_time ON refused_ops (refused_at)",
    "CREATE INDEX sessions_by_last_seen ON sessions (last_seen)",
)
