"""Hook wall time per event, next to a bare interpreter, and the MCP server's ``initialize`` time.

``python -m bench.hook [--runs N] [--json] [--quick]``. In one run, interleaved so that machine
load hits both alike:

- ``baseline``: ``python -c 'import json, socket'`` (the floor any Python hook pays);
- one series per Claude Code event (SessionStart, UserPromptSubmit, PostToolUse, Stop) of the
  hook as the installers write it into client configs (``crosstalk.install.base.
  resolve_commands``: ``python -I -S .../crosstalk/hook/launch.py``, no site-packages
  processing) against a real, paired daemon (a real relay on loopback); a fresh session per
  SessionStart run, so every one of them fetches the working set;
- ``module_prompt``: UserPromptSubmit as ``python -m crosstalk.hook.main`` (runpy on top);
- ``script_prompt``: UserPromptSubmit through the ``crosstalk-hook`` console script (what the
  Claude Code plugin's hooks run): the script's wrapper and the interpreter's ``site`` on top;
- ``daemon_down``: the same hook with an identity but no daemon (the promised empty answer);
- ``cli_read``: ``python -m crosstalk read --json --home H`` against the same running daemon:
  CLI start-up (interpreter, imports, typer) plus one ``read`` request on the control socket;
- ``mcp_initialize``: ``crosstalk server`` started by the SDK client until ``initialize``
  returns (no daemon needed for it): its stdlib front end answers while the SDK imports;
- ``mcp_initialize_sdk_only``: the same with the SDK alone behind stdio (how the server ran
  before the front end), interleaved with it.

Every process series also reports its median ratio to the same round's baseline (load that
drifts during a run cancels) and the process's own CPU (user + system) next to the baseline's:
the CPU leaves out the daemon the hook waits for, and is far steadier than wall time on a loaded
machine.

Goal (issue 22): every hook event's p50 <= 1.2x the baseline p50. Every process is stopped by
pid.
The package's bytecode is written first (``bench._common.compile_bytecode``): clients run an
installed package, which has it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from bench._common import compile_bytecode, percentile, progress
from tests.e2e.conftest import Person, pair, pid_alive, stop_pid
from tests.relay.process import RelayProcess

EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")


def timed(argv: list[str], stdin: str, env: dict[str, str]) -> tuple[float, float]:
    """Run one process to its end: ``(wall seconds, its CPU seconds, user + system)``.

    The CPU is the process's own (what it imports and does), not the daemon's it waits for;
    far less sensitive to what else loads the machine than the wall time.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=30)
    elapsed = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not done.stdout.startswith("{"):
        raise RuntimeError(f"{argv} failed: {done.returncode} {done.stdout!r} {done.stderr!r}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return elapsed, cpu


def stats(samples: list[float]) -> dict[str, float]:
    return {
        "n": float(len(samples)),
        "p50_ms": round(percentile(samples, 0.50) * 1000, 1),
        "p95_ms": round(percentile(samples, 0.95) * 1000, 1),
    }


def hook_series(
    ana: Person, down_home: Path, runs: int, project: Path
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU samples per series, one of each per round (the rounds pair them)."""
    from crosstalk.install.base import resolve_commands

    hook = [*resolve_commands().hook, "--client", "claude"]
    module = [sys.executable, "-m", "crosstalk.hook.main", "--client", "claude"]
    script = [str(Path(sys.executable).parent / "crosstalk-hook"), "--client", "claude"]
    env = {**os.environ, "CROSSTALK_HOME": str(ana.home)}
    down_env = {**os.environ, "CROSSTALK_HOME": str(down_home)}
    read = [sys.executable, "-m", "crosstalk", "read", "--json", "--home", str(ana.home)]
    names = ("baseline", *EVENTS, "module_prompt", "script_prompt", "daemon_down", "cli_read")
    series: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}

    def sample(name: str, argv: list[str], stdin: str, env: dict[str, str]) -> None:
        wall, used = timed(argv, stdin, env)
        series[name].append(wall)
        cpu[name].append(used)

    for n in range(runs):
        sample("baseline", [sys.executable, "-c", "import json, socket; print('{}')"], "", env)
        sample("cli_read", read, "", env)
        for event in EVENTS:
            session = f"bench-{n}" if event == "SessionStart" else "bench-steady"
            stdin = json.dumps(
                {"hook_event_name": event, "session_id": session, "cwd": str(project)}
            )
            sample(event, [*hook, event], stdin, env)
            if event == "UserPromptSubmit":
                sample("module_prompt", [*module, event], stdin, env)
                sample("script_prompt", [*script, event], stdin, env)
        stdin = json.dumps({"hook_event_name": "SessionStart", "session_id": "x", "cwd": "/tmp"})
        sample("daemon_down", [*hook, "SessionStart"], stdin, down_env)
    return series, cpu


#: The SDK alone behind stdio, as ``crosstalk server`` ran before its front end answered first.
SDK_ONLY = (
    "from crosstalk.mcp.server import serve; from crosstalk.paths import Home; "
    "serve(Home.resolve(None))"
)


async def mcp_initialize(home: Path, runs: int) -> dict[str, list[float]]:
    """Spawn until the client's opening request returns: ``crosstalk server`` (the stdlib front
    end answers while the SDK imports) with the ``initialize`` handshake and with the modern
    ``server/discover`` probe (``mcp_discover``, as Claude Code 2.1.332 opens), and, interleaved,
    the SDK alone (``mcp_initialize_sdk_only``)."""
    env = {**os.environ, "CROSSTALK_HOME": str(home)}
    server = ["-m", "crosstalk", "server"]
    commands = {
        "mcp_initialize": (server, "legacy"),
        "mcp_discover": (server, "auto"),
        "mcp_initialize_sdk_only": (["-c", SDK_ONLY], "legacy"),
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (args, mode) in commands.items():
            params = StdioServerParameters(command=sys.executable, args=args, env=env)
            started = time.monotonic()
            with trio.fail_after(60):
                async with Client(params, mode=mode):
                    samples[name].append(time.monotonic() - started)
    return samples


def settle(root: Path) -> None:
    """Wait (bounded) for the daemon a hook started for ``root`` to refuse the damaged identity
    and exit (its pid is in the lock file); stop it by pid if it has not. One still starting
    when the directory is removed would create a fresh home and stay."""
    lock = root / "daemon.lock"
    deadline = time.monotonic() + 30
    pid = 0
    while time.monotonic() < deadline:
        text = lock.read_text().strip() if lock.exists() else ""
        pid = int(text) if text.isdigit() else 0
        if pid and not pid_alive(pid):
            return
        time.sleep(0.05)
    if pid:
        stop_pid(pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="a few runs, for CI")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    compile_bytecode()
    mcp_runs = 1 if args.quick else max(2, runs // 4)
    root = Path(tempfile.mkdtemp(prefix="ct-bh-", dir="/tmp"))
    relay = RelayProcess(root / "relay-data", root / "relay.stderr")
    relay.start()
    ana, ben = (Person(root / name, f"ws://127.0.0.1:{relay.port}") for name in ("ana", "ben"))
    down = root / "down"
    down.mkdir(mode=0o700)
    (down / "identity.json").write_text("not an identity: the daemon refuses to start")
    try:
        pair(ana, ben)
        ana.json("facts", "add", "benchmarks run on a loaded two-core box")
        project = root / "proj"
        subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=30)
        progress(f"hook and CLI processes, {runs} rounds")
        series, cpu = hook_series(ana, down, runs, project)
        progress(f"MCP initialize, {mcp_runs} runs")
        series.update(trio.run(mcp_initialize, root / "mcp-home", mcp_runs))
    finally:
        for person in (ana, ben):
            if (pid := person.daemon_pid()) is not None:
                stop_pid(pid)
        settle(down)
        relay.kill()
        shutil.rmtree(root, ignore_errors=True)
    report(series, cpu, as_json=args.json)


def report(
    series: dict[str, list[float]], cpu: dict[str, list[float]], *, as_json: bool
) -> None:
    """Per series: wall p50 and p95, and ``x_baseline`` (p50 / the baseline's p50, the page's
    ratio). Per process series also: ``paired_x_baseline``, the median over rounds of the
    process's wall time / the same round's baseline (load that drifts during the run cancels),
    and the process's own CPU (``cpu_p50_ms``, ``cpu_x_baseline``)."""
    result: dict[str, Any] = {name: stats(samples) for name, samples in series.items()}
    base = result["baseline"]["p50_ms"]
    for event in (*EVENTS, "module_prompt", "script_prompt", "mcp_initialize",
                  "mcp_initialize_sdk_only"):
        result[event]["x_baseline"] = round(result[event]["p50_ms"] / base, 2)
    base_cpu = percentile(cpu["baseline"], 0.50)
    for name, used in cpu.items():
        result[name]["cpu_p50_ms"] = round(percentile(used, 0.50) * 1000, 1)
        result[name]["cpu_x_baseline"] = round(percentile(used, 0.50) / base_cpu, 2)
        pairs = [s / b for s, b in zip(series[name], series["baseline"], strict=True)]
        result[name]["paired_x_baseline"] = round(percentile(pairs, 0.50), 2)
    if as_json:
        print(json.dumps(result))
        return
    print(f"{'series':<24}{'n':>4}{'p50 ms':>9}{'p95 ms':>9}{'x base':>8}{'paired':>8}"
          f"{'cpu ms':>8}{'cpu x':>7}")
    for name, row in result.items():
        cells = [f"{row[key]:.2f}" if key in row else "" for key in (
            "x_baseline", "paired_x_baseline")]
        if "cpu_p50_ms" in row:
            cells += [f"{row['cpu_p50_ms']:.1f}", f"{row['cpu_x_baseline']:.2f}"]
        else:
            cells += ["", ""]
        print(f"{name:<24}{int(row['n']):>4}{row['p50_ms']:>9.1f}{row['p95_ms']:>9.1f}"
              f"{cells[0]:>8}{cells[1]:>8}{cells[2]:>8}{cells[3]:>7}")

if __name__ == "__main__":
    main()
