"""The relay's /health and /metrics bodies (pure: built from counters handed in)."""

from __future__ import annotations

import json

import attrs

from relay.conn import RelayStats


@attrs.define
class ShellCounters:
    """What only the shell sees: frames on the wire and commit batches."""

    frames_in: int = 0
    frames_out: int = 0
    commits: int = 0
    committed_writes: int = 0
    dropped_slow: int = 0
    shed_handshakes: int = 0  # accepted streams cancelled before their upgrade (fd headroom)
    memory_trims: int = 0  # times memory was given back after a crowd left (relay.trim)


def health_body(stats: RelayStats) -> bytes:
    return json.dumps(
        {"ok": True, "connections": stats.connections, "online": stats.identities,
         "rooms": stats.rooms}
    ).encode()


def metrics_body(stats: RelayStats, shell: ShellCounters) -> bytes:
    """Prometheus text exposition format, version 0.0.4."""
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, value: float, labels: str = "") -> None:
        if not any(line.startswith(f"# TYPE {name} ") for line in lines):
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")
        lines.append(f"{name}{labels} {value:g}")

    metric("crosstalk_relay_connections", "gauge", "Open WebSocket connections.",
           stats.connections)
    metric("crosstalk_relay_authenticated_connections", "gauge",
           "Connections past the handshake.", stats.authenticated)
    metric("crosstalk_relay_online_identities", "gauge", "Identities with a connection.",
           stats.identities)
    metric("crosstalk_relay_rooms", "gauge", "Rooms.", stats.rooms)
    metric("crosstalk_relay_backlog_ops", "gauge", "Ops held, not yet acknowledged by all.",
           stats.held_ops)
    metric("crosstalk_relay_backlog_bytes", "gauge", "Bytes of held op bodies.",
           stats.held_bytes)
    metric("crosstalk_relay_pairing_slots", "gauge", "Open pairing slots.", stats.slots)
    metric("crosstalk_relay_ops_in_total", "counter", "Ops accepted and sequenced.",
           stats.ops_in)
    metric("crosstalk_relay_ops_out_total", "counter", "Op frames pushed or replayed.",
           stats.ops_out)
    metric("crosstalk_relay_frames_in_total", "counter", "Frames received.", shell.frames_in)
    metric("crosstalk_relay_frames_out_total", "counter", "Frames sent.", shell.frames_out)
    metric("crosstalk_relay_commits_total", "counter", "Storage transactions.", shell.commits)
    metric("crosstalk_relay_committed_writes_total", "counter", "Storage writes committed.",
           shell.committed_writes)
    metric("crosstalk_relay_shed_total", "counter",
           "Connections closed for a limit: past the hello deadline, or past a cap per "
           "address, per identity or in all.", stats.shed)
    metric("crosstalk_relay_memory_trims_total", "counter",
           "Times memory was given back after most connections closed.", shell.memory_trims)
    metric("crosstalk_relay_slow_consumers_dropped_total", "counter",
           "Connections closed because they could not keep up.", shell.dropped_slow)
    for code in sorted(stats.errors):
        metric("crosstalk_relay_errors_total", "counter", "Error frames sent, by code.",
               stats.errors[code], f'{{code="{code}"}}')
    if not stats.errors:
        lines.append("# HELP crosstalk_relay_errors_total Error frames sent, by code.")
        lines.append("# TYPE crosstalk_relay_errors_total counter")
    return ("\n".join(lines) + "\n").encode()
