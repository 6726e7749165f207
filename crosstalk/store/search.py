"""Search what this identity holds: the FTS5 index of migration step 25 (schema_search.py;
held messages are their own rows since step 29, schema_compact.py).

The index is kept by triggers, so this module only reads it. A search finds where the newest
:data:`RANK_WINDOW` matches begin (walking the match list by rowid costs next to nothing), then
lets FTS5 rank the matches from there on by bm25 (``rank``, with the weights schema_search.py
configured) under the filters, and stops at the best ``limit``.

Snippets mark each matched word with ``[`` and ``]`` (:data:`OPEN`, :data:`CLOSE`), plain text a
terminal and an agent can both show; what peers wrote may hold brackets of its own, which only
mis-marks a word and escapes nothing. Every output channel escapes the rest its own way (the CLI
through ``visible``, MCP as JSON, the page as text nodes).
"""

from __future__ import annotations

import sqlite3

import attrs

from crosstalk.core.search_query import SYNTAX_HELP, FtsQuery
from crosstalk.errors import UnknownPeer, UnknownRoom, UsageError
from crosstalk.store.gate import LOCAL_ROOM
from crosstalk.store.ids import from_db
from crosstalk.store.schema_compact import held_ts
from crosstalk.wire.control.replies.messages import Hit

OPEN, CLOSE, ELLIPSIS = "[", "]", "…"
#: Tokens a snippet shows around the match.
SNIPPET_TOKENS = 16
#: Matches ranked per search: the newest this many. bm25 costs a few µs per match (document
#: lengths, hit counts), so ranking a word found in 50,000 messages took 100 ms and more; a word
#: that common weighs little in bm25 anyway (its IDF is low), and its newest mentions are the
#: ones wanted. Fewer matches than this are all ranked. (bench/search.py)
RANK_WINDOW = 1000
#: How much wider the window grows at most when filters leave too few results in it.
WIDEN = 8
#: The index's tokenizer; the syntax check parses with the same one.
TOKENIZER = "porter unicode61 remove_diacritics 2"


@attrs.frozen
class Filters:
    """What a search is narrowed to (None: no narrowing)."""

    rooms: tuple[str, ...] | None = None  # room ids
    senders: tuple[str, ...] | None = None  # fingerprints ('' is what we sent)
    closers: tuple[str, ...] = ()  # with ``senders``: names a thread may be closed under
    kind: str | None = None
    since: float | None = None  # Unix seconds
    limit: int = 20


def check_syntax(query: FtsQuery) -> None:
    """Parse ``query`` with FTS5 itself, on an empty in-memory index of the same shape, so that
    every complaint of the parser is the query's (the real index is never asked to fail).

    Raises:
        UsageError: FTS5 does not take it, in one sentence.
    """
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute(f"CREATE VIRTUAL TABLE p USING fts5(text, extra, tokenize='{TOKENIZER}')")
        probe.execute("SELECT rowid FROM p WHERE p MATCH ?", (query.expression,)).fetchall()
    except (sqlite3.Error, UnicodeEncodeError) as exc:
        why = str(exc).removeprefix("fts5: ")
        why = "it ends too early" if why in ('syntax error near ""', "") else why
        raise UsageError(f"That search does not parse ({why}): {SYNTAX_HELP}.") from None
    finally:
        probe.close()


def room_ids(conn: sqlite3.Connection, name: str) -> tuple[str, ...]:
    """The room ``name`` names (its name, ``#name``, or its id), joined or left once; ``local``
    is where posts and messages between our own sessions are held.

    Raises:
        UnknownRoom: no such room here, now or before.
    """
    if name == LOCAL_ROOM:
        return (LOCAL_ROOM,)
    bare = name.removeprefix("#")
    rows = conn.execute(
        "SELECT room_id FROM rooms WHERE room_id = ? OR name = ?", (name, bare)
    ).fetchall()
    if not rows:
        raise UnknownRoom(f"There is no room {name!r} here; `crosstalk room` lists yours.")
    return tuple(str(r[0]) for r in rows)


