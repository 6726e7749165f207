"""The relay's /health and /metrics bodies (pure: built from counters handed in), and the
latency histograms the shell fills.

/metrics is Prometheus text (0.0.4): the counters and gauges written here by hand (their names
are a contract: dashboards and tests read them), then the histograms rendered by
``prometheus_client`` from :class:`Histogram` (plain counts the shell adds to without a lock or
an allocation: a push to twenty recipients is one ``observe(..., n=20)``, where
``prometheus_client.Histogram.observe`` takes a lock per call).

* ``crosstalk_relay_op_commit_seconds``: a post accepted by the core (sequenced) until the
  storage commit that makes it durable returned; ``posted`` goes out right after.
* ``crosstalk_relay_push_seconds``: that commit until the op's frame was written to each
  recipient's socket (one observation per recipient connection); a frame that waits in a slow
  connection's outbox counts until its writer wrote it.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import attrs

from relay.conn import RelayStats

if TYPE_CHECKING:
    from prometheus_client.core import Metric

LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
"""Upper bounds (seconds) of the latency buckets: a loopback commit takes about a millisecond,
a busy relay's batch tens; past ten seconds is an outage, counted in +Inf."""


class Histogram:
    """Counts of observations per bucket and their sum: a Prometheus histogram's state.

    Args:
        bounds: the buckets' upper bounds, ascending (``+Inf`` is implied).
    """

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound
        self.sum = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        """``n`` observations of ``value`` seconds."""
        self.counts[bisect.bisect_left(self.bounds, value)] += n
        self.sum += value * n

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, observations <= le)`` per bucket, ``+Inf`` last, as Prometheus exposes them."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*map(repr, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


@attrs.define
class Latencies:
    """The relay's latency histograms (see the module docstring)."""

    commit: Histogram = attrs.Factory(Histogram)
    push: Histogram = attrs.Factory(Histogram)

    def families(self) -> Iterator[Metric]:
        from prometheus_client.core import HistogramMetricFamily

        for name, doc, hist in (
            ("crosstalk_relay_op_commit_seconds",
             "Seconds from a post sequenced to its storage commit.", self.commit),
            ("crosstalk_relay_push_seconds",
             "Seconds from an op's commit to its frame written to a recipient's socket.",
             self.push),
        ):
            yield HistogramMetricFamily(name, doc, buckets=hist.cumulative(), sum_value=hist.sum)


class _Collected:
    """What ``prometheus_client`` asks a collector for: the metric families to render."""

    def __init__(self, latencies: Latencies) -> None:
        self._latencies = latencies

    def collect(self) -> Iterator[Metric]:
        return self._latencies.families()


def histograms_text(latencies: Latencies) -> str:
    """The histograms in Prometheus text, rendered by ``prometheus_client``."""
    # Imported here: only /metrics needs it, and the CLI imports this package's siblings.
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collected(latencies))
    return generate_latest(registry).decode()


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


def metrics_body(
    stats: RelayStats, shell: ShellCounters, latencies: Latencies | None = None
) -> bytes:
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
    text = "\n".join(lines) + "\n"
    if latencies is not None:
        text += histograms_text(latencies)
    return text.encode()
