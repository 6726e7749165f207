"""`crosstalk send`, `ask`, `answer`, `read`, `slice`, `post` and `watch`."""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Any

import typer

from crosstalk.cli import calling
from crosstalk.cli.calling import show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors, visible
from crosstalk.cli.reading import read_messages
from crosstalk.cli.watching import RECONNECT, watch_arrivals
from crosstalk.client import ensure_daemon
from crosstalk.errors import UsageError
from crosstalk.hook.control import ControlConnection
from crosstalk.paths import Home

SEND_TIMEOUT = 30.0
ASK_LIMIT = 24 * 3600.0  # the longest ask the daemon takes (features/asks/ops.py)


@reports_errors
def send(
    to: Annotated[str, typer.Argument(help="Who: a person's name.")],
    text: Annotated[str, typer.Argument(help="The message.")],
    intent: Annotated[
        str, typer.Option("--intent", help="fyi (waits until they are idle), question, blocking.")
    ] = "fyi",
    thread: Annotated[str | None, typer.Option("--thread", help="Thread id.")] = None,
    reply_to: Annotated[str | None, typer.Option("--reply-to", help="Message id.")] = None,
    slices: Annotated[
        list[str] | None,
        typer.Option(
            "--slice", help="Attach: diff[:REF], file:PATH, turns[:N] or note:TEXT (repeatable)."
        ),
    ] = None,
    handoff: Annotated[
        bool, typer.Option("--handoff", help="A work item (with its slices) for them to take.")
    ] = False,
    unprompted: Annotated[
        bool, typer.Option("--unprompted", help="Self-initiated: rationed, needs --because.")
    ] = False,
    because: Annotated[
        str | None, typer.Option("--because", help="Why it matters to them.")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Send a message to a person, person/session, person/project, #room or me/session."""
    params = {
        "to": to,
        "text": text,
        "intent": intent,
        "thread": thread,
        "reply_to": reply_to,
        "slices": slices or [],
        "cwd": os.getcwd(),
        "kind": "handoff" if handoff else "message",
        "unprompted": unprompted,
        "because": because,
    }
    reply = calling.ask(home, "send", params, timeout=SEND_TIMEOUT)
    if not reply.get("truncated"):
        reply.pop("truncated", None)
    cut = "".join(f"; slice {i} was cut to its cap" for i in reply.get("truncated", []))
    to = visible(", ".join(reply["to"]), one_line=True)
    show(json_output, reply, f"{reply['state']}: to {to} ({reply['id'][:8]}){cut}")


@reports_errors
def read(
    all_messages: Annotated[
        bool, typer.Option("--all", help="Include messages already read.")
    ] = False,
    session: Annotated[str | None, typer.Option("--session", help="As this session.")] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Show the messages waiting for you; once shown, they are marked read."""
    # The plain forms never get here: crosstalk.cli.entry runs them without typer.
    read_messages(
        all_messages=all_messages, session=session, json_output=json_output, home=home
    )


@reports_errors
def ask(
    to: Annotated[str, typer.Argument(help="Who: a person (or person/session).")],
    text: Annotated[str, typer.Argument(help="The question.")],
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait.")] = 300.0,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Ask someone a question and wait for the answer (Ctrl-C cancels it cleanly)."""
    h = Home.resolve(home)
    ensure_daemon(h)
    # The daemon refuses a wait past a day (or not above 0) as usage; the socket's own deadline
    # must stay a real number meanwhile (1e308 overflows it; min() also turns nan into a day).
    wait = min(ASK_LIMIT, timeout)
    with ControlConnection(h.socket, timeout=wait + SEND_TIMEOUT) as conn:
        conn.send("ask", {"to": to, "text": text, "timeout": timeout})
        while True:
            reply = conn.receive()
            reply.pop("ok", None)
            if "answer" in reply:
                show(json_output, reply, f"{reply['from']}: {reply['answer']}")
                return
            waiting = visible(str(reply["waiting_on_each_other"]))  # peers' names
            sys.stderr.write(f"crosstalk: you and {waiting} are waiting on each other.\n")


@reports_errors
def answer(
    to: Annotated[str, typer.Argument(help="Who asked.")],
    correlation: Annotated[
        str, typer.Argument(metavar="ID", help="The question's id as `read` shows it.")
    ],
    text: Annotated[str, typer.Argument(help="Your answer.")],
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Answer a question someone asked you."""
    params = {"to": to, "correlation": correlation, "text": text}
    reply = calling.ask(home, "answer", params, timeout=SEND_TIMEOUT)
    answered = {"id": reply["id"], "state": reply["state"]}
    show(json_output, answered, f"{reply['state']}: answered {to}")


@reports_errors
def slice_(
    message_id: Annotated[str, typer.Argument(metavar="ID", help="The message.")],
    index: Annotated[int, typer.Argument(help="Which slice (from 0).")] = 0,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Fetch the content of a slice attached to a message."""
    reply = calling.ask(home, "read_slice", {"id": message_id, "index": index})
    show(json_output, reply, reply["content"])


@reports_errors
def post(
    text: Annotated[str, typer.Argument(help="What to tell your own sessions.")],
    intent: Annotated[
        str, typer.Option("--intent", help="fyi (waits until idle) or blocking (now).")
    ] = "fyi",
    source: Annotated[str, typer.Option("--source", help="Who is posting (ci, cron…).")] = "local",
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Tell your own agent sessions something (a build finished, tests failed): no relay."""
    reply = calling.ask(home, "post", {"text": text, "intent": intent, "source": source})
    show(json_output, {"posted_as": reply["posted_as"]}, f"posted as {reply['posted_as']}")


@reports_errors
def watch(
    text: Annotated[bool, typer.Option("--text", help="Include each message's words.")] = False,
    reconnect: Annotated[
        float,
        typer.Option(
            "--reconnect", min=0.0, metavar="SECONDS",
            help="How long a stopped daemon has to come back before watch ends (exit 1).",
        ),
    ] = RECONNECT,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Print one JSON line per arrival, as they come (for anything that can watch a stream);
    it carries on across a daemon restart, each arrival once."""
    watch_arrivals(Home.resolve(home), text=text, json_output=json_output, reconnect=reconnect)


#: The start of each text the human ``sent`` shows (escaped after the cut, so no escape is split).
SENT_TEXT = 60
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_since(text: str) -> float:
    """``--since`` as seconds ago: ``90s``, ``30m``, ``2h``, ``7d``, or a bare number of days.

    Raises:
        UsageError: anything else, or a negative or absurd duration.
    """
    raw = text.strip().lower()
    unit = _UNITS.get(raw[-1:], None)
    number = raw[:-1] if unit is not None else raw
    try:
        amount = float(number) * (unit if unit is not None else _UNITS["d"])
    except ValueError:
        raise UsageError(
            f"--since {text.strip()!r} is not a duration: use e.g. 30m, 2h or 7d."
        ) from None
    if not 0 <= amount <= 100 * 365 * _UNITS["d"]:  # also refuses nan and inf
        raise UsageError(f"--since {text.strip()!r} is out of range: use e.g. 30m, 2h or 7d.")
    return amount


def _sent_line(row: dict[str, Any]) -> str:
    text = str(row.get("text") or "")
    start = text[:SENT_TEXT] + ("…" if len(text) > SENT_TEXT else "")
    line = f"  {row['state']:<9} {row['to']:<16} {row['kind']:<8} {row['id'][:8]}  {start}"
    if row.get("reason"):
        line += f"  ({row['reason']})"
    return visible(line, one_line=True)  # what we wrote, and a peer's name, stay on one line


@reports_errors
def sent(
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=1000, help="At most this many (default 50).")
    ] = 50,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only what you sent within this long: 30m, 2h, 7d."),
    ] = None,
    before: Annotated[
        str | None,
        typer.Option("--before", help="Only what you sent before this message id (a page's next)."),
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """What you sent, newest first, and how far each got: queued, sent, delivered, read or
    refused (with who and why). Page back with --before, or --json's "next"."""
    params: dict[str, Any] = {"limit": limit, "before": before}
    if since is not None:
        params["since"] = time.time() - parse_since(since)
    reply = calling.ask(home, "sent", params)
    rows, more = reply["sent"], reply.get("next")
    human = "\n".join(_sent_line(r) for r in rows)
    if more:
        human += f"\n  (more: crosstalk sent --before {more})"
    # CLI.md names the list "messages"; "sent" is the name it had first (scripts and tests read it).
    show(json_output, {"messages": rows, "sent": rows, "next": more}, human or "Nothing sent yet.")


@reports_errors
def thread(
    words: Annotated[
        list[str], typer.Argument(metavar="ID | close ID", help="A thread, or a message in one.")
    ],
    summary: Annotated[
        str | None, typer.Option("--summary", help="With close: how it ended.")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Show a thread in order; `thread close ID --summary TEXT` closes it and tells everyone."""
    if len(words) == 2 and words[0] == "close":
        if summary is None:
            raise UsageError("Say how the thread ended: --summary TEXT.")
        params = {"id": words[1], "summary": summary}
        reply = calling.ask(home, "thread_close", params, timeout=SEND_TIMEOUT)
    elif len(words) == 1:
        reply = calling.ask(home, "thread", {"id": words[0]})
    else:
        raise UsageError("Usage: crosstalk thread ID | thread close ID --summary TEXT.")
    show(json_output, reply, _thread_text(reply))


def _thread_text(reply: dict[str, Any]) -> str:
    """A thread for a person: one line per message, its words' further lines indented under
    it, and peers' names kept to their line, so no newline they wrote starts a line of ours."""

    def one(value: object) -> str:
        return visible(str(value), one_line=True)

    def words(text: object) -> str:
        return str(text).replace("\n", "\n    ")

    lines = [f"thread {one(reply['thread'])}" + (" (closed)" if reply["closed"] else "")]
    for m in reply["messages"]:
        who = f"{one(m['from'])} → {one(m['to'])}" if m.get("to") else one(m["from"])
        reply_to = f" (reply to {one(m['reply_to'][:8])})" if m.get("reply_to") else ""
        lines.append(f"  [{one(m['id'][:8])}] {who}{reply_to}: {words(m['text'])}")
    if reply["closed"]:
        by = one(reply.get("closed_by") or "?")
        lines.append(f"  summary ({by}): {words(reply['summary'])}")
    return "\n".join(lines)


@reports_errors
def peers(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Who you share rooms with: online, their level, unread messages."""
    reply = calling.ask(home, "peers")
    show(json_output, reply, peers_text(reply))


def peers_text(reply: dict[str, Any]) -> str:
    """``peers`` for a person: one line per peer with their fingerprint (to compare with the
    one they see in their own ``crosstalk peers``), then their sessions and edits."""
    lines = [f"you: {reply['me']['label']} ({reply['me']['fingerprint']})"]
    for p in reply["peers"]:
        state = "online" if p["online"] else "offline"
        extra = (" · muted" if p["muted"] else "") + (" · bot" if p.get("agent") else "")
        unread = f" · {p['unread']} unread" if p["unread"] else ""
        label = visible(p["label"], one_line=True)  # peers' names stay on their line
        fingerprint = visible(str(p["fingerprint"]), one_line=True)
        lines.append(f"  {label:<16} {state:<8} {p['level']}{extra}{unread} · {fingerprint}")
        for s in p.get("sessions", []):  # what they published: `send LABEL/NAME` reaches it
            lines.append(
                f"    {label}/{visible(s['name'], one_line=True)}"
                + (f" in {visible(s['project'], one_line=True)}" if s["project"] else "")
                + f" ({visible(s['status'], one_line=True)})"
            )
            lines += _edited_lines(s)
    for s in reply["me"].get("sessions", []):
        if s.get("edits"):
            lines.append(f"  you/{visible(s['name'], one_line=True)}")
            lines += _edited_lines(s)
    return "\n".join(lines)


def _edited_lines(session: dict[str, Any], shown: int = 5) -> list[str]:
    """A session's recent edits, newest first: ``touching repo/path (3 min ago)``."""
    edits = session.get("edits") or []
    now = time.time()
    lines = [
        f"      touching {visible(e['repo'], one_line=True)}/{visible(e['path'], one_line=True)}"
        f" ({max(0, int(now - e['edited_at']) // 60)} min ago)"
        for e in edits[:shown]
    ]
    if len(edits) > shown:
        lines.append(f"      and {len(edits) - shown} more")
    return lines


@reports_errors
def rename(
    old: Annotated[str, typer.Argument(help="A contact's name, or `me`.")],
    new: Annotated[str, typer.Argument(help="The new name.")],
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Rename a contact (your name for them), or yourself with `rename me NEW`."""
    reply = calling.ask(home, "rename", {"old": old, "new": new})
    show(
        json_output,
        {"renamed": reply["renamed"], "to": reply["to"]},
        f"{reply['renamed']} is now {reply['to']}.",
    )


@reports_errors
def cost(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """What talking to each person has cost: messages each way, what reached your agent."""
    rows = calling.ask(home, "cost")["rows"]
    lines = [f"  {'peer':<16} {'sent':>5} {'recv':>5} {'agent':>6} {'~tok out':>9} {'~tok in':>8}"]
    lines += [
        f"  {visible(str(r['peer']), one_line=True):<16} {r['sent']:>5} {r['received']:>5} "
        f"{r['delivered_to_agent']:>6} "
        f"{r['tokens_out']:>9} {r['tokens_in']:>8}"
        for r in rows
    ]
    show(json_output, {"rows": rows}, "\n".join(lines))
