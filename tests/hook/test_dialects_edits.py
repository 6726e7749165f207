"""Edit awareness in every dialect: which files a tool call writes, and the pre-tool answer.

Golden payloads in each client's shape give exact ``edit_paths``; golden answers are byte-exact
per client and decision; Codex patches are read header by header; and any JSON at all parses
without raising, into paths that keep the documented bounds.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.dialects import CLIENTS, EditDecision, EventKind, HookEvent, dialect_for
from crosstalk.core.dialects.base import DEFAULT_REASON, MAX_EDIT_PATHS, MAX_PATH_CHARS
from crosstalk.core.dialects.codex import patch_paths

ALLOW, ASK, DENY = EditDecision.ALLOW, EditDecision.ASK, EditDecision.DENY


def parse(client: str, argv: str | None, payload: object) -> HookEvent:
    return dialect_for(client).parse(argv, json.dumps(payload))


def claude_like(event: str, tool: str, tool_input: object) -> dict[str, object]:
    return {
        "hook_event_name": event,
        "session_id": "s1",
        "cwd": "/repo",
        "tool_name": tool,
        "tool_input": tool_input,
    }


# (client, argv event, payload, expected kind, expected tool name, expected paths)
EDIT_CASES: list[tuple[str, str | None, dict[str, object], EventKind, str | None, tuple[str, ...]]]
EDIT_CASES = [
    ("claude", None, claude_like("PreToolUse", "Edit", {"file_path": "/repo/a.py",
     "old_string": "x", "new_string": "y"}), EventKind.BEFORE_TOOL, "Edit", ("/repo/a.py",)),
    ("claude", None, claude_like("PostToolUse", "Write", {"file_path": "b.md", "content": "c"}),
     EventKind.TOOL_USE, "Write", ("b.md",)),
    ("claude", None, claude_like("PreToolUse", "MultiEdit", {"file_path": "/repo/m.py",
     "edits": []}), EventKind.BEFORE_TOOL, "MultiEdit", ("/repo/m.py",)),
    ("claude", None, claude_like("PreToolUse", "NotebookEdit", {"notebook_path": "/repo/n.ipynb",
     "file_path": "/ignored"}), EventKind.BEFORE_TOOL, "NotebookEdit", ("/repo/n.ipynb",)),
    ("claude", None, claude_like("PreToolUse", "Read", {"file_path": "/repo/a.py"}),
     EventKind.BEFORE_TOOL, "Read", ()),
    ("claude", None, claude_like("PostToolUse", "Bash", {"command": "rm -rf x"}),
     EventKind.TOOL_USE, "Bash", ()),
    ("codex", None, claude_like("PreToolUse", "apply_patch", {"command":
     "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch\n"}),
     EventKind.BEFORE_TOOL, "apply_patch", ("src/a.py",)),
    ("codex", None, claude_like("PostToolUse", "apply_patch", {"input":
     "*** Begin Patch\n*** Add File: new.txt\n+hi\n*** End Patch"}),
     EventKind.TOOL_USE, "apply_patch", ("new.txt",)),
    ("codex", None, claude_like("PreToolUse", "apply_patch",
     "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch"),
     EventKind.BEFORE_TOOL, "apply_patch", ("old.txt",)),
    ("codex", None, claude_like("PreToolUse", "apply_patch", {"command": ["apply_patch",
     "*** Begin Patch\n*** Update File: x.py\n*** End Patch"]}),
     EventKind.BEFORE_TOOL, "apply_patch", ("x.py",)),
    ("codex", None, claude_like("PreToolUse", "Bash", {"command":
     "cat <<'EOF'\n*** Update File: not-a-patch.py\nEOF"}), EventKind.BEFORE_TOOL, "Bash", ()),
    # Measured on 0.171.0: a patch through the shell is reported as Bash.
    ("codex", None, claude_like("PreToolUse", "Bash", {"command":
     "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: app.txt\n@@\n-a\n+b\n"
     "*** End Patch\nEOF\n"}), EventKind.BEFORE_TOOL, "Bash", ("app.txt",)),
    ("gemini", None, claude_like("BeforeTool", "write_file", {"file_path": "/r/w.ts",
     "content": "z"}), EventKind.BEFORE_TOOL, "write_file", ("/r/w.ts",)),
    ("gemini", None, claude_like("AfterTool", "replace", {"file_path": "/r/e.ts"}),
     EventKind.TOOL_USE, "replace", ("/r/e.ts",)),
    ("gemini", None, claude_like("BeforeTool", "read_file", {"file_path": "/r/e.ts"}),
     EventKind.BEFORE_TOOL, "read_file", ()),
    ("qwen", None, claude_like("PreToolUse", "edit", {"file_path": "/q/a.py"}),
     EventKind.BEFORE_TOOL, "edit", ("/q/a.py",)),
    ("qwen", None, claude_like("PostToolUse", "write_file", {"path": "/q/b.py"}),
     EventKind.TOOL_USE, "write_file", ("/q/b.py",)),
    ("qwen", None, claude_like("PreToolUse", "replace", {"file_path": "/q/c.py"}),
     EventKind.BEFORE_TOOL, "replace", ("/q/c.py",)),
    ("cursor", None, {"hook_event_name": "afterFileEdit", "conversation_id": "c",
     "file_path": "/w/f.ts", "edits": [{"old_string": "a", "new_string": "b"}]},
     EventKind.TOOL_USE, None, ("/w/f.ts",)),
    ("cursor", None, {"hook_event_name": "preToolUse", "conversation_id": "c",
     "tool_name": "Write", "tool_input": {"file_path": "/w/g.ts"}},
     EventKind.BEFORE_TOOL, "Write", ("/w/g.ts",)),
    ("cursor", None, {"hook_event_name": "preToolUse", "conversation_id": "c",
     "tool_name": "Delete", "tool_input": {"path": "/w/h.ts"}},
     EventKind.BEFORE_TOOL, "Delete", ("/w/h.ts",)),
    ("cursor", None, {"hook_event_name": "beforeReadFile", "conversation_id": "c",
     "file_path": "/w/read-only.ts"}, EventKind.BEFORE_TOOL, None, ()),
    ("kimi", None, claude_like("PreToolUse", "Write", {"path": "/k/a.md", "content": "c"}),
     EventKind.BEFORE_TOOL, "Write", ("/k/a.md",)),
    ("kimi", None, claude_like("PostToolUse", "Edit", {"path": "/k/b.md"}),
     EventKind.TOOL_USE, "Edit", ("/k/b.md",)),
    ("hermes", "pre_tool_call", {"hook_event_name": "pre_tool_call", "session_id": "h",
     "tool_name": "patch", "tool_input": {"path": "/h/p.py"}, "extra": {}},
     EventKind.BEFORE_TOOL, "patch", ("/h/p.py",)),
    ("hermes", "post_tool_call", {"hook_event_name": "post_tool_call", "session_id": "h",
     "tool_name": "write_file", "tool_input": {"path": "/h/w.py"}},
     EventKind.TOOL_USE, "write_file", ("/h/w.py",)),
    ("goose", None, {"event": "PreToolUse", "session_id": "g", "tool_name": "developer__edit",
     "tool_input": {"path": "/g/e.rs", "before": "a", "after": "b"}},
     EventKind.BEFORE_TOOL, "developer__edit", ("/g/e.rs",)),
    ("goose", None, {"event": "PostToolUse", "session_id": "g", "tool_name": "developer__write",
     "tool_input": {"path": "/g/w.rs"}}, EventKind.TOOL_USE, "developer__write", ("/g/w.rs",)),
    ("agy", "PreToolUse", {"conversationId": "cv", "toolCall": {"name": "write_to_file",
     "args": {"TargetFile": "/a/t.go", "CodeContent": "x"}}},
     EventKind.BEFORE_TOOL, "write_to_file", ("/a/t.go",)),
    ("agy", "PreToolUse", {"conversationId": "cv", "toolCall": {"name":
     "multi_replace_file_content", "args": json.dumps({"AbsolutePath": "/a/m.go"})}},
     EventKind.BEFORE_TOOL, "multi_replace_file_content", ("/a/m.go",)),
    ("agy", "PreToolUse", {"conversationId": "cv", "toolCall": {"name": "replace_file_content",
     "args": {"FilePath": "/a/r.go"}}}, EventKind.BEFORE_TOOL, "replace_file_content",
     ("/a/r.go",)),
    ("agy", "PreToolUse", {"conversationId": "cv", "toolCall": {"name": "view_file",
     "args": {"AbsolutePath": "/a/v.go"}}}, EventKind.BEFORE_TOOL, "view_file", ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("client", "argv", "payload", "kind", "tool", "paths"),
    EDIT_CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(EDIT_CASES)],
)
def test_each_client_reports_the_files_its_writing_tools_name(
    client: str,
    argv: str | None,
    payload: dict[str, object],
    kind: EventKind,
    tool: str | None,
    paths: tuple[str, ...],
) -> None:
    """A writing tool's payload gives its paths exactly as written; any other tool gives none."""
    event = parse(client, argv, payload)
    assert (event.kind, event.tool_name, event.edit_paths) == (kind, tool, paths)


