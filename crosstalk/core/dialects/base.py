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
from collections.abc import Callable, Mapping, Sequence
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
    TOOL_USE = "tool_use"
    OTHER = "other"


class Decision(enum.Enum):
    """A turn decision, for the one client (Goose) whose answer must carry one."""

    ALLOW = "allow"
    BLOCK = "block"


class HookEvent(Frozen):
    """One hook invocation, normalised. Every field but ``client`` and ``kind`` may be missing."""

    __slots__ = (
        "client",
        "cwd",
        "first_turn",
        "kind",
        "prompt",
        "raw_event",
        "session_id",
        "session_name",
        "stop_hook_active",
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
    ) -> None:
        self._init(
            client=client, kind=kind, raw_event=raw_event, session_id=session_id, cwd=cwd,
            transcript_path=transcript_path, prompt=prompt, session_name=session_name,
            first_turn=first_turn, stop_hook_active=stop_hook_active,
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
    ) -> None:
        self._init(
            event=event, session_id=session_id, cwd=cwd, transcript=transcript, prompt=prompt,
            session_name=session_name, first_turn=first_turn, stop_hook_active=stop_hook_active,
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


#: The empty answer of a dialect that names none: ``{}``.
NO_ANSWER: Mapping[str, object] = MappingProxyType({})


class Dialect(Frozen):
    """One client's hook contract (see the module docstring)."""

    __slots__ = (
        "answer_text",
        "client",
        "config",
        "decisions",
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
    ) -> None:
        self._init(
            client=client, events=events, answer_text=answer_text, registered=registered,
            config=config, fields=Fields() if fields is None else fields, empty=empty,
            decisions=decisions, refine=refine,
        )

    def parse(self, argv_event: str | None, stdin_text: str) -> HookEvent:
        """Read one invocation; never raises (garbage gives an ``OTHER`` event)."""
        payload = load_payload(stdin_text)
        name = first_str(payload, self.fields.event)
        if name is None and isinstance(argv_event, str) and argv_event:
            name = argv_event
        spec = self.events.get(name) if name is not None else None
        event = HookEvent(
            client=self.client,
            kind=spec.kind if spec is not None else EventKind.OTHER,
            raw_event=name,
            session_id=first_str(payload, self.fields.session_id),
            cwd=first_str(payload, self.fields.cwd),
            transcript_path=first_str(payload, self.fields.transcript),
            prompt=first_str(payload, self.fields.prompt),
            session_name=first_str(payload, self.fields.session_name),
            first_turn=first_bool(payload, self.fields.first_turn),
            stop_hook_active=first_bool(payload, self.fields.stop_hook_active) is True,
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
    command: str, client: str, events: Sequence[str], timeout: int
) -> dict[str, object]:
    """``{"hooks": {Event: [{"hooks": [{"type": "command", ...}]}]}}``, the shape Claude Code,
    Codex, Qwen Code, Gemini CLI and Goose plugins share."""
    return {
        "hooks": {
            event: [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": command_for(command, client, event),
                            "timeout": timeout,
                        }
                    ]
                }
            ]
            for event in events
        }
    }
