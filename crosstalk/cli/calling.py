"""The one way a command calls a control op and prints its reply.

Every ``cmd_*`` module that talks to the daemon does the same three things: resolve the home and
start its daemon if need be, make one request (params left out when None, so the daemon applies
the op's defaults from the op table), then print the reply: with ``--json`` the reply's fields as
the daemon sent them (the op's reply model, unstructured), else the command's own human text.
Standard library only, like the rest of the CLI's start: the reply stays the JSON it came as
(:data:`Reply`), the one edge where it is a plain mapping.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from crosstalk.cli.output import Output
from crosstalk.client import REQUEST_TIMEOUT, call, ensure_daemon
from crosstalk.paths import Home

Reply = dict[str, Any]
"""An op's reply as it came off the control socket: its reply model's fields, without ``ok``."""


def ask(
    home: str | None,
    op: str,
    params: Mapping[str, object] | None = None,
    *,
    timeout: float = REQUEST_TIMEOUT,
    here: bool = False,
    needs_identity: bool = True,
) -> Reply:
    """One request to this home's daemon (started if need be); the reply's fields.

    Args:
        home: ``--home``, or None for the default.
        op: the op's name in the op table.
        params: its params; a None value is left out (the op's default applies).
        timeout: how long to wait for the reply.
        here: send the current directory as ``cwd`` (the ops that find a project's room).
        needs_identity: False for the ops that make the identity (pairing, linking).
    """
    resolved = Home.resolve(home)
    ensure_daemon(resolved, needs_identity=needs_identity)
    sent = {key: value for key, value in (params or {}).items() if value is not None}
    if here:
        sent["cwd"] = os.getcwd()
    reply = call(resolved, op, sent, timeout=timeout)
    reply.pop("ok", None)
    return reply


def show(json_output: bool, reply: Mapping[str, Any], human: str | None) -> None:
    """Print ``reply`` as one JSON object with ``--json``, else ``human``."""
    Output(json_mode=json_output).emit(reply, human)


def run(
    home: str | None,
    op: str,
    params: Mapping[str, object] | None,
    *,
    json_output: bool,
    human: Callable[[Reply], str],
    timeout: float = REQUEST_TIMEOUT,
    here: bool = False,
) -> Reply:
    """:func:`ask`, then :func:`show` the reply (``human`` makes its text); the reply."""
    reply = ask(home, op, params, timeout=timeout, here=here)
    show(json_output, reply, human(reply))
    return reply
