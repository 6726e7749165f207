"""Membership as a signed, hash-chained history that no relay can forge.

Theory of operation
-------------------
Every change to a room's membership is a :class:`Statement` signed by the member who makes it:
``create`` (the creator, self-signed, with its keys), ``invite`` (a joined member names someone
and their keys), ``accept`` and ``decline`` (the invitee), ``leave`` (a joined member), and
``remove`` (a joined member takes out someone else, invited or joined). The relay sequences the
statements of a room into one list, as it sequences ops, and keeps every one; it signs nothing.

Each statement names the newest statement its signer had seen (``after``: an index, with the
*link* there). A link is a hash over everything up to and including a statement, so naming one
commits to the whole history before it. A :class:`ChainState` accepts the statement at index
``i`` only if

* it is signed by the actor's key as the history up to ``i`` knows it (the creator's own key for
  ``create``, which must come first and only first);
* the change is allowed in the state the history up to ``i`` gives (only a joined member invites
  or removes; only the invitee accepts or declines; nobody joins twice; nothing after the last
  joined member is gone);
* ``after`` points at a statement before ``i`` whose link matches, and at or after the last
  statement about the subject and the last about the actor.

The last rule is what makes a signature worth nothing once the history has moved past it: a
relay that kept back an invitation of ben and shows it after ben was removed, or shows an old
invitation again, or any statement of a member from before their own removal, is refused,
because the statement's ``after`` lies before the statement that changed its subject or actor.
So a relay cannot put a removed member back: only a member who saw the removal can invite them
again. Two members shown different histories (a fork) hold different links at the same index;
they find out by comparing ``(length, link)`` in what they send each other.

The relay's own power is what it always had: to order statements that were made concurrently,
to delay them, to drop them (and so stop a room's membership from changing), and to refuse.

Nothing here does I/O. Keys are checked by :func:`crosstalk.crypto.verify`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal

import attrs

from crosstalk import crypto
from crosstalk.errors import RemoteProtocolError

Kind = Literal["create", "invite", "accept", "decline", "leave", "remove"]
KINDS: tuple[str, ...] = ("create", "invite", "accept", "decline", "leave", "remove")
EntryState = Literal["invited", "joined", "left"]
ZERO = bytes(32)
MAX_STATEMENTS = 100_000  # a room's history; a year of a room of 200 is a few thousand


class ChainRefused(RemoteProtocolError):
    """A membership statement that does not follow from the history before it.

    ``stale`` is True when the only fault is that its signer had not seen the newest statement
    about its subject or itself (an honest member behind the relay: fetch and sign again).
    """

    def __init__(self, message: str, *, stale: bool = False) -> None:
        super().__init__(message, hint="stale_chain" if stale else "bad_statement")
        self.stale = stale


@attrs.frozen
class Statement:
    """One signed change to a room's membership (see the module's theory of operation)."""

    room: str
    kind: str
    actor: str
    subject: str
    ed_pub: bytes = attrs.field(default=b"", repr=False)  # the subject's keys: create, invite
    x_pub: bytes = attrs.field(default=b"", repr=False)
    after: int = -1
    after_link: bytes = attrs.field(default=ZERO, repr=False)
    sig: bytes = attrs.field(default=b"", repr=False)


def _lp(part: bytes) -> bytes:
    return len(part).to_bytes(4, "big") + part


def transcript(s: Statement) -> bytes:
    """What the actor signs: every field but the signature, length-prefixed, with a purpose."""
    fields = (
        s.room.encode(), s.kind.encode(), s.actor.encode(), s.subject.encode(), s.ed_pub,
        s.x_pub, (s.after + 1).to_bytes(8, "big"), s.after_link,
    )
    return b"crosstalk/membership/v1\x00" + b"".join(_lp(f) for f in fields)


def statement_hash(s: Statement) -> bytes:
    """The statement's identity: its transcript and signature hashed."""
    return hashlib.sha256(transcript(s) + _lp(s.sig)).digest()


def next_link(link: bytes, s: Statement) -> bytes:
    """The link after ``s``, given the link before it (:data:`ZERO` before the first)."""
    return hashlib.sha256(b"crosstalk/membership/link\x00" + link + statement_hash(s)).digest()


def sign_statement(
    keys: crypto.Keys,
    room: str,
    kind: Kind,
    subject: str,
    *,
    ed_pub: bytes = b"",
    x_pub: bytes = b"",
    after: int = -1,
    after_link: bytes = ZERO,
) -> Statement:
    """A statement by ``keys``' owner, signed. ``after``/``after_link``: the newest statement
    of the room's history we hold (see :meth:`ChainState.head`)."""
    unsigned = Statement(room, kind, keys.fingerprint, subject, ed_pub, x_pub, after, after_link)
    return attrs.evolve(unsigned, sig=crypto.sign(keys, transcript(unsigned)))


@attrs.frozen
class Entry:
    """Someone the history names, with the keys it gave them and where they stand."""

    fingerprint: str
    ed_pub: bytes = attrs.field(repr=False)
    x_pub: bytes = attrs.field(repr=False)
    state: EntryState
    added_by: str


