"""Who is in a room, as every member agrees: the room's signed membership history.

Theory of operation
-------------------
Since protocol 2 a member's roster is derived from the room's membership history
(:mod:`crosstalk.wire.chain`), which the relay sequences and hands out but cannot forge.
:func:`apply_history` takes what the relay offered (a push carries the statement the change
added, a fetch the statements from the index we asked for) on top of what we hold, verifies each
new statement, and derives the roster from the whole history: the relay's rows are compared with
it, never believed. What does not verify is refused and reported (``alarm``): another statement
where we already hold one (a fork), a statement that does not follow, rows that list someone the
history does not, a person the history gives other keys than we hold. A push past what we hold
is ``behind`` (fetch the rest). The history having us out marks the room removed, whatever the
rows say.

:func:`reconcile` turns verified roster entries into the new local rows. A member missing from
them, or listed as ``left``, becomes ``gone`` rather than deleted: the ops they signed before
leaving may still be waiting to be applied here, and must still verify. A ``left`` entry we
never knew is added as ``gone`` for the same reason: someone who joined and left while we were
away signed ops we have yet to apply (sim seed 311: they were held for ever). A name comes from
the member's own signed ops (``named`` 2), else from whoever added them (1), else it is a
placeholder made from the fingerprint (0) until one of those arrives.

Nothing here does I/O; the membership actor feeds it and writes what it returns.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence

import attrs

from crosstalk.core.members import BY_ADDER, BY_SELF, PLACEHOLDER, KnownMember
from crosstalk.wire.chain import ChainRefused, ChainState, Statement
from crosstalk.wire.relay import Member

MAX_LABEL = 64


@attrs.frozen
class RosterChange:
    """What one reconcile did: the rows to write and who came and went."""

    rows: tuple[KnownMember, ...]
    joined: tuple[str, ...] = ()  # fingerprints that are now joined and were not before
    gone: tuple[str, ...] = ()  # fingerprints that were in the roster and are not now

    @property
    def changed(self) -> bool:
        return bool(self.joined or self.gone)


def placeholder_label(fingerprint: str) -> str:
    """What a member is called until they or their adder name them."""
    return fingerprint[:9]


def clean_label(text: str) -> str:
    """A peer-chosen name made safe to show and to use in an address.

    Control and format characters go, ``/`` and ``#`` (address syntax) become ``-``, runs of
    whitespace become one space, and the result is cut to ``MAX_LABEL`` characters. An empty
    result means "no usable name".
    """
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if category.startswith("C"):
            continue
        kept.append("-" if ch in "/#" else " " if category.startswith("Z") else ch)
    return " ".join("".join(kept).split())[:MAX_LABEL].strip()


def reconcile(local: Sequence[KnownMember], entries: Sequence[Member]) -> RosterChange:
    """The local roster after ``entries``, the roster a verified history gives."""
    verified = {e.fingerprint: e for e in entries}
    before = {row.fingerprint: row for row in local}
    rows: list[KnownMember] = []
    joined: list[str] = []
    present = {fp: e for fp, e in verified.items() if e.state != "left"}
    for fp, entry in sorted(present.items()):
        state = "member" if entry.state == "joined" else "invited"
        old = before.get(fp)
        if old is None:
            row = KnownMember(fp, placeholder_label(fp), entry.ed_pub, entry.x_pub, state,
                              entry.added_by, named=PLACEHOLDER)
        else:
            row = attrs.evolve(old, state=state, gone=False, ed_pub=entry.ed_pub,
                               x_pub=entry.x_pub)
        if state == "member" and (old is None or old.gone or old.state != "member"):
            joined.append(fp)
        rows.append(row)
    for fp, entry in sorted(verified.items()):
        if entry.state == "left" and fp not in before:  # came and went while we were away
            rows.append(KnownMember(fp, placeholder_label(fp), entry.ed_pub, entry.x_pub,
                                    "member", entry.added_by, named=PLACEHOLDER, gone=True))
    gone = []
    for fp, old in sorted(before.items()):
        if fp in present:
            continue
        if not old.gone:
            gone.append(fp)
        rows.append(attrs.evolve(old, gone=True))
    return RosterChange(tuple(rows), tuple(joined), tuple(gone))


def name_member(row: KnownMember, label: str, *, by_self: bool) -> KnownMember | None:
    """``row`` with the name someone gave it, or None when that name does not replace the old.

    A member's own word beats their adder's, which beats the placeholder; a later word from the
    same source replaces an earlier one (a rename).
    """
    cleaned = clean_label(label)
    source = BY_SELF if by_self else BY_ADDER
    if not cleaned or source < row.named or (cleaned == row.label and source == row.named):
        return None
    return attrs.evolve(row, label=cleaned, named=source)


@attrs.frozen
class HistoryChange:
    """What the relay's word about a room's membership history did here.

    ``added``: the statements (with their links) that extend what we hold, to store. ``change``:
    the roster the whole verified history gives, or None when nothing was added and the relay's
    rows agree. ``alarm``: one sentence on what the relay offered that does not verify (a fork,
    a statement that does not follow, a roster the history does not give), or None. ``behind``:
    the relay's history goes past what it sent us (fetch the rest).
    """

    added: tuple[tuple[Statement, bytes], ...] = ()
    change: RosterChange | None = None
    alarm: str | None = None
    behind: bool = False
    # The history says we are not in the room (left, removed, or never invited), and who
    # removed us if someone did: a relay that still lists us does not make us a member.
    out: bool = False
    removed_by: str | None = None
    refused: bool = False  # part of what was offered of the history did not verify


def apply_history(
    room: str,
    held: Sequence[Statement],
    chain_from: int,
    offered: Sequence[Statement],
    relay_rows: Sequence[Member],
    local: Sequence[KnownMember],
    trusted: Mapping[str, tuple[bytes, bytes]],
    me: str = "",
    *,
    state: ChainState | None = None,
) -> HistoryChange:
    """Take what the relay offered of a room's history (``offered``, starting at index
    ``chain_from``) on top of what we hold (``held``, verified before), and derive the roster.
    ``state``: ``held`` already replayed (the caller's cache), extended here in place with what
    is added; None replays ``held``.

    A statement we hold already must be the very one offered at its index, or the relay is
    showing us another history than before (a fork). The first statement that does not follow is
    refused with everything after it. The roster is the history's, never the relay's rows; rows
    that list someone the history does not are reported (``alarm``), and so is anyone the history
    gives other keys than ``trusted`` (ours, our contacts') holds for them.
    """
    if state is None:
        state = ChainState.replay(room, held, verify=False)
    added: list[tuple[Statement, bytes]] = []
    alarm = None
    for i, stmt in enumerate(offered):
        index = chain_from + i
        if index < len(held):
            if stmt != held[index]:
                alarm = f"the relay showed another membership history at statement {index}"
                break
            continue
        if index > state.length:
            break  # a gap: the rest comes with a fetch
        try:
            state.append(stmt)
        except ChainRefused as exc:
            alarm = f"the relay offered a membership change that does not verify: {exc.message}"
            break
        added.append((stmt, state.links[-1]))
    total = chain_from + len(offered)
    refused = alarm is not None
    behind = not refused and total > state.length
    entries, swapped = _entries(state, trusted)
    if swapped:
        alarm = alarm or (f"the membership history gives {', '.join(swapped)} other keys than "
                          "the ones we hold")
    if alarm is None and not behind:
        alarm = _rows_disagree(state, relay_rows)
    change = None
    if added or state.length:
        change = reconcile(local, entries)
    mine = state.members.get(me)
    # What we verified says we are out (a statement refused after it changes nothing there; a
    # gap may hold our re-invitation, so behind we wait for the rest).
    out = bool(me) and state.length > 0 and not behind and (
        mine is None or mine.state == "left")
    removed_by = _removed_by(held, added, me) if out else None
    return HistoryChange(tuple(added), change, alarm, behind, out, removed_by, refused)


def _removed_by(held: Sequence[Statement], added: Sequence[tuple[Statement, bytes]], me: str
                ) -> str | None:
    """Who removed ``me`` in the last statement about us (None if we left or declined)."""
    for stmt in reversed([*held, *(s for s, _ in added)]):
        if stmt.subject == me:
            return stmt.actor if stmt.kind == "remove" else None
    return None


def _entries(state: ChainState, trusted: Mapping[str, tuple[bytes, bytes]]
             ) -> tuple[list[Member], list[str]]:
    """The history's members as roster entries, leaving out (and naming) key swaps."""
    entries, swapped = [], []
    for fp, e in sorted(state.members.items()):
        known = trusted.get(fp)
        if known is not None and known != (e.ed_pub, e.x_pub):
            swapped.append(fp[:9])
            continue
        entries.append(Member(fp, e.ed_pub, e.x_pub, e.state, e.added_by, b""))
    return entries, swapped


def _rows_disagree(state: ChainState, rows: Sequence[Member]) -> str | None:
    """A sentence if the relay's rows put someone in the room the history does not."""
    listed = {m.fingerprint: m.state for m in rows if m.state != "left"}
    believed = {fp: e.state for fp, e in state.members.items() if e.state != "left"}
    extra = sorted(fp for fp, st in listed.items() if believed.get(fp) != st)
    if not extra or not state.length:
        return None
    return (f"the relay lists {', '.join(fp[:9] for fp in extra)} in a way the room's signed "
            "membership history does not; they are not treated as members")
