"""Edit awareness end to end (issue 37): real daemons, a real relay, real repositories.

ana edits a file in her checkout of a repository; ben, who works in a checkout of the same name,
is warned before he edits it; cy works there too but ana turned sharing off in their room; dee
shares a room with ana but not the repository. Neither hears anything, and the relay never
holds a path, a repository name or a session name in the clear.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Person, pair, stop_pid, wait_for_messages, wait_until
from tests.e2e.test_attention import op

REPO = "shop-q7v2"
FILE = "src/payments_api.py"
ARRIVAL = 30.0


@pytest.fixture
def dee(short_tmp: Path, relay_url: str) -> Iterator[Person]:
    person = Person(short_tmp / "dee", relay_url)
    yield person
    pid = person.daemon_pid()
    if pid:
        stop_pid(pid)


def _checkout(root: Path, owner: str, name: str = REPO) -> Path:
    repo = root / f"{owner}-work" / name
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    return repo


def _sessions_seen(person: Person, label: str) -> bool:
    return any(p["label"] == label and p["sessions"] for p in person.json("peers")["peers"])


def _check(person: Person, session: str, repo: Path) -> dict[str, Any]:
    return op(person, "edits_check", session=session, cwd=str(repo), paths=[FILE])


def test_an_edit_warns_a_roommate_in_the_same_repository_and_nobody_else(
    people: list[Person], dee: Person, short_tmp: Path
) -> None:
    """A's edits_touched makes B's edits_check warn (and B's peers show it); a room with
    sharing off and a room not sharing the repository get nothing; the relay sees no path."""
    ana, ben, cy = people
    pair(ana, ben)
    with_cy, _ = pair(ana, cy)
    pair(ana, dee)
    checkouts = {p: _checkout(short_tmp, p.home.name) for p in (ana, ben, cy)}
    checkouts[dee] = _checkout(short_tmp, "dee", "elsewhere")
    for person in (ben, cy, dee):
        op(person, "session_register", name=f"{person.home.name}-1", client="codex",
           project=str(checkouts[person]))
    for label in ("ben", "cy", "dee"):
        wait_until(lambda label=label: _sessions_seen(ana, label), timeout=ARRIVAL,
                   what=f"{label}'s session at ana's")
    off = ana.json("room", "edits", with_cy["room"], "off")
    assert off["share"] is False

    touched = op(ana, "edits_touched", session="ana-1", cwd=str(checkouts[ana] / "src"),
                 paths=["payments_api.py", "../../../elsewhere.txt"], note="retry logic")
    assert touched["files"] == [{"repo": REPO, "path": FILE}]
    assert len(touched["rooms"]) == 1  # ben's room only

    warned: list[dict[str, Any]] = []

    def ben_warned() -> bool:
        warned[:] = [_check(ben, "ben-1", checkouts[ben])]
        return warned[0]["text"] is not None

    wait_until(ben_warned, timeout=ARRIVAL, what="ben's edits_check to warn")
    assert warned[0]["decision"] == "allow"
    assert f"ana's agent (session ana-1) changed {FILE} in {REPO}" in warned[0]["text"]
    assert "retry logic" in warned[0]["text"]
    [ana_at_ben] = [p for p in ben.json("peers")["peers"] if p["label"] == "ana"]
    edits = [e for s in ana_at_ben["sessions"] for e in s["edits"]]
    assert [(e["repo"], e["path"]) for e in edits] == [(REPO, FILE)]
    assert f"touching {REPO}/{FILE}" in ben.run("peers").stdout

    # A barrier: ana's message to cy and dee is posted after anything the edit posted there.
    for person in (cy, dee):
        ana.json("send", person.home.name, "after the edit")
        wait_for_messages(person, 1)
        assert person.json("edits")["edits"] == []
    quiet = _check(cy, "cy-1", checkouts[cy])
    assert (quiet["text"], quiet["decision"]) == (None, "allow")

    relay_files = [p for p in ana.relay_data.rglob("*") if p.is_file()]
    assert relay_files
    for secret in (REPO.encode(), b"payments_api", b"ana-1", b"retry logic"):
        assert not any(secret in p.read_bytes() for p in relay_files), secret
