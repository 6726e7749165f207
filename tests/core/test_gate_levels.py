"""The trust dial and level resolution: defaults, rooms, pins, precedence and caps."""

from __future__ import annotations

import inspect

import attrs
import pytest

from crosstalk.core.levels import (
    Cap,
    Level,
    Resolution,
    Rule,
    Source,
    TrustSettings,
    local_key,
    resolve_level,
)
from crosstalk.errors import LocalProtocolError, UsageError
from crosstalk.wire.converter import converter

MARIE = Source(person="aaaa-bbbb-cccc-dddd", label="marie", direct=True)
STRANGER = Source(person="1111-2222-3333-4444", label="sam", direct=False)
BOT = Source(person="9999-8888-7777-6666", label="ci", direct=True, bot=True)
DIRECT_ROOM = "room-of-two"
IDEAS = "room-ideas"
INCIDENT = "room-incident"


def test_levels_are_ordered_from_mute_to_deliver() -> None:
    """mute < notify < ask < handoff < deliver, and each includes the ones below it."""
    order = [Level.MUTE, Level.NOTIFY, Level.ASK, Level.HANDOFF, Level.DELIVER]
    assert sorted(reversed(order)) == order
    assert Level.NOTIFY < Level.ASK <= Level.ASK < Level.DELIVER
    assert Level.DELIVER > Level.HANDOFF >= Level.HANDOFF
    assert Level.HANDOFF.includes(Level.ASK)
    assert Level.ASK.includes(Level.ASK)
    assert not Level.ASK.includes(Level.HANDOFF)


def test_levels_do_not_compare_with_other_types() -> None:
    """Comparing a level with a plain int is an error, not a silent answer."""
    with pytest.raises(TypeError):
        assert Level.ASK < 3


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("mute", Level.MUTE),
        ("Notify", Level.NOTIFY),
        (" ask ", Level.ASK),
        ("DELIVER", Level.DELIVER),
    ],
)
def test_level_parses_as_typed(text: str, level: Level) -> None:
    """A level is read case-insensitively, ignoring surrounding blanks."""
    assert Level.parse(text) is level


def test_unknown_level_is_a_usage_error_listing_the_levels() -> None:
    """A mistyped level is a usage error that says which levels exist."""
    with pytest.raises(UsageError) as info:
        Level.parse("loud")
    assert info.value.code == "usage"
    assert info.value.message == (
        "'loud' is not a trust level: use one of mute, notify, ask, handoff, deliver."
    )


def test_someone_in_a_room_of_two_starts_at_ask() -> None:
    """With no settings, a direct contact in your room of two resolves to ask by default."""
    got = resolve_level(TrustSettings(), MARIE, DIRECT_ROOM)
    assert got == Resolution(level=Level.ASK, rule=Rule.DEFAULT, chosen=Level.ASK)


def test_a_changed_default_applies_to_everyone_uncovered() -> None:
    """`trust notify` lowers everyone no room level or pin covers."""
    settings = TrustSettings().with_default(Level.NOTIFY)
    assert resolve_level(settings, MARIE, IDEAS).level is Level.NOTIFY


def test_a_room_level_applies_to_everyone_in_that_room_only() -> None:
    """`trust incident deliver` raises people in incident, not in other rooms."""
    settings = TrustSettings().with_room(INCIDENT, Level.DELIVER)
    assert resolve_level(settings, MARIE, INCIDENT) == Resolution(
        level=Level.DELIVER, rule=Rule.ROOM_LEVEL, chosen=Level.DELIVER
    )
    assert resolve_level(settings, MARIE, IDEAS).rule is Rule.DEFAULT


@pytest.mark.parametrize("pin", [Level.NOTIFY, Level.DELIVER], ids=["below", "above"])
def test_a_global_pin_beats_the_room_level(pin: Level) -> None:
    """A person pinned above or below a room's level keeps the pin inside that room."""
    settings = TrustSettings().with_room(INCIDENT, Level.HANDOFF).with_pin(MARIE.person, pin)
    got = resolve_level(settings, MARIE, INCIDENT)
    assert (got.level, got.rule) == (pin, Rule.PERSON_PIN)


