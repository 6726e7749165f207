"""A local roster row, as the membership rules decide it and the store keeps it.

``named`` says where a member's name came from, so that a better source replaces a worse one and
never the other way round: :data:`PLACEHOLDER` (made from the fingerprint), :data:`BY_ADDER`
(whoever added them said so), :data:`BY_SELF` (the member's own signed ops).
"""

from __future__ import annotations

import attrs

PLACEHOLDER, BY_ADDER, BY_SELF = 0, 1, 2


@attrs.frozen
class KnownMember:
    """One local roster row. ``state`` is ``member`` (joined) or ``invited``."""

    fingerprint: str
    label: str
    ed_pub: bytes = attrs.field(repr=False)
    x_pub: bytes = attrs.field(repr=False)
    state: str = "member"
    added_by: str | None = None
    gone: bool = False
    named: int = BY_ADDER
