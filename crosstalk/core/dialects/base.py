"""What every hook dialect shares: the normalised event, tolerant field lookup, the JSON answer.

Theory of operation
-------------------
A coding agent runs ``crosstalk-hook`` once per lifecycle event, writes a JSON payload on its
stdin, and reads one answer from its stdout. Nine clients do this, each with its own event names,
payload fields and answer shape. A :class:`Dialect` is the pure description of one client:

- :meth:`Dialect.parse` turns ``(event name from argv or None, stdin text)`` into a
  :class:`HookEvent`. It never raises: text that is not a JSON object, or fields of the wrong
  type, simply leave the corresponding fields ``None``, and an unknown event is kind ``OTHER``.
  The event name in the payload wins over the one on the command line, because the payload
  says what actually fired; argv is the fallback for clients that send none (Antigravity).
- :meth:`Dialect.can_carry_text` says whether the client reads text from our answer to this
  event. The hook program must not pull notices for an event that cannot carry them: a notice
  consumed into an answer nobody reads is lost.
- :meth:`Dialect.render` builds exactly the stdout the client accepts for the event: only keys
  it reads (Codex rejects a whole answer with one unknown key), and ``{}`` when there is nothing
  to say (every JSON client accepts an empty object; Goose, which needs a decision, says
  ``allow``). The answer is compact ASCII JSON with no trailing newline.
- :meth:`Dialect.hook_config` describes the hook entries an installer writes for the client,
  with timeouts in the client's own unit.

Edit awareness. :meth:`Dialect.parse` also reads the tool a tool event is about
(``HookEvent.tool_name``) and the files that tool call writes (``HookEvent.edit_paths``), each
client through its own :data:`EditReader`: only the paths, never contents, exactly as the client
spelled them (absolute, or relative to the payload's cwd), deduplicated in order, at most
:data:`MAX_EDIT_PATHS` of them and none longer than :data:`MAX_PATH_CHARS` (a longer one, an
empty one, or one with a NUL or a lone surrogate is dropped, not cut: a cut path names another
file). A pre-tool event (kind ``BEFORE_TOOL``) is answered by :meth:`Dialect.render_before_tool`
with an :class:`EditDecision`: ``ALLOW`` with text is a warning the model reads while the edit
goes on, where the client has such a channel; ``ASK`` and ``DENY`` are each client's own shapes.
:meth:`Dialect.before_tool_reaches_model` says whether the text of such an answer reaches the
model; where it does not, the hook program keeps the text for the session's next event that
carries text (``crosstalk.hook.pending``).

Each client module holds one :class:`Dialect` built from a :class:`Fields` table (where the
payload keeps each field), an event table (event name -> kind, and whether it carries text) and
two small functions that shape the answer. The module docstrings record what was measured on
the real client and where the reference and the measurements disagreed.

Standard library only, and no clock or randomness: the hook program imports this and must start
in a few tens of milliseconds.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

from crosstalk.core.frozen import Frozen
from crosstalk.errors import LocalProtocolError

#: A path into a payload: keys of nested objects, or an index into a list.
Path = tuple[str | int, ...]

#: Every client gets the same generous ceiling; the hook's own deadline is far shorter.
HOOK_TIMEOUT_S = 20


class EventKind(enum.Enum):
    """What an event means to crosstalk, whatever the client calls it."""

    SESSION_START = "session_start"
    PROMPT = "prompt"
    STOP = "stop"
    #: Before a tool runs: the answer may warn the model, ask the user or refuse the call.
    BEFORE_TOOL = "before_tool"
    #: After a tool ran (or failed).
    TOOL_USE = "tool_use"
    OTHER = "other"


class Decision(enum.Enum):
    """A turn decision, for the one client (Goose) whose answer must carry one."""

    ALLOW = "allow"
    BLOCK = "block"


class EditDecision(enum.Enum):
    """What the daemon says about an edit about to happen (``edit_warning.decision``)."""

    #: Go on; text, if any, is a warning for the model.
    ALLOW = "allow"
    #: A person should confirm first (clients that cannot ask refuse instead; see each module).
    ASK = "ask"
    #: Refuse the tool call, with the text as the reason the model reads.
    DENY = "deny"


#: Most paths one event reports, and most characters of one path (longer ones are dropped).
MAX_EDIT_PATHS = 64
MAX_PATH_CHARS = 4096
#: The reason given when the daemon asks or refuses without saying why.
DEFAULT_REASON = "crosstalk: another session is working on this file; check with them first."


class HookEvent(Frozen):
    """One hook invocation, normalised. Every field but ``client`` and ``kind`` may be missing."""

    __slots__ = (
        "client",
        "cwd",
        "edit_paths",
        "first_turn",
        "kind",
        "prompt",
        "raw_event",
        "session_id",
        "session_name",
        "stop_hook_active",
        "tool_name",
        "transcript_path",
    )
    client: str
    kind: EventKind
    raw_event: str | None
    session_id: str | None
    cwd: str | None
    transcript_path: str | None
    prompt: str | None
    #: A name the client gives the session (Codex ``thread_name``, Kimi ``session_title``).
    session_name: str | None
    #: The client says this is the session's first turn (Antigravity, Hermes), or None.
    first_turn: bool | None
    #: The client is re-running a stop hook after one blocked (Claude Code, Codex, Gemini).
    stop_hook_active: bool
    #: The tool a tool event is about, as the client names it.
    tool_name: str | None
    #: The files the tool call writes (see the module docstring); ``()`` for anything else.
    edit_paths: tuple[str, ...]

    def __init__(
        self,
        client: str,
        kind: EventKind,
        raw_event: str | None = None,
        session_id: str | None = None,
        cwd: str | None = None,
        transcript_path: str | None = None,
        prompt: str | None = None,
        session_name: str | None = None,
        first_turn: bool | None = None,
        stop_hook_active: bool = False,
        tool_name: str | None = None,
        edit_paths: tuple[str, ...] = (),
    ) -> None:
        self._init(
            client=client, kind=kind, raw_event=raw_event, session_id=session_id, cwd=cwd,
            transcript_path=transcript_path, prompt=prompt, session_name=session_name,
            first_turn=first_turn, stop_hook_active=stop_hook_active, tool_name=tool_name,
            edit_paths=edit_paths,
        )


class Fields(Frozen):
    """Where one client's payload keeps each field; the first present, non-empty one wins."""

    __slots__ = (
        "cwd",
        "event",
        "first_turn",
        "prompt",
        "session_id",
        "session_name",
        "stop_hook_active",
        "tool_name",
        "transcript",
    )
    event: Sequence[Path]
    session_id: Sequence[Path]
    cwd: Sequence[Path]
    transcript: Sequence[Path]
    prompt: Sequence[Path]
    session_name: Sequence[Path]
    first_turn: Sequence[Path]
    stop_hook_active: Sequence[Path]
    tool_name: Sequence[Path]

    def __init__(
        self,
        event: Sequence[Path] = (("hook_event_name",),),
        session_id: Sequence[Path] = (("session_id",),),
        cwd: Sequence[Path] = (("cwd",),),
        transcript: Sequence[Path] = (("transcript_path",),),
        prompt: Sequence[Path] = (("prompt",),),
        session_name: Sequence[Path] = (),
        first_turn: Sequence[Path] = (),
        stop_hook_active: Sequence[Path] = (("stop_hook_active",),),
        tool_name: Sequence[Path] = (("tool_name",),),
    ) -> None:
        self._init(
            event=event, session_id=session_id, cwd=cwd, transcript=transcript, prompt=prompt,
            session_name=session_name, first_turn=first_turn, stop_hook_active=stop_hook_active,
            tool_name=tool_name,
        )


