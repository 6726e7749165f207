"""`crosstalk room new|join` (and, later, the rest of `room`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import Output, reports_errors
from crosstalk.client import call, ensure_daemon
from crosstalk.core.invite import Invite
from crosstalk.hook.control import ControlConnection
from crosstalk.paths import Home
from crosstalk.wire.pairing import Purpose

app = typer.Typer(help="Pair with someone, or manage your rooms.", no_args_is_help=True)

LabelOption = Annotated[
    str | None, typer.Option("--label", help="Your name as others will see it.")
]
AgentOption = Annotated[
    bool, typer.Option("--agent", help="Join as a machine (a bot), not a person.")
]
PAIRING_WAIT = 16 * 60.0


def _joined_text(line: dict[str, Any]) -> str:
    return (
        f"Now in a room with {line['joined']}.\n\n"
        f"  them  {line['them']}\n"
        f"  you   {line['you']}\n\n"
        "Read yours aloud: your 'them' should be their 'you', and theirs should be yours."
    )


@app.command("new")
@reports_errors
def new(
    label: LabelOption = None,
    agent: AgentOption = False,
    host: Annotated[
        bool, typer.Option("--host", help="Run a relay others on your network can reach.")
    ] = False,
    public: Annotated[
        bool, typer.Option("--public", help="Reach it through a Cloudflare quick tunnel.")
    ] = False,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Start a pairing: prints four words to read to the other person, then waits for them."""
    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    ensure_daemon(h)
    with ControlConnection(h.socket, timeout=60.0) as conn:
        conn.send("room_new", {"label": label, "agent": agent, "host": host, "public": public})
        invite = conn.receive()
        invite.pop("ok", None)
        note = f"\n{invite['note']}\n" if invite.get("note") else ""
        out.emit(
            invite,
            (
                "Read this to the other person; it expires in "
                f"{invite['expires_in'] // 60} minutes:\n\n    {invite['invite']}\n{note}"
            ),
        )
        conn.extend_deadline(PAIRING_WAIT)
        joined = conn.receive()
        joined.pop("ok", None)
        out.emit(joined, _joined_text(joined))


@app.command("join")
@reports_errors
def join(
    code: Annotated[str, typer.Argument(help="The code the other person read to you.")],
    label: LabelOption = None,
    agent: AgentOption = False,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Join a pairing with the code the other person read to you."""
    out = Output(json_mode=json_output)
    Invite.parse(code, purpose=Purpose.ROOM)  # a malformed code needs no daemon to refuse
    h = Home.resolve(home)
    ensure_daemon(h)
    with ControlConnection(h.socket, timeout=PAIRING_WAIT) as conn:
        conn.send("room_join", {"code": code, "label": label, "agent": agent})
        joined = conn.receive()
    joined.pop("ok", None)
    out.emit(joined, _joined_text(joined))


def link(
    code: Annotated[
        str | None, typer.Argument(help="On the new machine: the code the other one showed.")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Make another of your machines the same identity (six words, read between them)."""
    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    if code is not None:
        Invite.parse(code, purpose=Purpose.LINK)
    ensure_daemon(h)
    if code is not None:
        linked = call(h, "link_join", {"code": code}, timeout=PAIRING_WAIT)
        linked.pop("ok", None)
        out.emit(linked, f"This machine is now {linked['label']} ({linked['fingerprint']}).")
        return
    with ControlConnection(h.socket, timeout=60.0) as conn:
        conn.send("link_new", {})
        invite = conn.receive()
        invite.pop("ok", None)
        out.emit(
            invite,
            (
                "On the other machine, run `crosstalk link CODE` with this code "
                f"(it expires in {invite['expires_in'] // 60} minutes):\n\n    {invite['invite']}\n"
            ),
        )
        conn.extend_deadline(PAIRING_WAIT)
        linked = conn.receive()
        linked.pop("ok", None)
        out.emit(linked, f"Linked: the other machine is now {linked['label']} too.")


link = reports_errors(link)
