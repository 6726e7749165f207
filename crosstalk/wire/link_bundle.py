"""The identity bundle ``crosstalk link`` hands to another of your machines.

It travels only inside the PAKE-sealed offer (after both sides proved they know the six words),
compressed, and carries everything that makes a home this identity: the two secret seeds, the
label, contacts, rooms with their keys by epoch and rosters, where each room's relay cursor
stands, and the relay with its pinned key. The new machine starts each room at the cursor given
here, so it receives everything sent to the identity from the moment of linking.
"""

from __future__ import annotations

import json
import zlib

import attrs

from crosstalk.errors import RemoteProtocolError, TooLarge
from crosstalk.wire.converter import converter, structure_remote

# The sealed offer travels through a relay pairing slot, whose parts are small.
MAX_BUNDLE = 5 * 1024


@attrs.frozen
class BundleContact:
    fingerprint: str
    label: str
    machine: str
    signing_key: bytes
    box_key: bytes
    is_agent: bool


@attrs.frozen
class BundleMember:
    fingerprint: str
    label: str
    signing_key: bytes
    box_key: bytes
    state: str


@attrs.frozen
class EpochKey:
    epoch: int
    key: bytes = attrs.field(repr=False)


@attrs.frozen
class BundleRoom:
    room_id: str
    name: str
    kind: str
    state: str
    epoch: int
    keys: list[EpochKey]
    members: list[BundleMember]
    cursor: int


@attrs.frozen
class IdentityBundle:
    label: str
    signing_seed: bytes = attrs.field(repr=False)
    box_secret: bytes = attrs.field(repr=False)
    relay_url: str
    relay_key: bytes
    contacts: list[BundleContact]
    rooms: list[BundleRoom]


def encode_bundle(bundle: IdentityBundle) -> bytes:
    """Compressed JSON; TooLarge when it cannot fit a pairing slot."""
    raw = json.dumps(converter.unstructure(bundle), separators=(",", ":"), sort_keys=True)
    packed = zlib.compress(raw.encode(), 9)
    if len(packed) > MAX_BUNDLE:
        raise TooLarge(
            f"This identity's rooms and contacts take {len(packed)} bytes compressed, more than "
            f"the {MAX_BUNDLE} a link can carry."
        )
    return packed


def decode_bundle(data: bytes) -> IdentityBundle:
    """The bundle from an opened offer, or RemoteProtocolError."""
    try:
        raw = zlib.decompressobj().decompress(data, 1 << 20)
        value = json.loads(raw)
    except (zlib.error, ValueError, UnicodeDecodeError):
        raise RemoteProtocolError("the identity bundle does not parse") from None
    return structure_remote(value, IdentityBundle)