class EventSpec(Frozen):
    """How crosstalk reads one of the client's events."""

    __slots__ = ("carries_text", "kind")
    kind: EventKind
    carries_text: bool

    def __init__(self, kind: EventKind, carries_text: bool = False) -> None:
        self._init(kind=kind, carries_text=carries_text)


#: Builds the answer object for an event that carries ``text``: (event name, text) -> object.
TextAnswer = Callable[[str, str], dict[str, object]]


#: Reads the files a tool call writes: (tool name or None, payload) -> candidate paths, in order.
#: It may yield anything (non-strings, duplicates); :func:`clean_paths` keeps the valid ones.
EditReader = Callable[[str | None, Mapping[str, object]], Iterable[object]]

#: Builds the answer to a pre-tool event: (event name, text, decision) -> (the answer object,
#: or None for the dialect's empty answer; whether the model reads ``text`` in it).
BeforeToolAnswer = Callable[[str, str, EditDecision], tuple[dict[str, object] | None, bool]]


def no_edits(tool: str | None, payload: Mapping[str, object]) -> Iterable[object]:
    """The :data:`EditReader` of a client whose tool events crosstalk does not read."""
    return ()


#: The empty answer of a dialect that names none: ``{}``.
NO_ANSWER: Mapping[str, object] = MappingProxyType({})