def test_paths_are_deduplicated_bounded_and_garbage_is_dropped() -> None:
    """Duplicates once, in order; empty, over-long, NUL and lone-surrogate paths are dropped,
    not cut; at most MAX_EDIT_PATHS paths."""
    long_path = "/" + "a" * MAX_PATH_CHARS
    headers = [f"*** Update File: {p}" for p in ("a", "b", "a", long_path, "x\x00y", "")]
    headers += [f"*** Add File: f{i}" for i in range(2 * MAX_EDIT_PATHS)]
    event = parse("codex", None, claude_like("PreToolUse", "apply_patch",
                                             {"command": "\n".join(headers)}))
    assert event.edit_paths[:3] == ("a", "b", "f0")
    assert len(event.edit_paths) == MAX_EDIT_PATHS
    surrogate = dialect_for("claude").parse(
        None, '{"hook_event_name":"PreToolUse","tool_name":"Edit",'
              '"tool_input":{"file_path":"/x/\\ud800"}}'
    )
    assert surrogate.edit_paths == ()
    exact = "/" + "b" * (MAX_PATH_CHARS - 1)
    fits = parse("claude", None, claude_like("PreToolUse", "Write", {"file_path": exact}))
    assert fits.edit_paths == (exact,)


def test_paths_are_never_read_from_events_other_than_tool_events() -> None:
    """A prompt that happens to carry tool fields reports no edit."""
    payload = claude_like("UserPromptSubmit", "Edit", {"file_path": "/repo/a.py"})
    assert parse("claude", None, payload).edit_paths == ()


