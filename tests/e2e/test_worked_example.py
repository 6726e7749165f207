"""The worked example in docs/architecture.md works as written: its feature package, plugged in
as one more line of FEATURES, makes ``status`` show how many messages arrived in each room.

The package's code is taken from the page itself (the block after the ``worked example`` marker)
and written to a temporary directory; a real daemon runs with it, paired with a plain one over a
real relay, and the plain one sends it messages.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Person, pair, read_json_line, stop_pid, wait_until

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
MARKER = re.compile(
    r"<!-- worked example: (?P<path>[\w/]+\.py) -->\n```python\n(?P<code>.*?)```", re.DOTALL
)
MODULE = "message_counts"


def example_package() -> tuple[str, str]:
    """(the path the page says the package lives at, its code)."""
    found = MARKER.search(PAGE.read_text(encoding="utf-8"))
    assert found, f"{PAGE.name} has no '<!-- worked example: PATH -->' python block"
    return found["path"], found["code"]


def test_the_page_names_one_new_package_and_one_line_in_features() -> None:
    """The example's code is one package's __init__, and the page shows the one FEATURES line."""
    path, code = example_package()
    assert path == f"crosstalk/features/{MODULE}/__init__.py"
    assert "FEATURE = Feature(" in code
    assert f"    {MODULE}.FEATURE," in PAGE.read_text(encoding="utf-8")


@pytest.fixture
def counting_daemon(tmp_path: Path, people: list[Person]) -> Iterator[Person]:
    """ana's daemon runs with the example feature added; the ``people`` fixture stops it."""
    _, code = example_package()
    package = tmp_path / "example" / MODULE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(code, encoding="utf-8")
    ana = people[0]
    env = {**os.environ, "CROSSTALK_RELAY": ana.relay,
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "example"), str(ROOT)])}
    env.pop("CROSSTALK_HOME", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.feature_daemon", str(ana.home), MODULE],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )
    try:
        assert read_json_line(proc, timeout=60)["running"] is True
        yield ana
    finally:
        if proc.poll() is None:
            stop_pid(proc.pid)
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def test_status_shows_the_messages_counted_in_each_room(
    counting_daemon: Person, people: list[Person]
) -> None:
    """ben sends ana three messages; ana's ``status`` counts three in their room, ben's shows
    nothing of the kind (his daemon runs FEATURES as they are)."""
    ana, ben = counting_daemon, people[1]
    pair(ana, ben)
    for n in range(3):
        ben.json("send", "ana", f"message {n}")
    shown: dict[str, Any] = {}

    def counted() -> bool:
        shown.update(ana.json("status")["features"])
        return shown.get(MODULE) == {"ben": 3}

    wait_until(counted, timeout=30, what=f"ana's status to count 3 messages (saw {shown})")
    assert MODULE not in ben.json("status")["features"]
