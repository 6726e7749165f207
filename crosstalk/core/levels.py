"""The trust dial and how a source's level is resolved.

Theory of operation
-------------------
Every source that can reach an agent's session has one level on an ordered dial::

    mute < notify < ask < handoff < deliver

and each level includes everything below it (``notify`` = a line on the screen, ``ask`` = also
a question that costs a turn, ``handoff`` = also a work item, ``deliver`` = also their words in
the turn). :class:`Level` compares by that order.

The receiver's settings (:class:`TrustSettings`) hold four kinds of entry: a default level, a
level per room, a pin per person that applies everywhere, and a pin per person within one room.
:func:`resolve_level` picks exactly one of them, in this precedence (first match wins):

1. a pin for this person in the room the op arrived in   (``trust marie mute --in ideas``)
2. a global pin for this person                          (``trust marie ask``)
3. the level of the room the op arrived in               (``trust incident deliver``)
4. the default level (``ask`` out of the box: someone you share a room of two with starts at ask)

A local ``post`` (our own machine talking to itself) joins no room: a global pin on its source
key, else ``TrustSettings.local``.

Then two caps that no setting lifts lower the result to ``notify``: the source is a bot (it
joined with ``--agent``), or it is a room member we share no direct room of two with (someone
another member added). Caps only ever lower a level; ``mute`` stays ``mute``.

Invariants:

* The room that decides is the relay room the op *arrived in*. It is an argument the shell
  fills from the relay's envelope; no field a sender writes is an input here, so a sender that
  names a louder room in its payload gains nothing (the original's bug, behaviour doc §9 item 5).
* An in-room pin is scoped to that room (the original stored it as a global pin, §9 item 11).
* The result says *why* (:class:`Resolution`): the rule that chose the level and the caps that
  lowered it, for ``crosstalk trust`` output and for debugging.

Settings are immutable values; the ``with_*`` methods return updated copies for the shell to
persist. People are keyed by fingerprint (stable across renames), rooms by relay room id.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from crosstalk.errors import LocalProtocolError
from crosstalk.wire.kinds import parse_choice


class Level(enum.Enum):
    """One step of the trust dial. Ordered: ``MUTE < NOTIFY < ASK < HANDOFF < DELIVER``."""

    MUTE = "mute"
    NOTIFY = "notify"
    ASK = "ask"
    HANDOFF = "handoff"
    DELIVER = "deliver"

    @property
    def rank(self) -> int:
        """Position on the dial, 0 for ``mute`` up to 4 for ``deliver``."""
        return _ORDER.index(self)

    def includes(self, other: Level) -> bool:
        """Whether this level allows everything ``other`` allows."""
        return self.rank >= other.rank

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Level):
            return NotImplemented
        return self.rank >= other.rank

    @classmethod
    def parse(cls, text: str) -> Level:
        """Read a level as a user typed it (see :func:`~crosstalk.wire.kinds.parse_choice`)."""
        return parse_choice(cls, text, "a trust level")


_ORDER: tuple[Level, ...] = tuple(Level)


class Rule(enum.Enum):
    """Which setting chose a level (before caps)."""

    IN_ROOM_PIN = "in_room_pin"
    PERSON_PIN = "person_pin"
    ROOM_LEVEL = "room_level"
    DEFAULT = "default"
    LOCAL = "local"


class Cap(enum.Enum):
    """A limit no setting lifts: the level never exceeds :data:`CAP_LEVEL`."""

    BOT = "bot"
    NO_DIRECT_CHANNEL = "no_direct_channel"


CAP_LEVEL = Level.NOTIFY
"""The highest level a capped source can reach."""

LOCAL_PREFIX = "post:"
"""Local ``post`` sources are keyed ``post:<name>`` so they can never collide with a fingerprint."""


def local_key(name: str) -> str:
    """The person key under which a local ``post --source NAME`` is pinned and muted."""
    return LOCAL_PREFIX + name


def _no_bot_local(instance: Source, _attribute: object, bot: bool) -> None:
    if bot and instance.local:
        raise LocalProtocolError("a local post is our own machine; it cannot also be a bot")


@attrs.frozen
class Source:
    """The facts about who sent something, as the daemon knows them (never as the sender says).

    Attributes:
        person: the sender's key: their fingerprint, or :func:`local_key` for a local post.
        label: the name we show for them.
        direct: we share a room of two with them (a paired contact).
        bot: they joined with ``--agent``.
        local: our own machine (``crosstalk post``).
    """

    person: str
    label: str
    direct: bool = False
    bot: bool = attrs.field(default=False, validator=_no_bot_local)
    local: bool = False

    @classmethod
    def local_post(cls, name: str) -> Source:
        """The source of ``crosstalk post --source NAME``."""
        return cls(person=local_key(name), label=name, local=True)


def _levels(value: Mapping[str, Level]) -> dict[str, Level]:
    return dict(value)


def _nested(value: Mapping[str, Mapping[str, Level]]) -> dict[str, dict[str, Level]]:
    return {room: dict(pins) for room, pins in value.items() if pins}


@attrs.frozen
class TrustSettings:
    """The receiver's trust settings.

    Attributes:
        default: the level of anyone no other entry covers.
        local: the level of local posts with no pin.
        rooms: relay room id -> level for everyone in it.
        people: person key -> pin that applies in every room.
        room_people: relay room id -> person key -> pin that applies in that room only.
    """

    default: Level = Level.ASK
    local: Level = Level.DELIVER
    rooms: dict[str, Level] = attrs.field(factory=dict, converter=_levels)
    people: dict[str, Level] = attrs.field(factory=dict, converter=_levels)
    room_people: dict[str, dict[str, Level]] = attrs.field(factory=dict, converter=_nested)

    def with_default(self, level: Level) -> TrustSettings:
        """A copy with a new default level (``crosstalk trust LEVEL``)."""
        return attrs.evolve(self, default=level)

    def with_room(self, room: str, level: Level | None) -> TrustSettings:
        """A copy with ``room`` set to ``level``, or its level removed when ``level`` is None."""
        return attrs.evolve(self, rooms=_put(self.rooms, room, level))

    def with_pin(self, person: str, level: Level | None, room: str | None = None) -> TrustSettings:
        """A copy with ``person`` pinned to ``level`` (None removes the pin).

        With ``room`` the pin applies in that room only; without it, everywhere.
        """
        if room is None:
            return attrs.evolve(self, people=_put(self.people, person, level))
        pins = _put(self.room_people.get(room, {}), person, level)
        return attrs.evolve(self, room_people={**self.room_people, room: pins})


def _put(mapping: Mapping[str, Level], key: str, level: Level | None) -> dict[str, Level]:
    updated = dict(mapping)
    if level is None:
        updated.pop(key, None)
    else:
        updated[key] = level
    return updated


@attrs.frozen
class Resolution:
    """A resolved level and why.

    Attributes:
        level: the level that applies.
        rule: the setting that chose ``chosen``.
        chosen: the level that setting gave, before caps.
        caps: the caps that lowered ``chosen`` to ``level`` (empty when none did).
    """

    level: Level
    rule: Rule
    chosen: Level
    caps: tuple[Cap, ...] = ()

    def explain(self, label: str) -> str:
        """One sentence for ``crosstalk trust`` and logs, e.g. ``"notify: marie is pinned ..."``."""
        because = {
            Rule.IN_ROOM_PIN: f"{label} is pinned at {self.chosen.value} in this room",
            Rule.PERSON_PIN: f"{label} is pinned at {self.chosen.value}",
            Rule.ROOM_LEVEL: f"this room is set to {self.chosen.value}",
            Rule.DEFAULT: f"the default level is {self.chosen.value}",
            Rule.LOCAL: f"local posts are at {self.chosen.value}",
        }[self.rule]
        reasons = {
            Cap.BOT: f"{label} is a bot",
            Cap.NO_DIRECT_CHANNEL: f"you share no room of two with {label}",
        }
        capped = "".join(
            f", capped at {CAP_LEVEL.value} because {reasons[cap]}" for cap in self.caps
        )
        return f"{self.level.value}: {because}{capped}"


def resolve_level(settings: TrustSettings, source: Source, arrived_in: str | None) -> Resolution:
    """Resolve the level of ``source`` for something that arrived in relay room ``arrived_in``.

    Args:
        settings: the receiver's trust settings.
        source: what the daemon knows about the sender.
        arrived_in: the relay room the op arrived in, taken from the relay's envelope (never a
            room named inside the payload). None evaluates outside any room (the ``peers`` view)
            and is the only value a local post accepts.

    Raises:
        LocalProtocolError: a local post was given a room.
    """
    if source.local:
        if arrived_in is not None:
            raise LocalProtocolError("a local post arrives in no room")
        pin = settings.people.get(source.person)
        if pin is not None:
            return Resolution(level=pin, rule=Rule.PERSON_PIN, chosen=pin)
        return Resolution(level=settings.local, rule=Rule.LOCAL, chosen=settings.local)
    rule, chosen = _choose(settings, source.person, arrived_in)
    caps = tuple(
        cap
        for cap, applies in ((Cap.BOT, source.bot), (Cap.NO_DIRECT_CHANNEL, not source.direct))
        if applies and chosen > CAP_LEVEL
    )
    level = CAP_LEVEL if caps else chosen
    return Resolution(level=level, rule=rule, chosen=chosen, caps=caps)


def _choose(settings: TrustSettings, person: str, room: str | None) -> tuple[Rule, Level]:
    """The precedence: in-room pin > global pin > room level > default."""
    if room is not None:
        in_room = settings.room_people.get(room, {}).get(person)
        if in_room is not None:
            return Rule.IN_ROOM_PIN, in_room
    pin = settings.people.get(person)
    if pin is not None:
        return Rule.PERSON_PIN, pin
    if room is not None:
        room_level = settings.rooms.get(room)
        if room_level is not None:
            return Rule.ROOM_LEVEL, room_level
    return Rule.DEFAULT, settings.default
