"""`crosstalk room new|join` (and, later, the rest of `room`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from crosstalk.cli.calling import ask, show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors, visible
from crosstalk.client import call, ensure_daemon
from crosstalk.hook.control import ControlConnection
from crosstalk.paths import Home

app = typer.Typer(
    help="Pair with someone, or manage your rooms (no subcommand: list them).",
    invoke_without_command=True,
)

LabelOption = Annotated[
    str | None, typer.Option("--label", help="Your name as others will see it.")
]
AgentOption = Annotated[
    bool, typer.Option("--agent", help="Join as a machine (a bot), not a person.")
]
PAIRING_WAIT = 16 * 60.0


def _check_code(code: str, *, link: bool) -> None:
    """Refuse a malformed pairing or link code before starting the daemon.

    Raises:
        UsageError: the code is not one ``room new`` (or ``link``) prints.
    """
    from crosstalk.core.invite import Invite  # attrs and cattrs: only for the two that parse
    from crosstalk.wire.pairing import Purpose

    Invite.parse(code, purpose=Purpose.LINK if link else Purpose.ROOM)


def _joined_text(line: dict[str, Any]) -> str:
    return (
        f"Now in a room with {visible(str(line['joined']), one_line=True)}.\n\n"
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
    h = Home.resolve(home)
    ensure_daemon(h, needs_identity=False)
    with ControlConnection(h.socket, timeout=60.0) as conn:
        conn.send("room_new", {"label": label, "agent": agent, "host": host, "public": public})
        invite = conn.receive()
        invite.pop("ok", None)
        # Who can join comes first: it decides whether to read the words out at all.
        note = f"{invite['note']}\n\n" if invite.get("note") else ""
        show(
            json_output,
            invite,
            (
                f"{note}Read this to the other person; it expires in "
                f"{invite['expires_in'] // 60} minutes:\n\n    {invite['invite']}\n"
            ),
        )
        conn.extend_deadline(PAIRING_WAIT)
        joined = conn.receive()
        joined.pop("ok", None)
        show(json_output, joined, _joined_text(joined))


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
    _check_code(code, link=False)  # a malformed code needs no daemon to refuse
    h = Home.resolve(home)
    ensure_daemon(h, needs_identity=False)
    with ControlConnection(h.socket, timeout=PAIRING_WAIT) as conn:
        conn.send("room_join", {"code": code, "label": label, "agent": agent})
        joined = conn.receive()
    joined.pop("ok", None)
    show(json_output, joined, _joined_text(joined))


def link(
    code: Annotated[
        str | None, typer.Argument(help="On the new machine: the code the other one showed.")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Make another of your machines the same identity (six words, read between them)."""
    h = Home.resolve(home)
    if code is not None:
        _check_code(code, link=True)
    ensure_daemon(h, needs_identity=code is None)
    if code is not None:
        linked = call(h, "link_join", {"code": code}, timeout=PAIRING_WAIT)
        linked.pop("ok", None)
        human = f"This machine is now {linked['label']} ({linked['fingerprint']})."
        show(json_output, linked, human)
        return
    with ControlConnection(h.socket, timeout=60.0) as conn:
        conn.send("link_new", {})
        invite = conn.receive()
        invite.pop("ok", None)
        show(
            json_output,
            invite,
            (
                "On the other machine, run `crosstalk link CODE` with this code "
                f"(it expires in {invite['expires_in'] // 60} minutes):\n\n    {invite['invite']}\n"
            ),
        )
        conn.extend_deadline(PAIRING_WAIT)
        linked = conn.receive()
        linked.pop("ok", None)
        show(json_output, linked, f"Linked: the other machine is now {linked['label']} too.")


link = reports_errors(link)


def _member_text(member: dict[str, Any]) -> str:
    """``carl``, ``carl (via #r3)`` for someone you never paired with, ``(invited)`` if pending."""
    text = visible(str(member["label"]), one_line=True)
    if member.get("via"):
        text += f" (via #{visible(str(member['via']), one_line=True)})"
    if member.get("state") == "invited":
        text += " (invited)"
    return text


