"""Memory records are indexed for search after their transaction (migration 28,
store/schema_search_queue.py, store/search_index.py): noted in it, indexed later, never missed by
a search, and the index ends where step 25's triggers left it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import attrs
import pytest

from crosstalk.core.search_query import to_fts
from crosstalk.features.search import ops
from crosstalk.store import room_keys, search_index
from crosstalk.store.db import Store, connect
from crosstalk.store.migrations import MIGRATIONS, migrate
from crosstalk.store.rooms import Room, add_room
from crosstalk.store.search import Filters, search
from crosstalk.wire.control.params import SearchParams
from crosstalk.wire.converter import unstructure
from crosstalk.wire.memory import DecisionRecord, Forgetting, Person, TaskRecord
from tests.store.test_search_store import BEN, ME, NOW, consistent, fact, hold, put_memory

ROWS = "SELECT key, kind, ref, room_id, sender, label, ts, text, extra FROM search_docs"


def bare(conn: sqlite3.Connection, words: str) -> list[str]:
    """What the index alone finds (no indexing first)."""
    return sorted(h.id for h in search(conn, to_fts(words), Filters(), me=ME))


def queued(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM search_queue").fetchone()[0])


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    connection = connect(tmp_path / "state.db")
    add_room(connection, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32)
    add_room(connection, Room("r2", "ops", "shared", "joined", 0, NOW), b"k" * 32)
    return connection


def test_a_record_is_noted_in_its_transaction_and_indexed_after(
    conn: sqlite3.Connection,
) -> None:
    """Writing records costs a queue row each; indexing makes their search rows and empties it."""
    put_memory(conn, "r1", facts=(fact("f1", "the cache is redis"),),
               tasks=(TaskRecord("t1", "warm the cache", None, Person(BEN, "b"), NOW, 1),))
    assert queued(conn) == 2 and bare(conn, "cache") == []
    assert search_index.unindexed(conn)
    assert search_index.index_records(conn) == 2
    assert bare(conn, "cache") == ["f1", "t1"] and not search_index.unindexed(conn)
    consistent(conn)


def test_indexing_goes_a_chunk_at_a_time_in_key_order(conn: sqlite3.Connection) -> None:
    """``limit`` keys per call, the first in key order, until none is left."""
    put_memory(conn, "r1", facts=tuple(fact(f"f{n}", f"note {n} gizmo") for n in range(5)))
    put_memory(conn, "r2", facts=(fact("g1", "gizmo in ops"),))
    assert search_index.index_records(conn, limit=4) == 4
    assert bare(conn, "gizmo") == ["f0", "f1", "f2", "f3"]
    assert [search_index.index_records(conn, limit=4) for _ in range(2)] == [2, 0]
    assert bare(conn, "gizmo") == ["f0", "f1", "f2", "f3", "f4", "g1"]
    consistent(conn)


def test_only_rows_that_change_are_rewritten(conn: sqlite3.Connection) -> None:
    """A snapshot installing the same facts again leaves their index rows alone; a changed,
    forgotten or dropped record has its row rewritten or deleted."""
    put_memory(conn, "r1", facts=(fact("f1", "deploys on tuesday"), fact("f2", "tests on ci"),
                                  fact("f3", "docs on fridays")))
    search_index.index_all(conn)
    hold(conn, "m1", "a message after them")  # a rewritten row would get an id past its one
    before = dict(conn.execute("SELECT key, id FROM search_docs").fetchall())
    put_memory(conn, "r1", facts=(fact("f1", "deploys on tuesday"), fact("f2", "tests on ci"),
                                  fact("f3", "docs on fridays")))
    search_index.index_all(conn)
    assert dict(conn.execute("SELECT key, id FROM search_docs").fetchall()) == before
    gone = attrs.evolve(fact("f2", "tests on ci"),
                        forgotten=Forgetting(Person(BEN, "ben"), NOW, 5))
    put_memory(conn, "r1", facts=(fact("f1", "deploys on wednesday"), gone))
    search_index.index_all(conn)
    after = dict(conn.execute("SELECT key, text FROM search_docs").fetchall())
    assert after == {"fact:r1:f1": "deploys on wednesday"}  # a held message has no row here
    assert bare(conn, "tuesday") == [] and bare(conn, "wednesday") == ["f1"]
    assert bare(conn, "tests") == [] and bare(conn, "docs") == []
    consistent(conn)


def test_a_record_queued_when_its_room_is_left_stays_searchable_as_it_last_was(
    conn: sqlite3.Connection,
) -> None:
    """Leaving keeps the room's memory searchable, a record not indexed yet included; one
    deleted before the leave (a snapshot without it) is not kept."""
    put_memory(conn, "r2", facts=(fact("f1", "postmortem on friday"), fact("f2", "old drill")))
    search_index.index_all(conn)
    put_memory(conn, "r2", facts=(fact("f1", "postmortem on monday"),))
    room_keys.forget_room(conn, "r2")
    assert queued(conn) == 1  # f2's deletion, noted before the leave
    search_index.index_all(conn)
    assert bare(conn, "postmortem") == ["f1"] and bare(conn, "monday") == ["f1"]
    assert bare(conn, "friday") == [] and bare(conn, "drill") == []
    consistent(conn)


def test_migration_28_keeps_what_step_25_indexed_and_indexes_the_same_rows(
    tmp_path: Path,
) -> None:
    """A store at version 27, its records indexed by step 25's triggers: after step 28 search
    finds them without indexing anything, and indexing them again makes the very same rows."""
    path = tmp_path / "state.db"
    old = sqlite3.connect(path, isolation_level=None)
    migrate(old, MIGRATIONS[:27])
    add_room(old, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32)
    put_memory(old, "r1", facts=(fact("f1", "gizmo ships in may", tags=("release",)),),
               tasks=(attrs.evolve(TaskRecord("t1", "paint the gizmo", None, Person(BEN, "b"),
                                              NOW, 1), note="blue paint"),),
               decisions=(DecisionRecord("d1", "gizmo is green", "it sells", "", Person(BEN, "b"),
                                         NOW, 2),))
    by_triggers = sorted(old.execute(ROWS).fetchall())
    old.close()
    conn = connect(path)
    assert not search_index.unindexed(conn)
    assert bare(conn, "gizmo") == ["d1", "f1", "t1"]
    conn.execute("UPDATE memory_records SET body = body")  # every record noted again
    conn.execute("DELETE FROM search_docs WHERE kind != 'message'")
    assert queued(conn) == 3
    search_index.index_all(conn)
    assert sorted(conn.execute(ROWS).fetchall()) == by_triggers
    consistent(conn)
    conn.close()


@attrs.define
class _Host:
    """What the search op uses: a store and who we are."""

    store: Store
    identity: None = None
    keys: object = None

    def own_label(self) -> str:
        return "me"


async def test_the_search_op_finds_every_committed_record_before_it_is_indexed(
    tmp_path: Path,
) -> None:
    """A record committed but not indexed yet is found by the op (it indexes first, then
    searches in the same transaction); the index alone would miss it."""
    store = await Store.open(tmp_path / "state.db")
    try:
        await store.write(
            lambda c: add_room(c, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32))
        await store.write(lambda c: put_memory(c, "r1", facts=(fact("f1", "gizmo in may"),)))
        assert await store.read(lambda c: bare(c, "gizmo")) == []
        reply = await ops.search(_Host(store), SearchParams("gizmo"))  # type: ignore[arg-type]
        assert [h.id for h in reply.results] == ["f1"]
        assert not await store.read(search_index.unindexed)
        reply = await ops.search(_Host(store), SearchParams("gizmo"))  # type: ignore[arg-type]
        assert [h.id for h in reply.results] == ["f1"]  # now a read
    finally:
        await store.close()


def test_a_rolled_back_write_notes_nothing(conn: sqlite3.Connection) -> None:
    """The queue row is the record's own transaction's: rolled back with it."""
    conn.execute("BEGIN")
    put_memory(conn, "r1", facts=(fact("f1", "lost words"),))
    assert queued(conn) == 1
    conn.execute("ROLLBACK")
    assert queued(conn) == 0


def test_a_record_changed_twice_before_it_is_indexed_is_noted_once(
    conn: sqlite3.Connection,
) -> None:
    """Upserts (as a batch writes its records) note a key once, and it is indexed as it is last."""
    put_memory(conn, "r1", facts=(fact("f1", "first words"),))
    for text in ("second words", "third words"):
        conn.execute(
            "INSERT INTO memory_records (room_id, kind, record_id, body) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (room_id, kind, record_id) DO UPDATE SET body = excluded.body",
            ("r1", "fact", "f1", json.dumps(unstructure(fact("f1", text)))),
        )
    assert queued(conn) == 1
    search_index.index_all(conn)
    assert bare(conn, "words") == ["f1"] and bare(conn, "third") == ["f1"]
    assert bare(conn, "second") == []
    consistent(conn)


def _outermost(conn: sqlite3.Connection, statement: str) -> str:
    """The table a statement's plan walks first."""
    plan = conn.execute("EXPLAIN QUERY PLAN " + statement, ("r", "k", "id")).fetchall()
    return str(plan[0][3]).split()[1]


