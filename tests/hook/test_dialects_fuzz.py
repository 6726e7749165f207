"""Any stdin, any argv: parsing never raises and every answer is one the client accepts."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.dialects import CLIENTS, EventKind, HookEvent, dialect_for
from crosstalk.core.dialects.base import clean_text
from crosstalk.core.dialects.cursor import fit

# The only keys each client may see at the top of an answer (Codex rejects any other).
ALLOWED_TOP = {
    "claude": {"hookSpecificOutput"},
    "codex": {"hookSpecificOutput"},
    "qwen": {"hookSpecificOutput"},
    "gemini": {"hookSpecificOutput"},
    "cursor": {"additional_context"},
    "agy": {"injectSteps"},
    "kimi": {"message"},
    "hermes": {"context"},
    "goose": {"decision", "reason"},
}
EVENT_NAMES = sorted({name for client in CLIENTS for name in dialect_for(client).events})
KNOWN_KEYS = [
    "hook_event_name", "hookEventName", "event", "session_id", "conversation_id",
    "conversationId", "thread_id", "cwd", "working_dir", "workspace_roots", "workspacePaths",
    "transcript_path", "transcriptPath", "prompt", "message", "extra", "invocationNum",
    "stop_hook_active", "cursor_version",
]  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
payloads = st.dictionaries(
    st.sampled_from(KNOWN_KEYS) | st.text(max_size=10),
    json_values | st.sampled_from(EVENT_NAMES),
    max_size=8,
)
argv_events = st.none() | st.sampled_from(EVENT_NAMES) | st.text(max_size=30)
texts = st.none() | st.text(max_size=300)


def check_answer(client: str, event: HookEvent, out: str) -> None:
    answer = json.loads(out)
    assert isinstance(answer, dict)
    assert set(answer) <= ALLOWED_TOP[client]
    if client == "goose":
        assert answer["decision"] in ("allow", "block")
    inner = answer.get("hookSpecificOutput")
    if inner is not None:
        assert set(inner) == {"hookEventName", "additionalContext"}
        assert inner["hookEventName"] == event.raw_event
        assert event.kind is not EventKind.STOP


@given(st.sampled_from(CLIENTS), argv_events, st.text(max_size=500), texts)
def test_any_stdin_text_gives_an_event_and_a_valid_answer(
    client: str, argv: str | None, stdin: str, text: str | None
) -> None:
    """Arbitrary stdin text never raises, and the answer parses with only allowed keys."""
    dialect = dialect_for(client)
    event = dialect.parse(argv, stdin)
    assert event.client == client
    check_answer(client, event, dialect.render(event, text))


@given(st.sampled_from(CLIENTS), argv_events, payloads, texts)
def test_any_json_object_gives_an_event_and_a_valid_answer(
    client: str, argv: str | None, payload: dict[str, object], text: str | None
) -> None:
    """Objects with known keys of any type parse; answers are valid and hold the text."""
    dialect = dialect_for(client)
    event = dialect.parse(argv, json.dumps(payload))
    for value in (event.session_id, event.cwd, event.transcript_path, event.prompt):
        assert value is None or (isinstance(value, str) and value)
    out = dialect.render(event, text)
    check_answer(client, event, out)
    if text and dialect.can_carry_text(event):
        expected = clean_text(text)
        if client == "cursor":
            expected = fit(expected)
        assert expected in strings_in(json.loads(out))


def strings_in(value: object) -> list[str]:
    """Every string leaf of a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []
