"""The sender's outbox keeps no sequenced post, and ``sent`` still reads every state (issue 41,
item 4): real daemons, a real relay, the CLI. The daemons run with a 1 s heartbeat, so the
retention actor trims the link's finished copies every few seconds instead of every 30."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crosstalk.paths import HEARTBEAT_ENV
from tests.e2e.conftest import Person, pair, stop_pid, wait_for_messages, wait_until

pytestmark = pytest.mark.e2e


def _link_rows(person: Person) -> tuple[int, int]:
    """(sequenced rows in the outbox, rows in relay_inbound), read-only."""
    db = Path(person.home) / "state.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10.0)
    try:
        sent = conn.execute("SELECT count(*) FROM outbox WHERE state = 'sent'").fetchone()[0]
        inbound = conn.execute("SELECT count(*) FROM relay_inbound").fetchone()[0]
        return int(sent), int(inbound)
    finally:
        conn.close()


def _states(person: Person) -> dict[str, str]:
    return {r["id"]: r["state"] for r in person.json("sent")["messages"]}


def test_sequenced_posts_leave_the_outbox_and_sent_still_shows_their_states(
    people: list[Person], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ben reads one message, then stops; the next stays ``sent``. Once ana's outbox holds no
    sequenced post (her fact's included, once its outcome is reported), ``sent`` still says
    ``read`` and ``sent``; ben's inbound log is trimmed to its newest op."""
    monkeypatch.setenv(HEARTBEAT_ENV, "1")  # inherited by the daemons the CLI starts
    ana, ben, _ = people
    pair(ana, ben)
    first = ana.json("send", "ben", "the build is green")["id"]
    (got,) = wait_for_messages(ben, 1)
    assert got["id"] == first
    wait_until(lambda: _states(ana).get(first) == "read", timeout=30, what="first read")
    wait_until(lambda: _link_rows(ben)[1] <= 1, timeout=60, what="ben's inbound log trimmed")
    pid = ben.daemon_pid()
    assert pid is not None
    stop_pid(pid)  # ben is away: nothing reports on the next one but the relay

    second = ana.json("send", "ben", "the deploy is next")["id"]
    wait_until(lambda: _states(ana).get(second) == "sent", timeout=30, what="second sent")
    # Room memory passes our own posts at the room's next op (here a fact of ana's, whose
    # outcome she waits for): only then is a post done with, and its row may go.
    ana.json("facts", "add", "deploys go out on tuesdays", "--room", "ben")
    wait_until(lambda: _link_rows(ana)[0] == 0, timeout=60,
               what=f"no sequenced post in ana's outbox (last: {_link_rows(ana)})")
    assert _states(ana) == {first: "read", second: "sent"}
    listing = ana.run("sent").stdout
    assert "the deploy is next" in listing and "sent" in listing