def test_an_in_room_pin_beats_the_global_pin_in_that_room_only() -> None:
    """`trust marie mute --in ideas` mutes her in ideas while her global pin holds elsewhere."""
    settings = (
        TrustSettings()
        .with_pin(MARIE.person, Level.DELIVER)
        .with_pin(MARIE.person, Level.MUTE, room=IDEAS)
        .with_room(IDEAS, Level.HANDOFF)
    )
    in_ideas = resolve_level(settings, MARIE, IDEAS)
    assert (in_ideas.level, in_ideas.rule) == (Level.MUTE, Rule.IN_ROOM_PIN)
    elsewhere = resolve_level(settings, MARIE, INCIDENT)
    assert (elsewhere.level, elsewhere.rule) == (Level.DELIVER, Rule.PERSON_PIN)


def test_an_in_room_pin_does_not_touch_other_people_in_the_room() -> None:
    """Pinning marie in ideas leaves sam in ideas on the room's level."""
    other = Source(person="5555-6666-7777-8888", label="jo", direct=True)
    settings = (
        TrustSettings()
        .with_room(IDEAS, Level.HANDOFF)
        .with_pin(MARIE.person, Level.MUTE, room=IDEAS)
    )
    assert resolve_level(settings, other, IDEAS).level is Level.HANDOFF


def test_outside_any_room_only_global_pins_and_the_default_apply() -> None:
    """With no arrival room (the peers view), room levels and in-room pins are ignored."""
    settings = (
        TrustSettings()
        .with_room(IDEAS, Level.DELIVER)
        .with_pin(MARIE.person, Level.MUTE, room=IDEAS)
    )
    assert resolve_level(settings, MARIE, None).rule is Rule.DEFAULT
    pinned = settings.with_pin(MARIE.person, Level.HANDOFF)
    assert resolve_level(pinned, MARIE, None).level is Level.HANDOFF


@pytest.mark.parametrize(
    "settings",
    [
        TrustSettings().with_pin(BOT.person, Level.DELIVER),
        TrustSettings().with_pin(BOT.person, Level.DELIVER, room=INCIDENT),
        TrustSettings().with_room(INCIDENT, Level.DELIVER),
        TrustSettings().with_default(Level.DELIVER),
    ],
    ids=["global-pin", "in-room-pin", "room-level", "default"],
)
def test_a_bot_trusted_deliver_stays_at_notify(settings: TrustSettings) -> None:
    """No setting lifts a bot past notify, and the resolution says the bot cap did it."""
    got = resolve_level(settings, BOT, INCIDENT)
    assert got.level is Level.NOTIFY
    assert got.chosen is Level.DELIVER
    assert got.caps == (Cap.BOT,)


def test_a_room_member_without_a_direct_channel_pinned_deliver_stays_at_notify() -> None:
    """Someone another member added, pinned deliver, is capped at notify."""
    settings = TrustSettings().with_pin(STRANGER.person, Level.DELIVER, room=INCIDENT)
    got = resolve_level(settings, STRANGER, INCIDENT)
    assert got == Resolution(
        level=Level.NOTIFY,
        rule=Rule.IN_ROOM_PIN,
        chosen=Level.DELIVER,
        caps=(Cap.NO_DIRECT_CHANNEL,),
    )


def test_a_bot_without_a_direct_channel_reports_both_caps() -> None:
    """When both caps lower the level, both are named."""
    bot = Source(person="0000-1111-2222-3333", label="deploy", direct=False, bot=True)
    got = resolve_level(TrustSettings().with_room(INCIDENT, Level.HANDOFF), bot, INCIDENT)
    assert (got.level, got.caps) == (Level.NOTIFY, (Cap.BOT, Cap.NO_DIRECT_CHANNEL))


@pytest.mark.parametrize("low", [Level.MUTE, Level.NOTIFY])
def test_caps_never_raise_a_level(low: Level) -> None:
    """A capped source set at or below notify keeps its level and no cap is reported."""
    got = resolve_level(TrustSettings().with_pin(BOT.person, low), BOT, INCIDENT)
    assert (got.level, got.caps) == (low, ())


def test_explain_names_the_rule_and_the_caps() -> None:
    """The explanation is one line saying which setting decided and what capped it."""
    settings = TrustSettings().with_pin(BOT.person, Level.DELIVER)
    assert resolve_level(settings, BOT, INCIDENT).explain("ci") == (
        "notify: ci is pinned at deliver, capped at notify because ci is a bot"
    )
    assert resolve_level(TrustSettings(), MARIE, IDEAS).explain("marie") == (
        "ask: the default level is ask"
    )
    in_room = TrustSettings().with_pin(STRANGER.person, Level.HANDOFF, room=IDEAS)
    assert resolve_level(in_room, STRANGER, IDEAS).explain("sam") == (
        "notify: sam is pinned at handoff in this room, "
        "capped at notify because you share no room of two with sam"
    )
    room = TrustSettings().with_room(IDEAS, Level.MUTE)
    assert resolve_level(room, MARIE, IDEAS).explain("marie") == "mute: this room is set to mute"


