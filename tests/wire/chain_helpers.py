"""Membership histories as honest members build them, for tests of everything that reads one."""

from __future__ import annotations

from crosstalk import crypto
from crosstalk.features.membership.history import add_after_create, create_frame
from crosstalk.wire import relay as w
from crosstalk.wire.chain import ChainState, Statement, sign_statement


class History:
    """A room's history as honest members build it: each signs on the newest head."""

    def __init__(self, room: str = "r1") -> None:
        self.room = room
        self.state = ChainState(room)
        self.statements: list[Statement] = []

    def make(self, keys: crypto.Keys, kind: str, subject: crypto.Keys | None = None) -> Statement:
        """A statement ``keys`` signs on the newest head (not taken into the history)."""
        subject = subject or keys
        after, link = self.state.head()
        carries = kind in ("create", "invite")
        return sign_statement(
            keys, self.room, kind, subject.fingerprint,  # type: ignore[arg-type]
            ed_pub=subject.ed_pub if carries else b"", x_pub=subject.x_pub if carries else b"",
            after=after, after_link=link,
        )

    def do(self, keys: crypto.Keys, kind: str, subject: crypto.Keys | None = None) -> Statement:
        """``keys`` signs a statement and the history takes it."""
        s = self.make(keys, kind, subject)
        self.state.append(s)
        self.statements.append(s)
        return s


def room_of_two_frames(
    ka: crypto.Keys, kb: crypto.Keys, room: str
) -> tuple[w.Create, w.Add, w.Accept]:
    """The requests that make a room of two (``ka`` creates and adds ``kb``, who accepts), each
    with the statement an honest client signs; as a pairing makes them, without fetching."""
    create, created = create_frame(ka, room)
    add = add_after_create(ka, room, created, kb.ed_pub, kb.x_pub)
    assert add.stmt is not None
    after, link = ChainState.replay(room, [created, add.stmt]).head()
    accept = sign_statement(kb, room, "accept", kb.fingerprint, after=after, after_link=link)
    return create, add, w.Accept(0, room, accept)


def team(room: str, ana: crypto.Keys, ben: crypto.Keys, carl: crypto.Keys) -> History:
    """``ana`` creates ``room``; ``ben`` and ``carl`` are invited by her and accept."""
    h = History(room)
    h.do(ana, "create")
    h.do(ana, "invite", ben)
    h.do(ben, "accept")
    h.do(ana, "invite", carl)
    h.do(carl, "accept")
    return h
