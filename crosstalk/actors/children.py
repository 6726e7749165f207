"""The daemon's declared actor tree: a child spec for each actor it runs for its life, and a
dynamic kind for each actor that something starts on demand.

Theory of operation. :attr:`crosstalk.daemon.tree.Daemon.children` lists the daemon's children once,
in the order they start (a tuple: its order is the start order, so a spec carries none of its
own); each feature's own children (``Plugs.children``) follow the daemon's three, in FEATURES
order (a feature's start hooks run right after its children). A child's :class:`Mailbox` is
opened when its spec is made, before anything starts, so whoever sends to the actor holds its
inbox from the beginning: no handle is ``None`` until a start hook fills it in, and what is
sent before the actor runs waits in the mailbox (bounded), as it waits during a restart. Actors
some part of the daemon starts on demand (a room per joined room, a pairing per pairing) are not
in that table, since they come and go; each kind is declared instead (:class:`DynamicKind`: its
name pattern and who spawns it), and ``docs/architecture.md`` draws both, checked by
``tests/test_architecture_doc.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs
import trio

from crosstalk.actors.context import Actor
from crosstalk.actors.supervisor import Restart, Supervisor

T = TypeVar("T")


class Mailbox(Generic[T]):
    """An actor's inbox, opened before the actor starts; the supervisor receives from it.

    Attributes:
        send: the end to send on (clone it for each sender that closes its own).
        receive: the supervisor's end, handed over at start.
    """

    def __init__(self, size: int = 16) -> None:
        self.send, self.receive = trio.open_memory_channel[T](size)


@attrs.frozen(eq=False)
class ChildSpec(Generic[T]):
    """One child the daemon runs for its life: its name under the supervisor, what makes its
    actor (called at start, once every child before it is up), its mailbox, its restart kind."""

    name: str
    factory: Callable[[], Actor[T]]
    mailbox: Mailbox[T] = attrs.field(factory=Mailbox)
    restart: Restart = Restart.PERMANENT


@attrs.frozen
class DynamicKind:
    """A kind of child started on demand: ``name`` is its pattern (``room-<id>``), and
    ``spawned_by`` says who starts each one and when."""

    name: str
    spawned_by: str
    restart: Restart = Restart.PERMANENT

    def instance(self, key: str) -> str:
        """The supervisor name of this kind's child for ``key`` (``room-<id>``: ``room-ab12``)."""
        return self.name[: self.name.index("<")] + key if "<" in self.name else self.name


async def start_children(supervisor: Supervisor, specs: Sequence[ChildSpec[Any]]) -> None:
    """Start ``specs`` under ``supervisor``, in order, each once the one before it is up."""
    for spec in specs:
        await supervisor.start_actor(
            spec.name, spec.factory(), restart=spec.restart,
            channel=(spec.mailbox.send, spec.mailbox.receive),
        )