# --- Codex patches ----------------------------------------------------------------------------


def test_patch_headers_give_every_path_including_moves() -> None:
    """Update, Add, Delete and Move to each name a path; Move to gives the new one too."""
    patch = (
        "*** Begin Patch\n"
        "*** Update File: src/old name.py\n"
        "*** Move to: src/new name.py\n"
        "@@ def f():\n-    return 1\n+    return 2\n"
        "*** Add File: docs/read me.md\n+# hello\n"
        "*** Delete File: /abs/gone.txt\n"
        "*** End Patch\n"
    )
    assert patch_paths(patch) == [
        "src/old name.py", "src/new name.py", "docs/read me.md", "/abs/gone.txt",
    ]  # fmt: skip


def test_patch_paths_that_look_like_options_are_kept_literally() -> None:
    """A path such as ``--force`` or ``-rf`` is a path: kept as written, never interpreted."""
    patch = "*** Begin Patch\n*** Add File: --force\n+x\n*** Update File: -rf \n*** End Patch"
    assert patch_paths(patch) == ["--force", "-rf"]


def test_patched_text_that_looks_like_a_header_is_not_read_as_one() -> None:
    """Hunk lines start with a space, + or -, so a header inside them names no file."""
    patch = (
        "*** Begin Patch\n*** Update File: real.py\n"
        " *** Update File: context.py\n"
        "+*** Add File: added-text.py\n"
        "-*** Delete File: removed-text.py\n"
        "*** End Patch"
    )
    assert patch_paths(patch) == ["real.py"]


def test_patch_with_windows_line_endings_gives_clean_paths() -> None:
    """A CRLF patch yields paths without the carriage return."""
    assert patch_paths("*** Begin Patch\r\n*** Update File: a.py\r\n*** End Patch\r\n") == [
        "a.py"
    ]


# --- the pre-tool answer ------------------------------------------------------------------------

WARN = 'ana is editing "src/a.py" (2 min ago)'
WARN_JSON = json.dumps(WARN)


def hso(inner: str) -> str:
    return '{"hookSpecificOutput":{"hookEventName":"PreToolUse",' + inner + "}}"


