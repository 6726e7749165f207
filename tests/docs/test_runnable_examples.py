"""The shell examples in README.md and docs/*.md run as written.

How a block is marked (see ``tests/docs/markdown.py``): an HTML comment on the line right above a
fenced ``sh`` block, which GitHub renders as nothing.

- ``<!-- runnable -->``: this test runs the block.
- ``<!-- not runnable: WHY -->``: it does not, and the comment says why.

How they run. Each file gets a fresh world: a short ``/tmp/ct-doc-*`` directory holding a relay
this test starts (``CROSSTALK_RELAY`` points at it), a throwaway ``HOME`` (so ``crosstalk install``
writes client configs there and ``~/.crosstalk`` is a throwaway identity) and a working directory.
The file's runnable blocks run in order in that world, each as ``bash -euo pipefail``, so every
command in a block must exit 0 and later blocks see what earlier ones did (the people paired in
the README's first example are the people in its later ones). Two people on one machine are two
``--home`` directories, as in the README. Afterwards every daemon whose home is inside the
directory is stopped by the pid in its lock file, and the relay by its pid.

Left unmarked (``not runnable``), and why:

- README.md, the two set-up commands at the top: CI runs them itself (they install the package
  and run this whole suite), and the first lines of the README must stay as they are, so they
  carry no marker.
- README.md, pairing across two machines (``room new`` on one, ``room join CODE`` on the other):
  the words are read aloud between two people; the runnable example above it does the same on one
  machine.
- README.md, ``room new --host`` / ``--public`` and ``relay serve`` with TLS: they need a LAN
  address others can reach, ``cloudflared`` on PATH, or a certificate.
- README.md, ``link``: a second machine reads the six words; the flow is the pairing one.
- README.md, the bot joining with ``room join CODE --agent``: it needs a live code from a
  ``room new`` elsewhere; the runnable pairing shows the same exchange.
- README.md, the git hook and CI lines that call ``crosstalk post``: they are fragments of other
  programs' configuration (the ``post`` command itself is run in a block of its own).
- docs/deploy.md and docs/performance.md (servers, systemd, NATS, benchmarks) are run by their
  own tests and benchmarks, not here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SHORT_SCRATCH
from tests.docs.markdown import ROOT, Block, shell_blocks
from tests.e2e.conftest import pid_alive, stop_pid

BLOCK_TIMEOUT = 180.0
#: The set-up commands at the very top of README.md (CI runs them; they carry no marker).
SETUP_COMMANDS = (
    "python3 -m pip install -e . && crosstalk demo\n",
    "python3 -m pip install -e '.[test]' && python3 -m pytest\n",
)
#: Files whose every shell block must say whether it runs (the others belong to other docs).
CHECKED_FILES = ("README.md", "docs/errors.md", "docs/clients.md", "docs/architecture.md")


def _files_with_runnable_blocks() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in pages if any(b.runnable for b in shell_blocks(p))]


def _world_env(root: Path, relay_url: str) -> dict[str, str]:
    """The environment every block runs in: only throwaway places, and the test's relay."""
    env = dict(os.environ)
    for key in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "CROSSTALK_HOME"):
        env.pop(key, None)
    home = root / "home"
    home.mkdir()
    env["HOME"] = str(home)
    env["CROSSTALK_HOME"] = str(home / ".crosstalk")
    env["CROSSTALK_RELAY"] = relay_url
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _stop_daemons_under(root: Path) -> None:
    for lock in root.rglob("daemon.lock"):
        try:
            pid = int(lock.read_text().strip() or 0)
        except (OSError, ValueError):
            continue
        if pid and pid_alive(pid):
            stop_pid(pid)


@pytest.fixture
def world() -> Iterator[tuple[Path, dict[str, str]]]:
    """A relay, a throwaway HOME and a working directory under a short /tmp path."""
    from tests.relay.process import RelayProcess

    root = Path(tempfile.mkdtemp(prefix="ct-doc-", dir=SHORT_SCRATCH))
    relay = RelayProcess(root / "relay", root / "relay.stderr")
    relay.start()
    try:
        env = _world_env(root, f"ws://127.0.0.1:{relay.port}")
        (root / "work").mkdir()
        yield root, env
    finally:
        _stop_daemons_under(root)
        relay.kill(signal.SIGTERM)
        shutil.rmtree(root, ignore_errors=True)


def _run_block(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run one block with errexit and pipefail; anything it left in the background is stopped."""
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        err += f"\n(timed out after {BLOCK_TIMEOUT:g} s)"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the block's own process group, by its id
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize(
    "page", _files_with_runnable_blocks(), ids=lambda p: str(p.relative_to(ROOT))
)
def test_marked_examples_run_as_written(page: Path, world: tuple[Path, dict[str, str]]) -> None:
    """Every block marked runnable in the page exits 0, in order, in one throwaway world."""
    root, env = world
    for block in (b for b in shell_blocks(page) if b.runnable):
        done = _run_block(block, root / "work", env)
        assert done.returncode == 0, (
            f"{block.where} exited {done.returncode}\n--- block\n{block.text}"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )


def test_the_docs_mark_runnable_examples() -> None:
    """There are marked blocks to run (a test that finds none would prove nothing)."""
    pages = _files_with_runnable_blocks()
    assert ROOT / "README.md" in pages
    count = sum(1 for p in pages for b in shell_blocks(p) if b.runnable)
    assert count >= 5, f"only {count} runnable blocks found"


def test_every_shell_block_says_whether_it_runs() -> None:
    """In the pages we keep runnable, each shell block is marked one way or the other."""
    silent = [
        b.where
        for name in CHECKED_FILES
        if (ROOT / name).exists()
        for b in shell_blocks(ROOT / name)
        if not b.runnable and b.why_not is None and b.text not in SETUP_COMMANDS
    ]
    assert not silent, f"mark these <!-- runnable --> or <!-- not runnable: why -->: {silent}"
