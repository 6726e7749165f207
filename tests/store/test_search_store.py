"""Search over a real, migrated state.db: the index kept by triggers, ranking, snippets, scope,
filters, and queries that do not parse (crosstalk/store/search.py, schema_search.py)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.core.memory import MemoryState
from crosstalk.core.search_query import to_fts
from crosstalk.errors import UnknownPeer, UnknownRoom, UsageError
from crosstalk.store import memory, messages, retention, room_keys, search_index, threads
from crosstalk.store.db import Store, connect
from crosstalk.store.gate import keep_only_the_refusal
from crosstalk.store.migrations import MIGRATIONS, migrate, schema_version
from crosstalk.store.rooms import Contact, Room, add_room, upsert_contact
from crosstalk.store.search import (
    RANK_WINDOW,
    Filters,
    Hit,
    check_syntax,
    room_ids,
    search,
    sender_ids,
)
from crosstalk.wire.memory import (
    DecisionRecord,
    FactRecord,
    Forgetting,
    MemorySnapshot,
    Person,
    TaskRecord,
)
from crosstalk.wire.room_ops import Intent, Kind, MessageOp

ME, BEN, CARL = "a" * 64, "b" * 64, "c" * 64
NOW = 1_700_000_000.0
DAY = 86400.0


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = connect(tmp_path / "state.db")
    add_room(connection, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32)
    add_room(connection, Room("r2", "ops", "shared", "joined", 0, NOW), b"k" * 32)
    upsert_contact(connection, Contact(BEN, "ben", "laptop", b"s" * 32, b"x" * 32))
    yield connection
    connection.close()


def hold(
    conn: sqlite3.Connection, msg_id: str, text: str, *, room: str = "r1", sender: str = BEN,
    ts: float = NOW, slices: list[dict[str, str]] | None = None, kind: str = "message",
) -> None:
    body = {"msg_id": msg_id, "text": text, "kind": kind, "relay_ts": ts,
            "slices": slices or []}
    messages.hold(conn, message_id=msg_id, room_id=room, sender=sender, to=None,
                  intent="fyi", body=json.dumps(body, sort_keys=True), received_at=ts)


def find(conn: sqlite3.Connection, words: str, **filters: object) -> list[Hit]:
    """Search as the search op does: memory records not indexed yet are indexed first (a store
    older than migration 28 indexed them in their own transaction)."""
    if schema_version(conn) >= 28:
        search_index.index_all(conn)
    query = to_fts(words)
    check_syntax(query)
    return search(conn, query, Filters(**filters), me=ME)  # type: ignore[arg-type]


def ids(hits: list[Hit]) -> list[str]:
    return [h.id for h in hits]


def consistent(conn: sqlite3.Connection) -> None:
    """FTS5's own check that its index matches search_docs, row for row."""
    conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")


def put_memory(conn: sqlite3.Connection, room: str, **records: tuple[object, ...]) -> None:
    """Install ``room``'s memory as a snapshot install does (memory.replace_all)."""
    snapshot = MemorySnapshot(room, 10, tuple(records.get("facts", ())),  # type: ignore[arg-type]
                              tuple(records.get("tasks", ())),  # type: ignore[arg-type]
                              tuple(records.get("decisions", ())), ())  # type: ignore[arg-type]
    memory.replace_all(conn, MemoryState.from_snapshot(snapshot))


def fact(fact_id: str, text: str, by: str = BEN, *, tags: tuple[str, ...] = (),
         at: float = NOW) -> FactRecord:
    person = Person(by, "ben-self-named")
    return FactRecord(fact_id, text, tags, person, at, 1, person, last_affirmed=at)


def test_bm25_ranks_the_denser_match_first(conn: sqlite3.Connection) -> None:
    """The message where the word weighs most comes first, the one where it is diluted last."""
    hold(conn, "long", "we talked about lunch and then briefly the migration and many other "
         "unrelated things for a long while afterwards until evening")
    hold(conn, "dense", "migration migration: the migration is done")
    hold(conn, "once", "the migration is done")
    hold(conn, "none", "nothing to see here")
    assert ids(find(conn, "migration")) == ["dense", "once", "long"]