# client -> pre-tool event -> decision -> exact stdout
BEFORE_TOOL_GOLDEN: dict[str, tuple[str, dict[EditDecision, str]]] = {
    "claude": ("PreToolUse", {
        ALLOW: hso(f'"additionalContext":{WARN_JSON}'),
        ASK: hso(f'"permissionDecision":"ask","permissionDecisionReason":{WARN_JSON},'
                 f'"additionalContext":{WARN_JSON}'),
        DENY: hso(f'"permissionDecision":"deny","permissionDecisionReason":{WARN_JSON}'),
    }),
    "codex": ("PreToolUse", {
        ALLOW: hso(f'"additionalContext":{WARN_JSON}'),
        ASK: hso(f'"permissionDecision":"deny","permissionDecisionReason":{WARN_JSON}'),
        DENY: hso(f'"permissionDecision":"deny","permissionDecisionReason":{WARN_JSON}'),
    }),
    "qwen": ("PreToolUse", {
        ALLOW: "{}",
        ASK: hso(f'"permissionDecision":"ask","permissionDecisionReason":{WARN_JSON}'),
        DENY: hso(f'"permissionDecision":"deny","permissionDecisionReason":{WARN_JSON}'),
    }),
    "kimi": ("PreToolUse", {
        ALLOW: "{}",
        ASK: hso(f'"permissionDecision":"deny","permissionDecisionReason":{WARN_JSON}'),
        DENY: hso(f'"permissionDecision":"deny","permissionDecisionReason":{WARN_JSON}'),
    }),
    "gemini": ("BeforeTool", {
        ALLOW: "{}",
        ASK: f'{{"decision":"ask","systemMessage":{WARN_JSON}}}',
        DENY: f'{{"decision":"deny","reason":{WARN_JSON}}}',
    }),
    "cursor": ("preToolUse", {
        ALLOW: "{}",
        ASK: f'{{"permission":"deny","agent_message":{WARN_JSON},"user_message":{WARN_JSON}}}',
        DENY: f'{{"permission":"deny","agent_message":{WARN_JSON},"user_message":{WARN_JSON}}}',
    }),
    "goose": ("PreToolUse", {
        ALLOW: '{"decision":"allow"}',
        ASK: f'{{"decision":"block","reason":{WARN_JSON}}}',
        DENY: f'{{"decision":"block","reason":{WARN_JSON}}}',
    }),
    "hermes": ("pre_tool_call", {
        ALLOW: "{}",
        ASK: f'{{"action":"approve","message":{WARN_JSON}}}',
        DENY: f'{{"action":"block","message":{WARN_JSON}}}',
    }),
    "agy": ("PreToolUse", {
        ALLOW: "{}",
        ASK: f'{{"decision":"deny","reason":{WARN_JSON}}}',
        DENY: f'{{"decision":"deny","reason":{WARN_JSON}}}',
    }),
}  # fmt: skip
#: Where the model reads the text of the pre-tool answer (else the hook keeps it for later).
REACHES_MODEL: dict[str, set[EditDecision]] = {
    "claude": {ALLOW, ASK, DENY},
    "codex": {ALLOW, ASK, DENY},
    "qwen": {ASK, DENY},
    "kimi": {ASK, DENY},
    "gemini": {DENY},
    "cursor": {ASK, DENY},
    "goose": {ASK, DENY},
    "hermes": {DENY},
    "agy": set(),
}
DECIDED = [(c, d) for c in CLIENTS for d in EditDecision]


def before(client: str) -> HookEvent:
    event, _ = BEFORE_TOOL_GOLDEN[client]
    payload = {"event": event} if client == "goose" else {"hook_event_name": event}
    return dialect_for(client).parse(event, json.dumps(payload))


@pytest.mark.parametrize(("client", "decision"), DECIDED)
def test_pre_tool_answer_is_byte_exact(client: str, decision: EditDecision) -> None:
    """Each client's pre-tool answer for allow, ask and deny is exactly its documented shape."""
    event = before(client)
    assert event.kind is EventKind.BEFORE_TOOL
    expected = BEFORE_TOOL_GOLDEN[client][1][decision]
    assert dialect_for(client).render_before_tool(event, WARN, decision) == expected


@pytest.mark.parametrize(("client", "decision"), DECIDED)
def test_whether_the_model_reads_the_pre_tool_text(client: str, decision: EditDecision) -> None:
    """Only the channels that put the text in front of the model say so."""
    reaches = dialect_for(client).before_tool_reaches_model(before(client), decision)
    assert reaches == (decision in REACHES_MODEL[client])