@attrs.define
class ChainState:
    """A room's membership history as far as it has been checked, and what it says."""

    room: str
    links: list[bytes] = attrs.Factory(list)
    members: dict[str, Entry] = attrs.Factory(dict)
    last: dict[str, int] = attrs.Factory(dict)  # fingerprint -> last statement about them
    ever_joined: set[str] = attrs.Factory(set)  # their ops may be in the log: keep their keys
    ended: bool = False  # the last joined member went: the room is over

    @classmethod
    def replay(cls, room: str, statements: Iterable[Statement], *, verify: bool = True
               ) -> ChainState:
        """The state after ``statements`` from the first; raises :class:`ChainRefused`.

        ``verify=False`` skips the signatures, for statements this side checked when it
        stored them; every other rule is applied all the same.
        """
        state = cls(room)
        for s in statements:
            state.append(s, verify=verify)
        return state

    @property
    def length(self) -> int:
        return len(self.links)

    def head(self) -> tuple[int, bytes]:
        """``(index, link)`` of the newest statement, ``(-1, ZERO)`` for none: what a new
        statement names as ``after``."""
        return (len(self.links) - 1, self.links[-1]) if self.links else (-1, ZERO)

    def joined(self) -> list[str]:
        return [fp for fp, e in self.members.items() if e.state == "joined"]

    def check(self, s: Statement, *, verify: bool = True) -> None:
        """Raise :class:`ChainRefused` unless ``s`` may come next."""
        index = len(self.links)
        if s.room != self.room:
            raise ChainRefused(f"statement {index} is about another room")
        if s.kind not in KINDS:
            raise ChainRefused(f"statement {index} is of an unknown kind")
        if self.ended:
            raise ChainRefused(f"statement {index} comes after the room ended")
        if index >= MAX_STATEMENTS:
            raise ChainRefused("the room's membership history is full")
        if (s.kind in ("create", "invite")) != bool(s.ed_pub or s.x_pub):
            raise ChainRefused(f"statement {index} carries keys it should not, or lacks them")
        self._check_after(s, index)  # first: a fork or a stale signer says more than a rule
        signer = self._signer(s, index)
        if verify:
            try:
                crypto.verify(signer, transcript(s), s.sig)
            except crypto.BadSignature:
                raise ChainRefused(f"statement {index} is not signed by {s.actor[:9]}") from None

    def _signer(self, s: Statement, index: int) -> bytes:
        """The key that must have signed ``s``, once the change is known to be allowed."""
        subject = self.members.get(s.subject)
        actor = self.members.get(s.actor)
        here = subject.state if subject is not None else None
        if s.kind == "create":
            if index != 0 or s.actor != s.subject or len(s.ed_pub) != 32 or len(s.x_pub) != 32:
                raise ChainRefused(f"statement {index}: only the first statement creates")
            if crypto.fingerprint(s.ed_pub) != s.subject:
                raise ChainRefused("the creator's keys do not match its fingerprint")
            return s.ed_pub
        if index == 0:
            raise ChainRefused("a room's history starts with its creation")
        if s.kind in ("accept", "decline", "leave"):
            want = "joined" if s.kind == "leave" else "invited"
            if s.actor != s.subject or here != want or subject is None:
                raise ChainRefused(f"statement {index}: {s.actor[:9]} cannot {s.kind} here")
            return subject.ed_pub
        if actor is None or actor.state != "joined" or s.actor == s.subject:
            raise ChainRefused(f"statement {index}: {s.actor[:9]} cannot {s.kind} anyone")
        if s.kind == "invite":
            if here in ("invited", "joined"):
                raise ChainRefused(f"statement {index}: {s.subject[:9]} is already in the room")
            if len(s.ed_pub) != 32 or len(s.x_pub) != 32:
                raise ChainRefused(f"statement {index}: an invitation carries both keys")
            if crypto.fingerprint(s.ed_pub) != s.subject:
                raise ChainRefused(f"statement {index}: the keys do not match the invitee")
        elif here not in ("invited", "joined"):  # remove
            raise ChainRefused(f"statement {index}: {s.subject[:9]} is not in the room")
        return actor.ed_pub

    def _check_after(self, s: Statement, index: int) -> None:
        if not -1 <= s.after < index:
            raise ChainRefused(f"statement {index} names a statement that is not before it")
        want = self.links[s.after] if s.after >= 0 else ZERO
        if s.after_link != want:
            raise ChainRefused(f"statement {index} was made on another history (a fork)")
        newest = max(self.last.get(s.subject, -1), self.last.get(s.actor, -1))
        if s.after < newest:
            raise ChainRefused(
                f"statement {index} was signed before statement {newest} changed who it is "
                "about", stale=True,
            )

    def append(self, s: Statement, *, verify: bool = True) -> None:
        """Check ``s`` and take it as the next statement."""
        self.check(s, verify=verify)
        index = len(self.links)
        self.links.append(next_link(self.links[-1] if self.links else ZERO, s))
        self.last[s.subject] = index
        old = self.members.get(s.subject)
        if s.kind in ("create", "invite"):
            state: EntryState = "joined" if s.kind == "create" else "invited"
            self.members[s.subject] = Entry(s.subject, s.ed_pub, s.x_pub, state, s.actor)
            if s.kind == "create":
                self.ever_joined.add(s.subject)
        elif old is not None and s.kind == "accept":
            self.members[s.subject] = attrs.evolve(old, state="joined")
            self.ever_joined.add(s.subject)
        elif old is not None and s.subject not in self.ever_joined:
            del self.members[s.subject]  # declined or withdrawn: never signed in the room
        elif old is not None:  # gone after a stay: kept as left, so their ops still verify
            self.members[s.subject] = attrs.evolve(old, state="left")
        if s.kind in ("leave", "remove", "decline") and not self.joined():
            self.ended = True