def test_words_outweigh_labels_and_tags(conn: sqlite3.Connection) -> None:
    """A word in a message's text ranks above the same word in a slice label."""
    hold(conn, "in-label", "see the attachment", slices=[{"label": "schema diff"}])
    hold(conn, "in-text", "the schema changed")
    assert ids(find(conn, "schema")) == ["in-text", "in-label"]


def test_snippets_mark_the_matched_words(conn: sqlite3.Connection) -> None:
    """The snippet shows the words around the match, each match in [brackets], cut with …."""
    hold(conn, "m1", " ".join(["filler"] * 40 + ["the", "postgres", "migrations", "ran"]
                              + ["filler"] * 40))
    (hit,) = find(conn, "migrate")  # the Porter stemmer: migrate finds migrations
    assert "[migrations]" in hit.snippet
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet.split()) <= 18
    assert (hit.kind, hit.room, hit.from_, hit.ts) == ("message", "dev", "ben", NOW)


def test_slice_labels_are_searchable(conn: sqlite3.Connection) -> None:
    """A message's slice labels are indexed with it (not the slices' content)."""
    hold(conn, "m1", "have a look", slices=[{"label": "diff of crosstalk/store/db.py",
                                             "content": "secretword"}])
    assert [h.snippet for h in find(conn, "db.py")] == ["diff of crosstalk/store/[db.py]"]
    assert find(conn, "secretword") == []


def test_plain_words_with_fts_operators_in_them_work(conn: sqlite3.Connection) -> None:
    """foo-bar, c++ and colon words are words, not FTS5 syntax."""
    hold(conn, "m1", "the foo-bar build of c++ code, at v2:rollback")
    for words in ("foo-bar", "c++", "v2:rollback", "-build", "code,"):
        assert ids(find(conn, words)) == ["m1"], words


def test_fts_syntax_is_taken_when_asked_for(conn: sqlite3.Connection) -> None:
    """Phrases, OR, NOT and NEAR reach FTS5 as written."""
    hold(conn, "m1", "deploy the api tonight")
    hold(conn, "m2", "rollback the api")
    assert sorted(ids(find(conn, "deploy OR rollback"))) == ["m1", "m2"]
    assert ids(find(conn, "api NOT rollback")) == ["m1"]
    assert ids(find(conn, '"the api tonight"')) == ["m1"]
    assert ids(find(conn, "NEAR(deploy tonight, 2)")) == ["m1"]
    assert ids(find(conn, "roll*")) == ["m2"]


@pytest.mark.parametrize(
    "query", ['"unbalanced', "AND", "*", "NEAR(", "a OR", "(a", "a)", "foo:bar (", " ", "-+-",
              "OR OR", '""" AND'],
)
def test_queries_that_do_not_parse_are_usage_errors(query: str) -> None:
    """Each bad query is one UsageError sentence, never an sqlite3 error."""
    with pytest.raises(UsageError) as caught:
        check_syntax(to_fts(query))
    assert caught.value.code == "usage"
    assert "\n" not in caught.value.message and "Traceback" not in caught.value.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
       | st.lists(st.sampled_from(['"', "(", ")", "AND", "OR", "NOT", "NEAR", "*", ":", "-",
                                   "^", "+", "a", "b", " ", ",", "NEAR(", "\x00", "é"]),
                  max_size=12).map("".join))
def test_any_query_is_results_or_a_usage_error(query: str) -> None:
    """Fuzz: whatever is typed, search answers with results or a usage error, nothing else."""
    with sqlite3.connect(":memory:", isolation_level=None) as mem:
        migrate(mem)
        add_room(mem, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32)
        hold(mem, "m1", "a b (c) d AND e é")
        try:
            hits = find(mem, query)
        except UsageError as exc:
            assert exc.message
        else:
            assert all(h.id == "m1" for h in hits)


def test_a_surrogate_in_the_query_is_a_usage_error() -> None:
    """A lone surrogate (from a terminal's undecodable bytes) cannot be bound: usage."""
    with pytest.raises(UsageError):
        check_syntax(to_fts('"\udcff"'))