def test_a_local_post_uses_the_local_level_unless_pinned() -> None:
    """Our own machine's posts are at deliver by default; a pin on the source key overrides."""
    ci = Source.local_post("ci")
    got = resolve_level(TrustSettings(), ci, None)
    assert got == Resolution(level=Level.DELIVER, rule=Rule.LOCAL, chosen=Level.DELIVER)
    assert got.explain("ci") == "deliver: local posts are at deliver"
    pinned = TrustSettings().with_pin(local_key("ci"), Level.NOTIFY)
    assert resolve_level(pinned, ci, None).level is Level.NOTIFY
    assert resolve_level(pinned, Source.local_post("tests"), None).level is Level.DELIVER


def test_a_local_post_key_cannot_collide_with_a_fingerprint() -> None:
    """Local sources are keyed post:NAME, so a source named like a fingerprint is still local."""
    assert local_key(MARIE.person) == "post:" + MARIE.person
    settings = TrustSettings().with_pin(MARIE.person, Level.MUTE)
    spoof = Source.local_post(MARIE.person)
    assert resolve_level(settings, spoof, None).level is Level.DELIVER


def test_a_local_post_in_a_room_is_a_local_protocol_error() -> None:
    """A local post joins no room; passing one is a bug in the caller."""
    with pytest.raises(LocalProtocolError):
        resolve_level(TrustSettings(), Source.local_post("ci"), IDEAS)


def test_a_local_source_cannot_be_a_bot() -> None:
    """Our own machine is not a bot; constructing such a source is refused."""
    with pytest.raises(LocalProtocolError):
        Source(person="post:x", label="x", local=True, bot=True)


def test_resolution_takes_the_arrival_room_and_nothing_the_sender_wrote() -> None:
    """The room-naming attack has no way in: no input to resolution comes from the payload.

    The only room resolve_level sees is ``arrived_in``, which the shell fills from the relay's
    envelope. Source carries identity facts only, so a payload's room field cannot be passed.
    """
    params = list(inspect.signature(resolve_level).parameters)
    assert params == ["settings", "source", "arrived_in"]
    assert [field.name for field in attrs.fields(Source)] == [
        "person",
        "label",
        "direct",
        "bot",
        "local",
    ]
    # Marie is a member of a quiet room and a loud one; her op arrives in the quiet one.
    settings = TrustSettings().with_room(IDEAS, Level.NOTIFY).with_room(INCIDENT, Level.DELIVER)
    assert resolve_level(settings, MARIE, IDEAS).level is Level.NOTIFY


def test_with_methods_return_copies_and_none_removes() -> None:
    """Settings are values: updates return copies, and None removes an entry."""
    base = TrustSettings()
    set_up = (
        base.with_room(IDEAS, Level.MUTE)
        .with_pin("p", Level.ASK)
        .with_pin("p", Level.MUTE, room=IDEAS)
    )
    assert base == TrustSettings()
    assert set_up.rooms == {IDEAS: Level.MUTE}
    assert set_up.people == {"p": Level.ASK}
    assert set_up.room_people == {IDEAS: {"p": Level.MUTE}}
    cleared = set_up.with_room(IDEAS, None).with_pin("p", None).with_pin("p", None, room=IDEAS)
    assert cleared == TrustSettings()
    assert cleared.room_people == {}


def test_settings_round_trip_through_the_converter_as_level_names() -> None:
    """Trust settings persist as JSON with level names and come back equal."""
    settings = (
        TrustSettings(default=Level.NOTIFY)
        .with_room(IDEAS, Level.HANDOFF)
        .with_pin("p", Level.DELIVER)
        .with_pin("q", Level.MUTE, room=IDEAS)
    )
    data = converter.unstructure(settings)
    assert data == {
        "default": "notify",
        "local": "deliver",
        "rooms": {IDEAS: "handoff"},
        "people": {"p": "deliver"},
        "room_people": {IDEAS: {"q": "mute"}},
    }
    assert converter.structure(data, TrustSettings) == settings
