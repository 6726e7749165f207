"""`crosstalk status` and `crosstalk doctor`.

``status`` asks a running daemon who this identity is; only with no daemon to ask does it read
the identity file itself, which costs the crypto and store imports (and, with ``secure``, a
keyring look-up). ``doctor`` imports its checks when it runs.
"""

from __future__ import annotations

import json
import time
from typing import Any

import typer

from crosstalk.cli.calling import ask, show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import Output, reports_errors
from crosstalk.client import call, daemon_pid
from crosstalk.errors import CrosstalkError
from crosstalk.paths import Home


def _identity_from_file(h: Home) -> tuple[str | None, str | None]:
    """The label and fingerprint in the identity file, or ``(None, None)`` before pairing."""
    from crosstalk.crypto import fingerprint  # nacl: only when no daemon can answer
    from crosstalk.store.identity import load_identity

    record = load_identity(h.identity)
    if record is None:
        return None, None
    return record.label, fingerprint(record.ed25519_public)


def _live_status(h: Home, pid: int | None) -> dict[str, Any] | None:
    """The running daemon's ``status`` reply, or None when there is none or it does not answer."""
    if pid is None:
        return None
    try:
        return call(h, "status", timeout=5.0)
    except CrosstalkError:
        return None  # shown as not connected; `crosstalk doctor` says more


def loop_text(loop: dict[str, Any]) -> str:
    """``worst lag 52 ms at 14:02:07 (measured every 0.625 s)`` from status's ``loop``."""
    every = f"(measured every {float(loop['resolution_s']):g} s)"
    if loop.get("worst_lag_at") is None:
        return f"never late {every}"
    at = time.strftime("%H:%M:%S", time.localtime(float(loop["worst_lag_at"])))
    return f"worst lag {float(loop['worst_lag_s']) * 1000:.0f} ms at {at} {every}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 0.1 else f"{seconds * 1000:.0f} ms"


def latency_text(latency: dict[str, Any]) -> str:
    """``send → posted p50 12.0 ms, p99 40 ms (5); hooks none (last 60 min)`` from status's
    ``latency``."""
    parts = []
    for key, name in (("send_posted", "send → posted"), ("hook", "hooks")):
        stat = latency.get(key) or {}
        if not stat.get("count"):
            parts.append(f"{name} none")
        else:
            p50, p99 = float(stat["p50_s"]), float(stat["p99_s"])
            parts.append(f"{name} p50 {_ms(p50)}, p99 {_ms(p99)} "
                         f"({stat['count']})")
    minutes = float(latency.get("window_s", 3600)) / 60
    return f"{'; '.join(parts)} (last {minutes:g} min)"


def status(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Identity, relay, daemon and sessions at a glance."""
    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    pid = daemon_pid(h)
    live = _live_status(h, pid)
    relay: dict[str, object] = {"url": None, "connected": False}
    sessions: list[object] = []
    features: dict[str, object] = {}  # what each feature shows in status, by its name
    loop: dict[str, Any] | None = None  # how late the daemon's event loop has been
    latency: dict[str, Any] | None = None  # p50/p99 of send -> posted and hooks, last hour
    # A daemon still starting answers from its gate: what is not up yet, no identity or link.
    starting = list(live.get("starting", [])) if live is not None else []
    if live is not None and not starting:
        label, fp = live.get("label"), live.get("fingerprint")
        relay = dict(live["relay"])
        sessions = list(live.get("sessions", []))
        features = dict(live.get("features", {}))
        loop = live.get("loop")
        latency = live.get("latency")
    else:
        label, fp = _identity_from_file(h)
    data: dict[str, object] = {
        "label": label,
        "fingerprint": fp,
        "relay": relay,
        "daemon": {"running": pid is not None, "pid": pid, "starting": starting, "loop": loop,
                   "latency": latency},
        "sessions": sessions,
        "features": features,
    }
    who = f"{label} ({fp})" if fp else "not set up yet (pair with `crosstalk room new`)"
    daemon = f"running as pid {pid}" if pid else "not running"
    if starting:
        daemon += f", still starting ({', '.join(starting)})"
    if relay.get("url") is None:
        link = "not started"
    elif relay.get("connected"):
        link = f"connected to {relay['url']}"
    else:
        link = f"not connected to {relay['url']} ({relay.get('last_error') or 'connecting'})"
    lines = [f"identity  {who}", f"daemon    {daemon}", f"relay     {link}", f"home      {h.root}"]
    if loop is not None:
        lines.insert(2, f"loop      {loop_text(loop)}")
    if latency is not None:
        lines.insert(3, f"latency   {latency_text(latency)}")
    lines += [f"{name:<9} {json.dumps(shown)}" for name, shown in features.items()]
    out.emit(data, "\n".join(lines))


def doctor(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Check the setup and say what is broken and how to fix it. Exit 0 only when all is well."""
    import attrs

    from crosstalk.doctor.report import run_checks  # the store, trio and nacl: only here

    out = Output(json_mode=json_output)
    report = run_checks(Home.resolve(home))
    data = {
        "ok": report.ok,
        "checks": [attrs.asdict(c) for c in report.checks],
        "actors": report.actors,
    }
    lines = [f"{'✓' if c.ok else '✗'} {c.name:<14} {c.detail}" for c in report.checks]
    if report.actors:
        lines.append("")
        lines.append(f"  {'actor':<16} {'state':<10} {'restarts':>8} {'beat':>7} {'inbox':>5}")
        for a in report.actors:
            lines.append(
                f"  {a['name']:<16} {a['state']:<10} {a['restarts']:>8} "
                f"{a['beat_age_s']:>6.1f}s {a['inbox']:>5}"
            )
    bad = sum(not c.ok for c in report.checks)
    lines.append("")
    lines.append("All good." if report.ok else f"{bad} thing(s) to fix above.")
    out.emit(data, "\n".join(lines))
    if not report.ok:
        raise typer.Exit(1)


status = reports_errors(status)
doctor = reports_errors(doctor)


@reports_errors
def secure(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Move your private keys into the OS keyring (where this machine has one)."""
    reply = ask(home, "secure")
    show(
        json_output,
        {"storage": reply["storage"]},
        "Your private keys are now in the OS keyring; identity.json no longer holds them.",
    )


@reports_errors
def demo(json_output: JsonOption = False) -> None:
    """Run the whole flow on a throwaway relay and two throwaway identities, then clean up."""
    from crosstalk.cli.demo import run_demo

    out = Output(json_mode=json_output)
    summary = run_demo(lambda line: None if json_output else out.emit({}, line))
    out.emit(summary, "")
