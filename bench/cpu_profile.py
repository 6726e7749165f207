"""Where a process's CPU goes, by kind of work: py-spy samples of the thread holding the GIL.

The timeline (``bench/timeline.py``) measures how much CPU each process spends per message; this
says on what. ``py-spy record --gil`` samples only while a thread holds the GIL, so the samples
are Python's own work (C code called with the GIL held counts, a commit's fsync wait does not).
Each sample is put in one bin by the innermost frame whose file a bin names (:data:`BINS`, first
match wins), so a SQLite call made from our store module counts as the store, and a trio channel
send made from an actor counts as trio's.

py-spy slows the process it samples, so the messages profiled are sent after the timed ones and
never mixed with them. Without py-spy (it is in the ``bench`` extra) nothing is profiled.
"""

from __future__ import annotations

import collections
import contextlib
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

# (bin, path prefixes): the innermost frame whose file starts with one of these decides the
# sample's bin. Paths as py-spy shows them, relative to site-packages or the standard library.
CRYPTO = "crypto (libsodium)"
SCHEDULING = "trio's scheduler, channels and cancel scopes"
OURS = "our actors and features"
BINS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (CRYPTO, ("nacl/", "crosstalk/crypto.py")),
    ("SQLite and our store calls", ("crosstalk/store/", "relay/sqlite_store.py", "sqlite3/")),
    ("JSON, attrs and cattrs (wire encoding)", (
        "json/", "cattrs/", "crosstalk/wire/", "<attrs generated", "attr/")),
    ("websocket framing (wsproto, trio-websocket)", ("wsproto/", "trio_websocket/",
                                                       "relay/http.py")),
    ("sockets (trio and stdlib)", ("trio/_socket.py", "trio/_highlevel_socket.py",
                                   "socket.py", "selectors.py")),
    (SCHEDULING, (
        "trio/", "outcome/", "contextlib.py", "<frozen abc>", "collections/", "functools.py")),
    (OURS, ("crosstalk/", "relay/")),
)
OTHER = "other"


def frame_path(frame: str) -> str:
    """The file of one py-spy frame, ``function (path:line)``, relative to site-packages or
    the standard library when it is under one."""
    path = frame[frame.rfind("(") + 1:].rpartition(":")[0] or frame
    for root in ("site-packages/", "/lib/python3."):
        if root in path:
            path = path.rsplit(root, 1)[1]
            if root.startswith("/lib"):
                path = path.partition("/")[2]  # drop the "11/" of "python3.11/"
    return path


def classify(frames: list[str]) -> str:
    """The bin of one sample, its frames outermost first."""
    for frame in reversed(frames):
        path = frame_path(frame)
        for name, prefixes in BINS:
            if path.startswith(prefixes):
                return name
    return OTHER


def parse_raw(text: str) -> collections.Counter[str]:
    """Samples per bin from py-spy's raw (collapsed) output: ``frame;frame;... count`` lines,
    the first frame naming the thread."""
    bins: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        bins[classify(stack.split(";")[1:])] += int(count)
    return bins


def available() -> bool:
    return shutil.which("py-spy") is not None


@contextlib.contextmanager
def sampled(pids: dict[str, int], rate: int = 400) -> Iterator[dict[str, collections.Counter[str]]]:
    """Sample every process in ``pids`` (name -> pid) while the block runs; the dict yielded is
    filled with each one's samples per bin when the block ends (empty if py-spy failed)."""
    results: dict[str, collections.Counter[str]] = {}
    with tempfile.TemporaryDirectory(prefix="ctprof-") as tmp:
        spies = {
            name: subprocess.Popen(
                ["py-spy", "record", "--gil", "--threads", "--format", "raw", "--rate",
                 str(rate), "--output", str(Path(tmp) / f"{name}.txt"), "--pid", str(pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            for name, pid in pids.items()
        }
        try:
            yield results
        finally:
            for spy in spies.values():
                if spy.poll() is None:
                    spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            for name, spy in spies.items():
                try:
                    spy.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    spy.kill()
                    spy.wait()
                    continue
                out = Path(tmp) / f"{name}.txt"
                if out.exists():
                    results[name] = parse_raw(out.read_text())


def shares(bins: collections.Counter[str]) -> dict[str, float]:
    """Each bin's share of the samples, largest first."""
    total = sum(bins.values())
    if not total:
        return {}
    return {name: count / total for name, count in bins.most_common()}