def _room_lines(rooms: list[dict[str, Any]]) -> str:
    if not rooms:
        return "No rooms yet. `crosstalk room new` pairs you with someone."
    lines = []
    for room in rooms:
        shown = visible(str(room["name"]), one_line=True)  # a name others gave: one line
        name = shown if room["kind"] == "direct" else f"#{shown}"
        if room.get("state") == "removed":
            remover = visible(str(room.get("removed_by") or ""), one_line=True)
            by = f" by {remover}" if remover else ""
            lines.append(f"  {name:<16} removed from {name}{by}")
            continue
        if room["kind"] == "direct":
            what = "just the two of you"
        else:
            what = ", ".join(_member_text(m) for m in room["members"])
        pending = ""
        if room["pending"]:
            by = visible(str(room.get("invited_by") or ""), one_line=True)
            via = visible(str(room.get("invited_via") or ""), one_line=True)
            origin = (f" from {by}" if by else "") + (f" via #{via}" if via else "")
            pending = f"  (invitation{origin}: `crosstalk room accept` or `decline`)"
        lines.append(f"  {name:<16} {what}{pending}")
        if room.get("relay_alarm"):
            lines.append(f"  {'':<16} warning: {room['relay_alarm']}")
    return "\n".join(lines)


def _rooms(json_output: bool, home: str | None) -> None:
    rooms = ask(home, "rooms")["rooms"]
    show(json_output, {"rooms": rooms}, _room_lines(rooms))


@app.callback()
def room_main(ctx: typer.Context, json_output: JsonOption = False, home: HomeOption = None) -> None:
    """List your rooms when no subcommand is given."""
    if ctx.invoked_subcommand is None:
        reports_errors(_rooms)(json_output=json_output, home=home)


@app.command("list")
@reports_errors
def list_(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """List your rooms and pending invitations."""
    _rooms(json_output, home)


def _admin(op: str, params: dict[str, Any], home: str | None) -> dict[str, Any]:
    return ask(home, op, params, timeout=60.0)


@app.command("create")
@reports_errors
def create(
    name: Annotated[str, typer.Argument(help="The room's name.")],
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Create a named room with just you in it; then `invite` people."""
    reply = _admin("room_create", {"name": name}, home)
    show(json_output, reply, f"Created #{reply['room']}.")


@app.command("invite")
@reports_errors
def invite(
    room: Annotated[str, typer.Argument(help="The room.")],
    peers: Annotated[list[str], typer.Argument(help="People you already share a room with.")],
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Invite people you already share a room with; they must accept."""
    reply = _admin("room_invite", {"room": room, "peers": peers}, home)
    show(
        json_output,
        reply, f"Invited {', '.join(reply['invited'])} to #{reply['room']}."
    )


def _simple(op: str, verb: str) -> Any:
    @reports_errors
    def command(
        room: Annotated[str, typer.Argument(help="The room.")],
        json_output: JsonOption = False,
        home: HomeOption = None,
    ) -> None:
        reply = _admin(op, {"room": room}, home)
        show(json_output, reply, f"{verb} #{reply['room']}.")

    return command


app.command("accept", help="Accept an invitation to a room.")(_simple("room_accept", "Joined"))
app.command("decline", help="Decline an invitation to a room.")(_simple("room_decline", "Declined"))
app.command("leave", help="Leave a room; what it knows leaves this machine.")(
    _simple("room_leave", "Left")
)


@app.command("kick")
@reports_errors
def kick(
    room: Annotated[str, typer.Argument(help="The room.")],
    peer: Annotated[str, typer.Argument(help="Who to remove.")],
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Remove someone from a room; the room's key changes so they read nothing after."""
    reply = _admin("room_kick", {"room": room, "peer": peer}, home)
    show(
        json_output,
        reply, f"Removed {reply['removed']} from #{reply['room']}; new key epoch {reply['epoch']}."
    )


@app.command("edits")
@reports_errors
def edits(
    room: Annotated[str, typer.Argument(help="The room.")],
    share: Annotated[
        str | None, typer.Argument(help="on or off (default: show the setting).")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Show or set whether this room hears which files your agents change (never contents)."""
    from crosstalk.cli.cmd_edits import on_off

    params: dict[str, Any] = {"room": room}
    if share is not None:
        params["share"] = on_off(share)
    reply = ask(home, "edits", params)
    [shown] = reply["rooms"] or [{"room": room, "id": "", "share": False}]
    state = "hears" if shown["share"] else "does not hear"
    show(
        json_output,
        {"room": shown["room"], "id": shown["id"], "share": shown["share"]},
        f"#{visible(str(shown['room']), one_line=True)} {state} which files your agents change.",
    )
