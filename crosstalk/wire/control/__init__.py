"""Control-socket framing: one JSON object per line (DESIGN §9).

A request is ``{"v": 1, "op": NAME, ...params}``; the reply is ``{"ok": true, ...result}`` or
``{"ok": false, "error": {"code", "message"}}``. This module parses and renders lines; which
ops exist is decided by the daemon's op table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from crosstalk.errors import CrosstalkError, InvalidRequest, TooLarge

PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 1024 * 1024


@attrs.frozen
class ControlRequest:
    """One parsed request line: the op's name and its raw parameters."""

    op: str
    params: Mapping[str, Any]

    @classmethod
    def from_line(cls, line: bytes) -> ControlRequest:
        """Parse one line, or raise InvalidRequest/TooLarge with a sentence for the client."""
        if len(line) > MAX_REQUEST_BYTES:
            raise TooLarge("Control requests are limited to 1 MiB.")
        try:
            data = json.loads(line)
            # Text that cannot be stored or re-sent (a lone surrogate such as "\ud800") is
            # refused here, with a sentence, rather than failing deep inside an op.
            json.dumps(data, ensure_ascii=False).encode()
        except RecursionError:
            raise InvalidRequest("The request is nested too deeply.") from None
        except UnicodeEncodeError:
            raise InvalidRequest(
                "The request holds text that is not valid Unicode (a lone surrogate)."
            ) from None
        except (ValueError, UnicodeDecodeError):
            raise InvalidRequest("The request is not valid JSON.") from None
        if not isinstance(data, dict):
            raise InvalidRequest("The request must be a JSON object.")
        version = data.pop("v", None)
        if version != PROTOCOL_VERSION:
            raise InvalidRequest(f'Unsupported protocol version {version!r}; send "v": 1.')
        op = data.pop("op", None)
        if not isinstance(op, str) or not op:
            raise InvalidRequest('The request needs an "op" naming the operation.')
        return cls(op=op, params=data)


def render_ok(result: Mapping[str, Any]) -> bytes:
    """A success reply line."""
    return (json.dumps({"ok": True, **result}) + "\n").encode()


def render_error(error: CrosstalkError) -> bytes:
    """An error reply line."""
    return (json.dumps({"ok": False, "error": error.to_dict()}) + "\n").encode()