# --- what is indexed, and when it leaves ----------------------------------------------------------


def test_every_kind_is_found_and_filtered(conn: sqlite3.Connection) -> None:
    """Messages held and sent, facts (with tags), tasks (with notes), decisions (with why)
    and closed threads: each found, each alone under its --kind."""
    hold(conn, "held", "rollout of the cache")
    messages.record_sent(conn, msg_id="sent", room_id="r1", to_label="ben", kind="message",
                         chars=5, created_at=NOW, thread=None, reply_to=None,
                         text="my rollout plan")
    person = Person(BEN, "ben")
    put_memory(
        conn, "r1",
        facts=(fact("f1", "the cache is redis", tags=("rollout",)),),
        tasks=(TaskRecord("t1", "finish the rollout", None, person, NOW, 2),),
        decisions=(DecisionRecord("d1", "use redis", "the rollout needs it", "shop", person,
                                  NOW, 3),),
    )
    threads.record_closing(conn, "th1", "rollout done, all good", "ben", NOW, "r1")
    assert sorted(ids(find(conn, "rollout"))) == ["d1", "f1", "held", "sent", "t1", "th1"]
    expected = {"message": ["held", "sent"], "fact": ["f1"], "task": ["t1"],
                "decision": ["d1"], "thread": ["th1"]}
    for kind, want in expected.items():
        hits = find(conn, "rollout", kind=kind)
        assert sorted(ids(hits)) == want and {h.kind for h in hits} == {kind}
    consistent(conn)


def test_from_filters_by_person_and_me(conn: sqlite3.Connection) -> None:
    """--from names a contact, or me (what we sent, our facts); a thread by who closed it."""
    hold(conn, "from-ben", "release notes")
    hold(conn, "from-carl", "release train", sender=CARL)
    messages.record_sent(conn, msg_id="mine", room_id="r1", to_label="ben", kind="message",
                         chars=5, created_at=NOW, thread=None, reply_to=None,
                         text="release me")
    put_memory(conn, "r1", facts=(fact("f-mine", "release on fridays", by=ME),))
    threads.record_closing(conn, "th-ben", "release shipped", "ben", NOW, "r1")

    def by(name: str) -> list[str]:
        senders, closers = sender_ids(conn, name, me=ME, my_label="ana")
        return sorted(ids(find(conn, "release", senders=senders, closers=closers)))

    assert by("ben") == ["from-ben", "th-ben"]
    assert by("me") == ["f-mine", "mine"]
    assert by("ana") == ["f-mine", "mine"]
    with pytest.raises(UnknownPeer):
        sender_ids(conn, "zed", me=ME, my_label="ana")
    hits = {h.id: h.from_ for h in find(conn, "release")}
    assert hits == {"from-ben": "ben", "from-carl": CARL[:12], "mine": "me", "f-mine": "me",
                    "th-ben": "ben"}


def test_room_and_since_filters(conn: sqlite3.Connection) -> None:
    """--room narrows to one room (by name, #name or id); --since to the last days."""
    hold(conn, "old", "weekly report", ts=NOW - 10 * DAY)
    hold(conn, "new", "weekly report", ts=NOW)
    hold(conn, "other-room", "weekly report", room="r2")
    for name in ("dev", "#dev", "r1"):
        assert sorted(ids(find(conn, "weekly", rooms=room_ids(conn, name)))) == ["new", "old"]
    assert sorted(ids(find(conn, "weekly", since=NOW - 2 * DAY))) == ["new", "other-room"]
    with pytest.raises(UnknownRoom):
        room_ids(conn, "#nowhere")


def test_newest_first_among_equal_ranks(conn: sqlite3.Connection) -> None:
    """Equal texts rank equally; the newer comes first."""
    for n in range(3):
        hold(conn, f"m{n}", "same words", ts=NOW + n)
    assert ids(find(conn, "same")) == ["m2", "m1", "m0"]
    assert len(find(conn, "same", limit=2)) == 2


