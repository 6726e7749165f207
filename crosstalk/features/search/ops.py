"""The search feature's daemon side: the ``search`` op (CLI, MCP and the page all call it).

``search {query, room?, from?, kind?, since?, limit?}`` → ``{"results": [{"kind", "id", "room",
"from", "snippet", "ts"}]}``, best first. The query is plain words unless it asks for FTS5
syntax (:mod:`crosstalk.core.search_query`); one that does not parse, an unknown kind and a
``since`` that is no number of days are ``usage`` errors; a room or person we do not know,
``unknown_room`` and ``unknown_peer``. The index is kept by triggers in the transactions that
change what it indexes (:mod:`crosstalk.store.schema_search`), but for memory records, which are
indexed after their transaction (:mod:`crosstalk.store.schema_search_queue`): a search that finds
some not indexed yet indexes them first, in the write transaction it then searches in, so it
sees every record committed before it began. On a full disk that write fails: the search then
reads the index as it is and says ``incomplete``.
"""

from __future__ import annotations

import functools
import logging
import math
import sqlite3
import time
from typing import Protocol

import attrs

from crosstalk.core.search_query import to_fts
from crosstalk.errors import StorageFull, UsageError
from crosstalk.features.caps import Identified, Stored
from crosstalk.features.feature import Plugs, op
from crosstalk.store import search as index
from crosstalk.store import search_index
from crosstalk.store.schema_search import KINDS
from crosstalk.wire.control.params import SearchParams
from crosstalk.wire.control.replies.messages import Hit, SearchReply
from crosstalk.wire.control.table import SEARCH

log = logging.getLogger(__name__)

DAY = 86400.0
#: Results per search: the default, and the most one may ask for.
DEFAULT_LIMIT = 20
MAX_LIMIT = 100


class Host(Stored, Identified, Protocol):
    """What search uses: the store it reads, and who we are (our own words are ``me``)."""


def _checked(params: SearchParams, now: float) -> index.Filters:
    """The filters ``params`` ask for that need no store (rooms and people come later)."""
    if params.kind is not None and params.kind not in KINDS:
        raise UsageError(f"--kind is one of {', '.join(KINDS)}, not {params.kind!r}.")
    since = None
    if params.since is not None:
        if not math.isfinite(params.since) or params.since <= 0:
            raise UsageError("--since is a number of days greater than 0.")
        since = now - params.since * DAY
    if not 1 <= params.limit <= MAX_LIMIT:
        raise UsageError(f"A search returns 1 to {MAX_LIMIT} results.")
    return index.Filters(kind=params.kind, since=since, limit=params.limit)


async def search(daemon: Host, params: SearchParams) -> SearchReply:
    """The best matches for ``params.query`` among what this identity holds."""
    filters = _checked(params, time.time())
    query = to_fts(params.query)
    index.check_syntax(query)
    me = daemon.keys.fingerprint if daemon.identity is not None else ""
    my_label = daemon.own_label() if daemon.identity is not None else "me"

    def run(conn: sqlite3.Connection) -> list[Hit]:
        narrowed = filters
        if params.room is not None:
            narrowed = attrs.evolve(narrowed, rooms=index.room_ids(conn, params.room))
        if params.from_ is not None:
            senders, closers = index.sender_ids(conn, params.from_, me=me, my_label=my_label)
            narrowed = attrs.evolve(narrowed, senders=senders, closers=closers)
        return index.search(conn, query, narrowed, me=me)

    def read(conn: sqlite3.Connection) -> list[Hit] | None:
        return None if search_index.unindexed(conn) else run(conn)

    def index_then_run(conn: sqlite3.Connection) -> list[Hit]:
        search_index.index_all(conn)
        return run(conn)

    hits = await daemon.store.read(read)
    if hits is None:
        try:
            # Not fsynced: what it writes is made again from the queue it commits with.
            hits = await daemon.store.write(index_then_run, durable=False)
        except StorageFull:
            # A full disk must not take search away: what is indexed is searched, and the
            # reply says the newest memory changes were not.
            log.warning("search: the newest memory changes are not indexed: the disk is full")
            return SearchReply(await daemon.store.read(run), incomplete=True)
    return SearchReply(hits)


def plug(daemon: Host) -> Plugs:
    """The ``search`` op."""
    return Plugs(ops=(op(SEARCH, functools.partial(search, daemon)),))
