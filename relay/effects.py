"""What the relay core asks its shell to do."""

from __future__ import annotations

from typing import Union

import attrs

from crosstalk.wire.relay import RelayFrame
from relay.storage import Write


@attrs.frozen
class Send:
    """Send ``frame`` on connection ``conn`` (after every write before it is committed)."""

    conn: int
    frame: RelayFrame


@attrs.frozen
class Close:
    """Close connection ``conn`` (after the frames before it are sent)."""

    conn: int
    reason: str


Effect = Union[Send, Close, Write]  # noqa: UP007 - Write is itself a Union alias