def test_a_common_word_ranks_its_newest_matches_and_a_filter_still_finds_older_ones(
    conn: sqlite3.Connection,
) -> None:
    """Past RANK_WINDOW matches, the newest are ranked (an older denser match is not among
    them); a filter that leaves too few in that window widens it until it has them all."""
    hold(conn, "old-dense", "deploy deploy deploy", room="r2", ts=NOW - 5)
    for n in range(RANK_WINDOW):
        hold(conn, f"m{n:05}", f"deploy number {n} of many", ts=NOW + n)
    best = find(conn, "deploy", limit=3)
    assert "old-dense" not in ids(best) and len(best) == 3
    assert ids(find(conn, "deploy", rooms=("r2",))) == ["old-dense"]
    consistent(conn)


def test_a_decision_announcement_is_indexed_once_as_the_decision(
    conn: sqlite3.Connection,
) -> None:
    """The held announcement of a decision is not a second hit beside the decision."""
    hold(conn, "announce", "decided: use redis", kind="decision")
    put_memory(conn, "r1", decisions=(DecisionRecord("d1", "use redis", "", "", Person(BEN, "b"),
                                                     NOW, 1),))
    assert [(h.kind, h.id) for h in find(conn, "redis")] == [("decision", "d1")]


def test_a_refused_message_loses_its_words_from_the_index(conn: sqlite3.Connection) -> None:
    """A refusal rewrites a held body: the old words leave the index with it."""
    hold(conn, "ask1", "please run the secret migration")
    op = MessageOp("ask1", "please run the secret migration", Intent.QUESTION, Kind.ASK)
    keep_only_the_refusal(conn, "ask1", op, "ben", NOW)
    assert find(conn, "secret") == []
    assert ids(find(conn, "refused")) == ["ask1"]
    consistent(conn)


def test_a_forgotten_fact_leaves_the_index(conn: sqlite3.Connection) -> None:
    """A fact marked forgotten is no longer found; a corrected one is found by its new text."""
    put_memory(conn, "r1", facts=(fact("f1", "deploys are on tuesday"),))
    assert ids(find(conn, "tuesday")) == ["f1"]
    gone = fact("f1", "deploys are on tuesday")
    gone = attrs.evolve(gone, forgotten=Forgetting(Person(BEN, "ben"), NOW, 5))
    put_memory(conn, "r1", facts=(gone,))
    assert find(conn, "tuesday") == []
    put_memory(conn, "r1", facts=(fact("f1", "deploys are on wednesday"),))
    assert find(conn, "tuesday") == [] and ids(find(conn, "wednesday")) == ["f1"]
    consistent(conn)


def test_pruned_messages_leave_the_index(conn: sqlite3.Connection) -> None:
    """Retention deletes an old read message; its index row goes in the same statement."""
    hold(conn, "old", "archived chatter", ts=NOW - 40 * DAY)
    hold(conn, "unread", "archived chatter", ts=NOW - 40 * DAY)
    messages.mark_read(conn, ["old"], NOW - 39 * DAY)
    removed = retention.prune(conn, NOW - 30 * DAY)
    assert removed["held_messages"] == 1
    assert ids(find(conn, "archived")) == ["unread"]
    consistent(conn)


# --- scope: what this identity could read ---------------------------------------------------------


def test_a_left_room_keeps_what_was_held_and_a_never_joined_room_has_nothing(
    conn: sqlite3.Connection,
) -> None:
    """Leaving takes the messages and memory off the machine, not from search; a room we were
    only invited to (and never joined) holds nothing to find."""
    hold(conn, "m-ops", "incident postmortem", room="r2")
    put_memory(conn, "r2", facts=(fact("f-ops", "postmortem every friday"),))
    add_room(conn, Room("r3", "secret", "shared", "invited", 0, NOW), b"k" * 32)
    room_keys.forget_room(conn, "r2")
    assert conn.execute("SELECT count(*) FROM held_messages").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_records").fetchone()[0] == 0
    hits = find(conn, "postmortem")
    assert sorted(ids(hits)) == ["f-ops", "m-ops"] and {h.room for h in hits} == {"ops"}
    assert sorted(ids(find(conn, "postmortem", rooms=room_ids(conn, "ops")))) == ["f-ops",
                                                                                  "m-ops"]
    assert find(conn, "postmortem", rooms=room_ids(conn, "secret")) == []
    consistent(conn)