@pytest.mark.parametrize("client", CLIENTS)
def test_allow_without_text_is_the_empty_answer(client: str) -> None:
    """Nothing to say before an edit is the client's empty answer, which lets the edit run."""
    dialect = dialect_for(client)
    for text in (None, ""):
        assert dialect.render_before_tool(before(client), text) == dialect.render(
            before(client), None
        )


@pytest.mark.parametrize("client", CLIENTS)
def test_a_refusal_without_text_still_gives_a_reason(client: str) -> None:
    """Deny with no text uses the default reason, since every client wants one."""
    out = dialect_for(client).render_before_tool(before(client), None, DENY)
    assert json.dumps(DEFAULT_REASON) in out


@pytest.mark.parametrize("client", CLIENTS)
def test_pre_tool_render_on_another_event_is_the_empty_answer(client: str) -> None:
    """A pre-tool answer asked for on any other event is the empty answer, never a refusal."""
    dialect = dialect_for(client)
    other = dialect.parse(dialect.registered[0], "{}")
    assert other.kind is not EventKind.BEFORE_TOOL
    assert dialect.render_before_tool(other, WARN, DENY) == dialect.render(other, None)


def test_pre_tool_events_never_carry_notices() -> None:
    """The pre-tool answer is for edit warnings only: notices do not ride on it."""
    for client in CLIENTS:
        assert not dialect_for(client).can_carry_text(before(client)), client


# --- any JSON ---------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=16,
)
TOOL_NAMES = [
    "Edit", "Write", "MultiEdit", "NotebookEdit", "apply_patch", "write_file", "replace", "edit",
    "Delete", "patch", "developer__write", "developer__edit", "write_to_file", "edit_file",
    "replace_file_content", "multi_replace_file_content",
]  # fmt: skip
TOOL_EVENTS = sorted(
    {name for c in CLIENTS for name, spec in dialect_for(c).events.items()
     if spec.kind in (EventKind.BEFORE_TOOL, EventKind.TOOL_USE)}
)  # fmt: skip
inputs = st.dictionaries(
    st.sampled_from(["file_path", "notebook_path", "path", "command", "input", "args"])
    | st.text(max_size=8),
    json_values | st.text().map(lambda t: "*** Update File: " + t),
    max_size=5,
)
tool_payloads = st.fixed_dictionaries(
    {
        "hook_event_name": st.sampled_from(TOOL_EVENTS) | json_values,
        "event": st.sampled_from(TOOL_EVENTS) | json_values,
        "tool_name": st.sampled_from(TOOL_NAMES) | json_values,
        "tool_input": inputs | json_values,
        "toolCall": st.fixed_dictionaries(
            {"name": st.sampled_from(TOOL_NAMES) | json_values,
             "args": inputs | json_values | st.text()}
        ) | json_values,
        "file_path": json_values,
    }
)  # fmt: skip


@given(st.sampled_from(CLIENTS), st.none() | st.sampled_from(TOOL_EVENTS), tool_payloads)
def test_any_tool_payload_parses_into_bounded_paths(
    client: str, argv: str | None, payload: dict[str, object]
) -> None:
    """Arbitrary JSON in every field the readers look at never raises, and the paths found
    keep every bound."""
    event = dialect_for(client).parse(argv, json.dumps(payload))
    assert isinstance(event.edit_paths, tuple)
    assert len(event.edit_paths) <= MAX_EDIT_PATHS
    assert len(set(event.edit_paths)) == len(event.edit_paths)
    for path in event.edit_paths:
        assert isinstance(path, str) and 0 < len(path) <= MAX_PATH_CHARS and "\x00" not in path
    assert event.tool_name is None or isinstance(event.tool_name, str)


@given(st.sampled_from(CLIENTS), st.text(max_size=400), st.sampled_from(list(EditDecision)))
def test_any_pre_tool_text_renders_valid_ascii_json(
    client: str, text: str, decision: EditDecision
) -> None:
    """Whatever the daemon's text, the pre-tool answer is one compact ASCII JSON object."""
    out = dialect_for(client).render_before_tool(before(client), text, decision)
    assert out.isascii() and "\n" not in out
    assert isinstance(json.loads(out), dict)


@given(st.text(max_size=2000))
def test_patch_parsing_never_raises(text: str) -> None:
    """Any text is a patch with zero or more headers."""
    assert all(isinstance(path, str) for path in patch_paths(text))