def test_the_indexer_walks_the_queue_not_the_rooms_records(conn: sqlite3.Connection) -> None:
    """A few keys queued in a room of 10,000 facts cost a few lookups: the queue is the outer
    loop. A plain JOIN lets the planner walk the room's records instead (it did)."""
    assert _outermost(conn, search_index._FRESH) == "q"
    assert _outermost(conn, search_index._HELD) == "q"
    assert _outermost(conn, search_index._FRESH.replace("CROSS JOIN", "JOIN")) == "src"


async def test_on_a_full_disk_the_search_op_reads_the_index_as_it_is_and_says_so(
    tmp_path: Path,
) -> None:
    """Indexing the queue is a write; when the disk refuses it (SQLite's own page limit stands
    in for a full disk), the op still answers from what is indexed, marked incomplete, and
    the queue waits for a disk with room."""
    store = await Store.open(tmp_path / "state.db")
    try:
        await store.write(
            lambda c: add_room(c, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32))
        await store.write(lambda c: put_memory(c, "r1", facts=(fact("f1", "gizmo in may"),)))
        await ops.search(_Host(store), SearchParams("gizmo"))  # type: ignore[arg-type]
        words = "gizmo " + " ".join(f"widget{i}" for i in range(3000))
        both = (fact("f1", "gizmo in may"), fact("f2", words))
        await store.write(lambda c: put_memory(c, "r1", facts=both))

        def no_room(conn: sqlite3.Connection) -> None:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")

        await store.write(no_room)
        reply = await ops.search(_Host(store), SearchParams("gizmo"))  # type: ignore[arg-type]
        assert [h.id for h in reply.results] == ["f1"] and reply.incomplete
        assert await store.read(search_index.unindexed)

        await store.write(lambda c: c.execute("PRAGMA max_page_count = 1073741823"))
        reply = await ops.search(_Host(store), SearchParams("gizmo"))  # type: ignore[arg-type]
        assert sorted(h.id for h in reply.results) == ["f1", "f2"] and not reply.incomplete
    finally:
        await store.close()