def test_a_left_rooms_messages_age_out_like_read_ones(conn: sqlite3.Connection) -> None:
    """Retention takes a left room's old message copies, keeps its recent ones and its memory."""
    hold(conn, "old", "retro notes", room="r2", ts=NOW - 40 * DAY)
    hold(conn, "recent", "retro notes", room="r2", ts=NOW - DAY)
    put_memory(conn, "r2", facts=(fact("f1", "retro on mondays", at=NOW - 40 * DAY),))
    room_keys.forget_room(conn, "r2")
    assert retention.prune(conn, NOW - 30 * DAY)["search_docs"] == 1
    assert sorted(ids(find(conn, "retro"))) == ["f1", "recent"]
    consistent(conn)


def test_a_rejoined_room_holds_a_message_again_without_a_clash(conn: sqlite3.Connection) -> None:
    """A message held again after leaving and coming back replaces its kept index row."""
    hold(conn, "m1", "welcome back", room="r2")
    room_keys.forget_room(conn, "r2")
    conn.execute("UPDATE rooms SET state = 'joined' WHERE room_id = 'r2'")
    hold(conn, "m1", "welcome back", room="r2")
    assert ids(find(conn, "welcome")) == ["m1"]
    consistent(conn)


# --- the same transaction -------------------------------------------------------------------------


async def test_a_rolled_back_hold_leaves_no_index_row(tmp_path: Path) -> None:
    """The index row is written in the hold's transaction: rolled back with it, committed
    with it."""
    store = await Store.open(tmp_path / "state.db")
    try:
        await store.write(
            lambda c: add_room(c, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32)
        )

        def hold_then_fail(c: sqlite3.Connection) -> None:
            hold(c, "lost", "vanishing words")
            assert ids(find(c, "vanishing")) == ["lost"]
            raise RuntimeError("the apply failed")

        with pytest.raises(RuntimeError):
            await store.write(hold_then_fail)
        assert await store.read(lambda c: find(c, "vanishing")) == []
        await store.write(lambda c: hold(c, "kept", "vanishing words"))
        assert ids(await store.read(lambda c: find(c, "vanishing"))) == ["kept"]
    finally:
        await store.close()


# --- the migration --------------------------------------------------------------------------------


def test_the_search_migration_indexes_the_history_already_held(tmp_path: Path) -> None:
    """A state.db at version 24 with messages, sent words, memory and a closed thread: after
    step 25 every one is found, and a thread closed before it has its room."""
    path = tmp_path / "state.db"
    old = sqlite3.connect(path, isolation_level=None)
    migrate(old, MIGRATIONS[:24])
    assert schema_version(old) == 24
    add_room(old, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32)
    hold(old, "root", "kickoff of the gizmo project")
    hold(old, "reply", "gizmo reply", ts=NOW + 1)
    old.execute("UPDATE held_messages SET body = json_set(body, '$.thread', 'root') "
                "WHERE message_id = 'reply'")
    messages.record_sent(old, msg_id="sent", room_id="r1", to_label="ben", kind="message",
                         chars=5, created_at=NOW, thread="root", reply_to="root",
                         text="gizmo plans")
    put_memory(old, "r1", facts=(fact("f1", "gizmo ships in may"),),
               tasks=(TaskRecord("t1", "paint the gizmo", None, Person(BEN, "b"), NOW, 1),))
    old.execute("INSERT INTO threads (thread, summary, closed_by, closed_at) "
                "VALUES ('root', 'gizmo thread closed', 'ben', ?)", (NOW,))
    old.close()

    conn = connect(path)  # migrates to the latest version
    try:
        hits = find(conn, "gizmo")
        assert sorted((h.kind, h.id) for h in hits) == [
            ("fact", "f1"), ("message", "reply"), ("message", "root"), ("message", "sent"),
            ("task", "t1"), ("thread", "root"),
        ]
        assert {h.room for h in hits} == {"dev"}
        consistent(conn)
    finally:
        conn.close()
