"""Models of the pairing exchange: what each side offers, and a pairing's restorable snapshot.

The offer travels sealed (see ``crosstalk.core.pairing``) as compact JSON through the one
converter, bytes as base64. Both sides send one. For ``room`` the inviter's offer also carries
the new room of two (:class:`RoomGrant`); for ``link`` the inviter's offer carries the identity
bundle (opaque bytes here; the store defines what is inside). The joiner's offer carries neither.
"""

from __future__ import annotations

import enum
import json
import typing
from collections.abc import Callable

import attrs

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import structure_remote, unstructure

KEY_SIZE = 32
MAX_TEXT = 200
MAX_URL = 2048


class Purpose(enum.Enum):
    """What a pairing is for: a room of two with someone, or linking another of your machines."""

    ROOM = "room"
    LINK = "link"

    @property
    def word_count(self) -> int:
        """How many words the code has: 4 for ``room``, 6 for ``link``."""
        return 4 if self is Purpose.ROOM else 6


class Role(enum.Enum):
    """Which side of a pairing: the one who printed the code, or the one who typed it."""

    INVITER = "inviter"
    JOINER = "joiner"

    @property
    def other(self) -> Role:
        """The role of the other side."""
        return Role.JOINER if self is Role.INVITER else Role.INVITER


def _key_bytes(_instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != KEY_SIZE:
        raise ValueError(f"{attribute.name} must be {KEY_SIZE} bytes")


def _text(limit: int) -> Callable[[object, attrs.Attribute[str], str], None]:
    def check(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
        if not isinstance(value, str) or not value or len(value) > limit:
            raise ValueError(f"{attribute.name} must be 1 to {limit} characters")

    return check


@attrs.frozen
class RoomGrant:
    """The room of two that a ``room`` pairing creates: its relay id and its epoch-0 key."""

    room_id: str = attrs.field(validator=_text(MAX_TEXT))
    key: bytes = attrs.field(validator=_key_bytes, repr=False)


@attrs.frozen
class Offer:
    """What one side tells the other once the words are confirmed.

    ``agent`` marks a machine participant (``--agent``). ``relay_url`` and ``relay_key`` let the
    joiner pin the relay the inviter uses.
    """

    label: str = attrs.field(validator=_text(MAX_TEXT))
    machine: str = attrs.field(validator=_text(MAX_TEXT))
    agent: bool = attrs.field(validator=attrs.validators.instance_of(bool))
    ed_pub: bytes = attrs.field(validator=_key_bytes)
    x_pub: bytes = attrs.field(validator=_key_bytes)
    relay_url: str = attrs.field(validator=_text(MAX_URL))
    relay_key: bytes = attrs.field(validator=_key_bytes)
    room: RoomGrant | None = None
    identity_bundle: bytes | None = attrs.field(default=None, repr=False)


@attrs.frozen(repr=False)
class PairingSnapshot:
    """Everything a restarted pairing actor needs to resume. Secret: store it like a key.

    ``spake_state`` is the serialised SPAKE2 side (it holds the password). The snapshot taken
    right after ``start`` stays valid for the whole exchange: everything after it is derived
    deterministically from the peer's messages, which the relay replays on re-attach.
    """

    purpose: Purpose
    role: Role
    slot: str
    spake_state: bytes
    my_message: bytes
    offer: Offer
    offer_nonce: bytes

    def __repr__(self) -> str:
        return f"PairingSnapshot(purpose={self.purpose}, role={self.role}, slot={self.slot!r})"


def _to_json(value: object) -> bytes:
    return json.dumps(unstructure(value), separators=(",", ":"), sort_keys=True).encode()


def _from_json(data: bytes, what: str) -> object:
    try:
        return json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise RemoteProtocolError(f"{what} is not JSON") from None


# The JSON type each field must arrive as. The converter coerces (``bool("no")`` is True to
# it), so peer data is checked for shape first: a wrong JSON type is a malformed offer.
_JSON_TYPES: dict[type, type] = {str: str, bytes: str, bool: bool}


def _check_shape(raw: object, cls: type, what: str) -> None:
    if not isinstance(raw, dict):
        raise RemoteProtocolError(f"{what} is not a JSON object")
    for field in attrs.fields(cls):
        value = raw.get(field.name)
        kinds = typing.get_args(field.type) or (field.type,)
        if value is None and type(None) in kinds:
            continue
        kind = next(k for k in kinds if k is not type(None))
        if attrs.has(kind):
            _check_shape(value, kind, what)
        elif not isinstance(value, _JSON_TYPES[kind]):
            raise RemoteProtocolError(f"{what} has a malformed {field.name}")


def encode_offer(offer: Offer) -> bytes:
    """The offer as compact JSON bytes (what gets sealed)."""
    return _to_json(offer)


def decode_offer(data: bytes) -> Offer:
    """Parse an opened offer; raise RemoteProtocolError if it is malformed."""
    raw = _from_json(data, "the offer")
    _check_shape(raw, Offer, "the offer")
    return structure_remote(raw, Offer)


def encode_snapshot(snapshot: PairingSnapshot) -> bytes:
    """The snapshot as JSON bytes."""
    return _to_json(snapshot)


def decode_snapshot(data: bytes) -> PairingSnapshot:
    """Parse a stored snapshot; raise RemoteProtocolError if it is malformed."""
    return structure_remote(_from_json(data, "the pairing snapshot"), PairingSnapshot)


# Resolve the string annotations (``from __future__ import annotations``) once, so that
# ``_check_shape`` sees real types.
attrs.resolve_types(RoomGrant)
attrs.resolve_types(Offer)
