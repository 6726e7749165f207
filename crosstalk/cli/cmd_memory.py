"""`crosstalk facts`, `crosstalk tasks` and `crosstalk decide`: the room's memory."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from crosstalk.cli.calling import Reply, ask, show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors, visible

WRITE_TIMEOUT = 30.0

RoomOption = Annotated[
    str | None, typer.Option("--room", help="The room (name or id); default: this project's.")
]
AllOption = Annotated[bool, typer.Option("--all", help="Include forgotten or finished ones.")]

facts_app = typer.Typer(help="What the room knows.", invoke_without_command=True)
tasks_app = typer.Typer(help="What the room has to do.", invoke_without_command=True)


# A reply's ``why_pending`` when it was decided on a room memory that gave ops up.
MEMORY_INCOMPLETE = "memory_incomplete"
NOT_FINAL = ("decided on an incomplete memory (some ops only ever held by members who were "
             "away or gone); final once a member who has them fills it in")


def run_op(op: str, params: dict[str, Any], home: str | None) -> Reply:
    """Call a memory op from the current directory (which names the project's room)."""
    return ask(home, op, params, timeout=WRITE_TIMEOUT, here=True)


def said(reply: Reply, answer: str) -> str:
    """``answer`` as shown: a provisional one (``pending`` on an incomplete memory) says so."""
    if reply.get("why_pending") == MEMORY_INCOMPLETE:
        return f"pending ({reply['provisional']} for now, {NOT_FINAL})"
    return answer


def _write(op: str, params: dict[str, Any], json_output: bool, home: str | None) -> None:
    reply = run_op(op, params, home)
    show(json_output, reply, f"{said(reply, reply['outcome'])}: {reply['id']} in {reply['room']}")


# --- facts ---------------------------------------------------------------------------------------


def _fact_line(fact: dict[str, Any]) -> str:
    """One fact, one line: a newline in what peers wrote shows as ``\\x0a``, never a new fact."""
    tags = f" [{', '.join(fact['tags'])}]" if fact["tags"] else ""
    line = f"{fact['id']}  {fact['text']}  ({', '.join(fact['by'])}, #{fact['room']}){tags}"
    return visible(line, one_line=True)


@facts_app.callback()
@reports_errors
def facts(
    ctx: typer.Context,
    room: RoomOption = None,
    include_all: AllOption = False,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """List the facts of your rooms (or of one, with --room)."""
    if ctx.invoked_subcommand is not None:
        return
    reply = run_op("facts", {"room": room, "all": include_all}, home)
    lines = [_fact_line(f) for f in reply["facts"]] or ["No facts yet."]
    show(json_output, reply, "\n".join(lines + memory_notes(reply)))


@facts_app.command("add")
@reports_errors
def fact_add(
    text: Annotated[str, typer.Argument(help="The fact.")],
    in_repos: Annotated[
        str | None, typer.Option("--in", help="Repositories it is about, comma-separated.")
    ] = None,
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Add a fact (tagged to repositories with --in, or global)."""
    tags = [t.strip() for t in (in_repos or "").split(",") if t.strip()]
    _write("fact_add", {"text": text, "tags": tags, "room": room}, json_output, home)


@facts_app.command("confirm")
@reports_errors
def fact_confirm(
    fact_id: Annotated[str, typer.Argument(metavar="ID")],
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Stand behind a fact: adds your name and resets its age."""
    _write("fact_confirm", {"id": fact_id, "room": room}, json_output, home)


@facts_app.command("correct")
@reports_errors
def fact_correct(
    fact_id: Annotated[str, typer.Argument(metavar="ID")],
    text: Annotated[str | None, typer.Argument(help="Corrected text (none: retire it).")] = None,
    because: Annotated[str, typer.Option("--because", help="Why it was wrong.")] = "",
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Correct a fact, saying why."""
    params = {"id": fact_id, "text": text, "because": because, "room": room}
    _write("fact_correct", params, json_output, home)


@facts_app.command("forget")
@reports_errors
def fact_forget(
    fact_id: Annotated[str, typer.Argument(metavar="ID")],
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Mark a fact forgotten (it is kept, no longer shown)."""
    _write("fact_forget", {"id": fact_id, "room": room}, json_output, home)


# --- tasks ---------------------------------------------------------------------------------------


def _task_line(task: dict[str, Any]) -> str:
    if task["state"] == "claimed":
        status = f"claimed by {task['claimed_by']}"
    elif task["for"]:
        status = f"{task['state']}, for {task['for']}"
    else:
        status = task["state"]
    line = f"{task['id']}  {task['text']}  ({status}, from {task['by']}, #{task['room']})"
    return visible(line, one_line=True)  # one task, one line, whatever peers wrote in it


@tasks_app.callback()
@reports_errors
def tasks(
    ctx: typer.Context,
    room: RoomOption = None,
    include_all: AllOption = False,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """List open and claimed tasks of your rooms (or of one, with --room)."""
    if ctx.invoked_subcommand is not None:
        return
    reply = run_op("tasks", {"room": room, "all": include_all}, home)
    lines = [_task_line(t) for t in reply["tasks"]] or ["No open tasks."]
    show(json_output, reply, "\n".join(lines + memory_notes(reply)))


def memory_notes(reply: dict[str, Any]) -> list[str]:
    """Rooms whose memory is not whole yet, and why."""
    notes = []
    if reply.get("catching_up"):
        notes.append(visible(f"(catching up: {', '.join(reply['catching_up'])})", one_line=True))
    if reply.get("incomplete"):
        rooms = visible(", ".join(reply["incomplete"]), one_line=True)
        notes.append(
            f"(incomplete: {rooms}: some of its memory was only ever "
            "held by members who were away or gone; a member who has it will fill it in)"
        )
    return notes


@tasks_app.command("add")
@reports_errors
def task_add(
    text: Annotated[str, typer.Argument(help="The task.")],
    for_person: Annotated[str | None, typer.Option("--for", help="Whom it is for.")] = None,
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Add a task, for someone or for anyone."""
    _write("task_add", {"text": text, "person": for_person, "room": room}, json_output, home)


@tasks_app.command("claim")
@reports_errors
def task_claim(
    task_id: Annotated[str, typer.Argument(metavar="ID")],
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Take a task. The first claim in the room's order wins, on every machine; a lost claim
    exits 1 (``claimed_by_other``), so ``crosstalk tasks claim ID && …`` is safe in a script.
    A pending one exits 0 and says why it is not final yet (not ordered, or decided on an
    incomplete memory: ``--json`` has ``why_pending`` and ``provisional``)."""
    reply = run_op("task_claim", {"id": task_id, "room": room}, home)
    if reply["outcome"] == "lost":  # the op (and the MCP tool) report it as data; a CLI fails
        from crosstalk.errors import ClaimedByOther

        holder = reply["claimed_by"] or "Somebody else"
        raise ClaimedByOther(f"{holder} has {reply['id']}; pick another.")
    human = {
        "won": f"You have {reply['id']}.",
        "pending": "Not decided yet: the relay is unreachable. It is settled on reconnect.",
    }[reply["outcome"]]
    if reply.get("why_pending") == MEMORY_INCOMPLETE:
        holder = reply["claimed_by"] or "nobody"
        human = visible(f"Not final: {reply['provisional']} for now (held by {holder}); "
                        f"{NOT_FINAL}.")
    show(json_output, reply, human)


def _task_write(op: str, extra: dict[str, Any] | None = None) -> Any:
    @reports_errors
    def command(
        task_id: Annotated[str, typer.Argument(metavar="ID")],
        room: RoomOption = None,
        json_output: JsonOption = False,
        home: HomeOption = None,
    ) -> None:
        _write(op, {"id": task_id, "room": room, **(extra or {})}, json_output, home)

    return command


tasks_app.command("release", help="Give a task you hold back.")(_task_write("task_release"))
tasks_app.command("drop", help="Abandon a task: nobody will do it.")(_task_write("task_drop"))


@tasks_app.command("done")
@reports_errors
def task_done(
    task_id: Annotated[str, typer.Argument(metavar="ID")],
    note: Annotated[str, typer.Argument(help="What was done.")] = "",
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Finish a task, with an optional note."""
    _write("task_done", {"id": task_id, "note": note, "room": room}, json_output, home)


# --- decide --------------------------------------------------------------------------------------


@reports_errors
def decide(
    text: Annotated[str, typer.Argument(help="What was decided.")],
    why: Annotated[str, typer.Option("--why", help="The reason.")] = "",
    repo: Annotated[
        str | None, typer.Option("--repo", help="The repository (default: this one).")
    ] = None,
    tell: Annotated[str | None, typer.Option("--tell", help="Also tell this person.")] = None,
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Record a decision in DECISIONS.md and announce it in the room."""
    repo_path = os.path.abspath(repo) if repo else None
    params = {"text": text, "why": why, "repo": repo_path, "tell": tell, "room": room}
    reply = run_op("decide", params, home)
    show(json_output, reply, f"Recorded in {reply['file']}.")


@reports_errors
def decisions(
    room: Annotated[
        str | None, typer.Option("--room", help="Only this room (name or id); default: all.")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """List the decisions of your rooms, oldest first."""
    reply = run_op("decisions", {"room": room}, home)
    lines = [  # one line each for the decision and its reason, whatever peers wrote in them
        visible(f"{d['id']}  {d['text']}  ({d['by']}, #{d['room']})", one_line=True)
        + (f"\n    why: {visible(d['why'], one_line=True)}" if d["why"] else "")
        for d in reply["decisions"]
    ]
    show(json_output, reply, "\n".join(lines) or "No decisions yet.")


def mount(app: typer.Typer) -> None:
    """Add `facts`, `tasks`, `decide` and `decisions` to the top-level app."""
    app.add_typer(facts_app, name="facts")
    app.add_typer(tasks_app, name="tasks")
    app.command("decide")(decide)
    app.command("decisions")(decisions)