class Dialect(Frozen):
    """One client's hook contract (see the module docstring)."""

    __slots__ = (
        "answer_text",
        "before_tool",
        "client",
        "config",
        "decisions",
        "edits",
        "empty",
        "events",
        "fields",
        "refine",
        "registered",
    )
    client: str
    events: Mapping[str, EventSpec]
    answer_text: TextAnswer
    #: The events an installer registers, in order.
    registered: tuple[str, ...]
    config: Callable[[str], dict[str, object]]
    fields: Fields
    #: What to print when there is nothing to say.
    empty: Mapping[str, object]
    #: Events whose answer may carry a decision (only Goose's Stop).
    decisions: frozenset[str]
    #: Hook for client-specific reading of the payload (Antigravity's first invocation).
    refine: Callable[[HookEvent, Mapping[str, object]], HookEvent] | None
    #: Reads the files a tool call writes (see the module docstring).
    edits: EditReader
    #: Shapes the answer to a pre-tool event; None: the client takes no text or decision there.
    before_tool: BeforeToolAnswer | None

    def __init__(
        self,
        client: str,
        events: Mapping[str, EventSpec],
        answer_text: TextAnswer,
        registered: tuple[str, ...],
        config: Callable[[str], dict[str, object]],
        fields: Fields | None = None,
        empty: Mapping[str, object] = NO_ANSWER,
        decisions: frozenset[str] = frozenset(),
        refine: Callable[[HookEvent, Mapping[str, object]], HookEvent] | None = None,
        edits: EditReader = no_edits,
        before_tool: BeforeToolAnswer | None = None,
    ) -> None:
        self._init(
            client=client, events=events, answer_text=answer_text, registered=registered,
            config=config, fields=Fields() if fields is None else fields, empty=empty,
            decisions=decisions, refine=refine, edits=edits, before_tool=before_tool,
        )

    def parse(self, argv_event: str | None, stdin_text: str) -> HookEvent:
        """Read one invocation; never raises (garbage gives an ``OTHER`` event)."""
        payload = load_payload(stdin_text)
        name = first_str(payload, self.fields.event)
        if name is None and isinstance(argv_event, str) and argv_event:
            name = argv_event
        spec = self.events.get(name) if name is not None else None
        kind = spec.kind if spec is not None else EventKind.OTHER
        tool = first_str(payload, self.fields.tool_name)
        edited: tuple[str, ...] = ()
        if kind in (EventKind.BEFORE_TOOL, EventKind.TOOL_USE):
            edited = read_edits(self.edits, tool, payload)
        event = HookEvent(
            client=self.client,
            kind=kind,
            raw_event=name,
            session_id=first_str(payload, self.fields.session_id),
            cwd=first_str(payload, self.fields.cwd),
            transcript_path=first_str(payload, self.fields.transcript),
            prompt=first_str(payload, self.fields.prompt),
            session_name=first_str(payload, self.fields.session_name),
            first_turn=first_bool(payload, self.fields.first_turn),
            stop_hook_active=first_bool(payload, self.fields.stop_hook_active) is True,
            tool_name=tool,
            edit_paths=edited,
        )
        return self.refine(event, payload) if self.refine is not None else event

    def can_carry_text(self, event: HookEvent) -> bool:
        """Whether this client reads text from our answer to ``event``."""
        spec = self.events.get(event.raw_event or "")
        return spec is not None and spec.carries_text

    def render(
        self, event: HookEvent, text: str | None, *, decision: Decision | None = None
    ) -> str:
        """The exact stdout for ``event``: ``text`` if the event carries it, else the empty answer.

        Args:
            event: the parsed invocation (from this dialect's :meth:`parse`).
            text: what to put in front of the model, or None/"" for nothing. Text offered to an
                event that cannot carry it is dropped, so the answer stays valid; the hook
                program should not have fetched it (see :meth:`can_carry_text`).
            decision: only for events whose answer carries a decision (Goose's Stop), where
                None means "block with ``text`` as the reason if there is text, else allow".
                ``ALLOW`` is accepted everywhere and changes nothing elsewhere.

        Raises:
            LocalProtocolError: ``BLOCK`` for an event that cannot carry a decision, or
                ``BLOCK`` with no text to give as the reason.
        """
        name = event.raw_event or ""
        if decision is not None and name not in self.decisions:
            if decision is Decision.BLOCK:
                raise LocalProtocolError(
                    f"{self.client} cannot take a block decision on {name or 'this event'}."
                )
            decision = None  # ALLOW is what every other answer already means.
        carry = bool(text) and self.can_carry_text(event)
        if name in self.decisions:
            chosen = decision or (Decision.BLOCK if carry else Decision.ALLOW)
            if chosen is Decision.BLOCK and not carry:
                raise LocalProtocolError(f"A block decision on {name} needs text as its reason.")
            if chosen is Decision.ALLOW:
                return dump(dict(self.empty))
        if carry and text:
            return dump(self.answer_text(name, clean_text(text)))
        return dump(dict(self.empty))

    def render_before_tool(
        self, event: HookEvent, text: str | None, decision: EditDecision = EditDecision.ALLOW
    ) -> str:
        """The exact stdout for a pre-tool event, given what the daemon said about the edit.

        Args:
            event: the parsed pre-tool invocation (kind ``BEFORE_TOOL``).
            text: the warning, or None/"" for none. ``ASK`` and ``DENY`` without text give
                :data:`DEFAULT_REASON`, since every client wants a reason with a refusal.
            decision: ``ALLOW`` (the edit goes on; text is a warning for the model where the
                client reads one, see :meth:`before_tool_reaches_model`), ``ASK`` or ``DENY``.

        Any other event, or a client without a pre-tool contract, gets the empty answer.
        """
        answer = self._before_tool(event, text, decision)[0]
        return dump(dict(self.empty) if answer is None else answer)

    def before_tool_reaches_model(self, event: HookEvent, decision: EditDecision) -> bool:
        """Whether the model reads the text of :meth:`render_before_tool`'s answer; when it
        does not, the hook program keeps the text for the session's next text-carrying event."""
        return self._before_tool(event, DEFAULT_REASON, decision)[1]

    def _before_tool(
        self, event: HookEvent, text: str | None, decision: EditDecision
    ) -> tuple[dict[str, object] | None, bool]:
        if self.before_tool is None or event.kind is not EventKind.BEFORE_TOOL:
            return None, False
        if not text:
            if decision is EditDecision.ALLOW:
                return None, False
            text = DEFAULT_REASON
        return self.before_tool(event.raw_event or "", clean_text(text), decision)

    def hook_config(self, command: str) -> dict[str, object]:
        """The hook entries this client needs, as its config file spells them."""
        return self.config(command)


