"""The PNG plots of ``docs/performance.md`` (matplotlib, Agg backend: no screen needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # the backend is chosen above, before pyplot loads


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_cdf(series: list[tuple[str, list[float]]], path: Path) -> None:
    """Cumulative distributions of one-message latency, one line per (label, samples in ms)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for label, samples in series:
        ordered = sorted(samples)
        ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds (log scale)")
    ax.set_ylabel("fraction of messages")
    ax.set_title("One message end to end, loopback, same run")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    _save(fig, path)


def relay_bars(runs: list[dict[str, Any]], path: Path) -> None:
    """Relay ops/s against the echo ceiling, one pair of bars per load."""
    fig, ax = plt.subplots(figsize=(9, 4))
    labels = [f"{r['clients']} clients\nrooms of {r['room_size']}\n{r['window']} in flight"
              for r in runs]
    xs = range(len(runs))
    ax.bar([x - 0.2 for x in xs], [r["echo_rt_per_s"] for r in runs], 0.4,
           label="raw echo round trips/s (ceiling)")
    ax.bar([x + 0.2 for x in xs], [r["ops_per_s"] for r in runs], 0.4, label="relay ops/s")
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("per second")
    ax.set_title("Relay throughput against the raw websocket ceiling")
    ax.legend()
    _save(fig, path)


def curve(points: list[dict[str, Any]], memory_key: str, memory_label: str, x_label: str,
          path: Path, title: str) -> None:
    """Latency p50/p99 (left) and memory (right) against the scaled quantity (log x)."""
    xs = [p["x"] for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.plot(xs, [p["latency"]["p50_ms"] for p in points], "o-", label="p50")
    left.plot(xs, [p["latency"]["p99_ms"] for p in points], "s--", label="p99")
    left.set_ylabel("latency, ms")
    left.legend()
    right.plot(xs, [p[memory_key] / 1024 for p in points], "o-", color="tab:green")
    right.set_ylabel(f"{memory_label}, MiB")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xticks(xs, [f"{x:,}" for x in xs])
        ax.minorticks_off()
        ax.set_xlabel(f"{x_label} (log scale)")
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(title)
    _save(fig, path)
