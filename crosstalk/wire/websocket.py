"""What trio-websocket and wsproto do at a WebSocket's close that is not a fault of either side.

When one side has sent its close frame and a ping from the other is already on its way,
trio-websocket's reader answers the ping with a pong, and wsproto refuses to send it in the
``LOCAL_CLOSING`` state: ``LocalProtocolError`` leaves the reader task and ends the nursery that
holds the connection. The connection was closing anyway; the relay shell and the daemon's link
let that one error go (anything else of the kind is a bug and still raised).

wsproto is imported when first needed: a daemon imports it only once it dials a relay.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def is_late_pong(exc: BaseException) -> bool:
    """Whether ``exc`` is wsproto refusing the pong to a ping that crossed our close frame."""
    from wsproto.utilities import LocalProtocolError

    text = str(exc)
    return isinstance(exc, LocalProtocolError) and "Pong" in text and "LOCAL_CLOSING" in text


def _not_a_late_pong(exc: BaseException) -> bool:
    # For subgroup(): False for a nested group, so that subgroup() looks inside it.
    from wsproto.utilities import LocalProtocolError

    return isinstance(exc, LocalProtocolError) and not is_late_pong(exc)


@contextmanager
def late_pongs_ignored() -> Iterator[None]:
    """Let a refused late pong (:func:`is_late_pong`) leave a connection's nursery quietly;
    any other ``LocalProtocolError`` is raised as it came."""
    from wsproto.utilities import LocalProtocolError

    try:
        yield
    except* LocalProtocolError as group:
        if group.subgroup(_not_a_late_pong) is not None:
            raise