def load_payload(stdin_text: str) -> dict[str, object]:
    """The stdin JSON object, or ``{}`` for anything else (not JSON, not an object, too deep)."""
    try:
        value = json.loads(stdin_text)
    except (ValueError, RecursionError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def lookup(payload: Mapping[str, object], path: Path) -> object:
    """Follow ``path`` through nested objects and lists; None where it leads nowhere."""
    current: object = payload
    for step in path:
        if isinstance(step, int):
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                return None
            current = current[step]
        elif isinstance(current, dict):
            current = current.get(step)
        else:
            return None
    return current


def first_str(payload: Mapping[str, object], paths: Sequence[Path]) -> str | None:
    """The first path that holds a non-empty string."""
    for path in paths:
        value = lookup(payload, path)
        if isinstance(value, str) and value:
            return value
    return None


def read_edits(reader: EditReader, tool: str | None, payload: Mapping[str, object]) -> tuple[
    str, ...
]:
    """The valid paths ``reader`` finds (see :func:`clean_paths`). Readers only look things up
    and test types, so an odd payload finds nothing rather than raising (the fuzz tests hold
    them to that)."""
    return clean_paths(reader(tool, payload))


def clean_paths(found: Iterable[object]) -> tuple[str, ...]:
    """Non-empty strings of at most :data:`MAX_PATH_CHARS` characters, without NUL or lone
    surrogates, deduplicated in order, the first :data:`MAX_EDIT_PATHS` of them."""
    kept: dict[str, None] = {}
    for value in found:
        if len(kept) >= MAX_EDIT_PATHS:
            break
        if not isinstance(value, str) or not value or len(value) > MAX_PATH_CHARS:
            continue
        if "\x00" in value or not _encodable(value):
            continue
        kept.setdefault(value)
    return tuple(kept)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def tool_paths(table: Mapping[str, Sequence[Path]]) -> EditReader:
    """An :data:`EditReader` for tools whose input names the file: tool name -> where in the
    payload the path may be (every string found there counts)."""

    def read(tool: str | None, payload: Mapping[str, object]) -> Iterable[object]:
        places = table.get(tool) if tool is not None else None
        return [lookup(payload, place) for place in places or ()]

    return read


def first_bool(payload: Mapping[str, object], paths: Sequence[Path]) -> bool | None:
    """The first path that holds a boolean (JSON true/false only, not 0/1 or "true")."""
    for path in paths:
        value = lookup(payload, path)
        if isinstance(value, bool):
            return value
    return None


def clean_text(text: str) -> str:
    """Replace lone surrogates, which no client's JSON parser should have to meet."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def dump(answer: Mapping[str, object]) -> str:
    """Compact ASCII JSON: safe on any stdout encoding, and byte-stable for golden tests."""
    return json.dumps(answer, ensure_ascii=True, separators=(",", ":"))


def spec_table(kinds: Mapping[str, EventKind], carriers: Sequence[str]) -> dict[str, EventSpec]:
    """Build an event table from names -> kinds and the names whose answers carry text."""
    unknown = set(carriers) - set(kinds)
    if unknown:
        raise LocalProtocolError(f"carrier events without a kind: {sorted(unknown)}")
    return {name: EventSpec(kind, name in carriers) for name, kind in kinds.items()}


def command_for(command: str, client: str, event: str) -> str:
    """The command line an installer registers: the client and event name ride along as argv.

    ``--client`` makes detection exact (Kimi's payload is identical to Claude Code's), and the
    event name covers clients that do not put it in the payload (Antigravity).
    """
    return f"{command} --client {client} {event}"


def claude_style_config(
    command: str,
    client: str,
    events: Sequence[str],
    timeout: int,
    matchers: Mapping[str, str] = MappingProxyType({}),
) -> dict[str, object]:
    """``{"hooks": {Event: [{"matcher"?, "hooks": [{"type": "command", ...}]}]}}``, the shape
    Claude Code, Codex, Qwen Code, Gemini CLI and Goose plugins share; ``matchers`` limits an
    event to the tools its pattern matches (only the file-writing tools, for pre-tool events)."""
    hooks: dict[str, object] = {}
    for event in events:
        handler = {
            "type": "command",
            "command": command_for(command, client, event),
            "timeout": timeout,
        }
        group: dict[str, object] = {"hooks": [handler]}
        if event in matchers:
            group = {"matcher": matchers[event], **group}
        hooks[event] = [group]
    return {"hooks": hooks}
