"""Who someone is in a room, as every replica names them (shared by memory and reservations)."""

from __future__ import annotations

import attrs


@attrs.frozen
class Person:
    """Someone in a room: the fingerprint identifies them; the label is their own name."""

    fingerprint: str
    label: str