def sender_ids(
    conn: sqlite3.Connection, name: str, *, me: str, my_label: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Whom ``name`` names: ``(fingerprints, names a thread closer goes by)``. ``me`` (or our
    own label or fingerprint) is us, whose sent messages have the fingerprint ``''``.

    Raises:
        UnknownPeer: nobody we know by that name.
    """
    if name in ("me", my_label, me):
        return ("", me), (my_label,)
    rows = conn.execute(
        "SELECT fingerprint, label FROM contacts WHERE label = ? OR fingerprint = ? "
        "UNION SELECT fingerprint, label FROM room_members WHERE label = ? OR fingerprint = ?",
        (name, name, name, name),
    ).fetchall()
    if not rows:
        raise UnknownPeer(f"You know nobody called {name!r}; `crosstalk peers` lists them.")
    return tuple(dict.fromkeys(str(r[0]) for r in rows)), (name,)


# An index entry is a search_docs row ``d`` or, without one, a held message ``h`` (its rowid is
# the entry's: schema_compact.py); each column is read from whichever it is.
_KIND = "coalesce(d.kind, 'message')"
_REF = "coalesce(d.ref, h.message_id)"
_ROOM = "coalesce(d.room_id, h.room_id)"
_SENDER = "CASE WHEN d.id IS NULL THEN h.sender ELSE d.sender END"
_TS = f"coalesce(d.ts, {held_ts('h')})"


def _where(filters: Filters) -> tuple[str, list[object]]:
    clauses: list[str] = []
    args: list[object] = []
    if filters.kind is not None:
        clauses.append(f"{_KIND} = ?")
        args.append(filters.kind)
    if filters.rooms is not None:
        clauses.append(f"{_ROOM} IN ({', '.join('?' for _ in filters.rooms)})")
        args += filters.rooms
    if filters.since is not None:
        clauses.append(f"{_TS} >= ?")
        args.append(filters.since)
    if filters.senders is not None:
        senders = ", ".join("?" for _ in filters.senders)
        closers = ", ".join("?" for _ in filters.closers) or "NULL"
        clauses.append(
            f"({_SENDER} IN ({senders}) OR (d.kind = 'thread' AND d.label IN ({closers})))"
        )
        args += [*filters.senders, *filters.closers]
    return "".join(f" AND {c}" for c in clauses), args


def _from(conn: sqlite3.Connection, sender: str | None, label: str | None, me: str) -> str:
    """Our name for who wrote it: ``me``, a contact's label, the name a room gave them, the
    name they gave themselves (a memory record carries it), else their fingerprint's start."""
    if sender is None:
        return label or ""
    if sender in ("", me):
        return "me"
    row = conn.execute(
        "SELECT coalesce((SELECT label FROM contacts WHERE fingerprint = :fp), "
        "(SELECT label FROM room_members WHERE fingerprint = :fp ORDER BY named DESC LIMIT 1))",
        {"fp": sender},
    ).fetchone()
    return str(row[0]) if row and row[0] is not None else (label or sender[:12])


_RANKED = (
    f"SELECT {_KIND}, {_REF}, coalesce(r.name, {_ROOM}), {_SENDER}, d.label, {_TS}, "
    "snippet(search_fts, -1, ?, ?, ?, ?), search_fts.rank FROM search_fts "
    "LEFT JOIN search_docs d ON d.id = search_fts.rowid "
    "LEFT JOIN held_messages h ON d.id IS NULL AND h.rowid = search_fts.rowid "
    f"LEFT JOIN rooms r ON r.room_id = {_ROOM} "
    "WHERE search_fts MATCH ? AND search_fts.rowid >= ?{where} "
    # FTS5 consumes ORDER BY rank: rows come out best first and the LIMIT stops it, so the
    # snippet (a re-tokenization of the text) is made for the rows returned only.
    "ORDER BY search_fts.rank LIMIT ?"
)


def window_floor(conn: sqlite3.Connection, query: FtsQuery, window: int) -> int:
    """The lowest index row of the newest ``window`` matches (0: they are fewer)."""
    row = conn.execute(
        "SELECT rowid FROM search_fts WHERE search_fts MATCH ? ORDER BY rowid DESC "
        "LIMIT 1 OFFSET ?",
        (query.expression, window - 1),
    ).fetchone()
    return 0 if row is None else int(row[0])


def _ranked(
    conn: sqlite3.Connection, query: FtsQuery, filters: Filters, floor: int, me: str
) -> list[tuple[float, Hit]]:
    where, args = _where(filters)
    rows = conn.execute(
        _RANKED.format(where=where),
        [OPEN, CLOSE, ELLIPSIS, SNIPPET_TOKENS, query.expression, floor, *args, filters.limit],
    ).fetchall()
    return [
        (float(rank), Hit(str(kind), from_db(ref), str(room), _from(conn, sender, label, me),
                          str(snippet), float(ts)))
        for kind, ref, room, sender, label, ts, snippet, rank in rows
    ]


def search(conn: sqlite3.Connection, query: FtsQuery, filters: Filters, *, me: str) -> list[Hit]:
    """The best matches for ``query`` under ``filters``, best first (one read transaction).

    Ranked among the newest :data:`RANK_WINDOW` matches; when filters leave fewer results
    there than asked for, among the newest 2 to :data:`WIDEN` times as many, and so on, up to
    all of them (a filter that keeps few matches pays for ranking more).
    """
    window = RANK_WINDOW
    while True:
        floor = window_floor(conn, query, window)
        ranked = _ranked(conn, query, filters, floor, me)
        if not floor or len(ranked) >= filters.limit:
            break
        # As many times wider as the filters' yield here says it takes (twice that, for luck).
        window *= min(WIDEN, max(2, -(-2 * filters.limit // max(1, len(ranked)))))
    # Equal ranks (the same words, as often as each other): FTS5 gives them oldest first.
    return [h for _rank, h in sorted(ranked, key=lambda item: (item[0], -item[1].ts))]
