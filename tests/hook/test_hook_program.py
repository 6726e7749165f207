"""The hook program: exact answers per client, the working set once, notices pulled, deadlines.

Most tests run :func:`crosstalk.hook.main.run` in-process against a fake daemon (a real unix
socket served by a thread that answers each request line from a table and records it); the
promises about processes (exit status, stdout only, wall time, import path) run the real
``crosstalk-hook`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.core.dialects import CLIENTS, EventKind, dialect_for
from crosstalk.hook.main import run, start_daemon_detached
from crosstalk.paths import Home
from tests.conftest import SHORT_SCRATCH
from tests.e2e.conftest import pid_alive, stop_pid
from tests.hook.fake_daemon import FakeDaemon, Reply

WS = "Working set: the API is frozen until Friday (ana, 2 h)."


def default_replies(notices: list[dict[str, Any]] | None = None) -> dict[str, Reply]:
    waiting = list(notices or [])

    def take_notices(request: dict[str, Any]) -> dict[str, Any]:
        taken, waiting[:] = list(waiting), []
        return {"notices": taken}

    return {
        "working_set": lambda r: {"text": WS, "repo": None, "facts_total": 1, "tasks_total": 0},
        "notices": take_notices,
        "notice_shown": lambda r: {"shown": len(r["ids"])},
        "session_status": lambda r: {"name": r["name"], "status": r["status"], "surfaced": []},
    }


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    """A short state directory with an identity file, selected through CROSSTALK_HOME."""
    root = Path(tempfile.mkdtemp(prefix="ct-hook-", dir=SHORT_SCRATCH))
    (root / "identity.json").write_text("{}")
    monkeypatch.setenv("CROSSTALK_HOME", str(root))
    monkeypatch.delenv("CLAUDE_CODE_MESSAGING_SOCKET", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_SESSION_ID", raising=False)
    yield Home(root)
    started = daemons_for(root)  # in-process tests always have a daemon answering, or none needed
    for pid in started:
        stop_pid(pid)
    shutil.rmtree(root, ignore_errors=True)
    assert not started, "the hook started a daemon where it should not have"


@pytest.fixture
def daemon(home: Home) -> Iterator[FakeDaemon]:
    fake = FakeDaemon(home.socket, default_replies())
    yield fake
    fake.close()


def payload(client: str, event: str, session: str = "sess-1", cwd: str = "/tmp") -> str:
    """What ``client`` writes on stdin for ``event`` (crosstalk-behaviour.md §6.1a)."""
    if client == "agy":
        data: dict[str, Any] = {"conversationId": session, "workspacePaths": [cwd]}
    elif client == "cursor":
        data = {
            "hook_event_name": event,
            "conversation_id": session,
            "session_id": session,
            "cursor_version": "1.7.0",
            "workspace_roots": [cwd],
        }
    elif client == "goose":
        data = {"event": event, "session_id": session, "working_dir": cwd}
    else:
        data = {"hook_event_name": event, "session_id": session, "cwd": cwd}
    return json.dumps(data)


def hook(client: str, event: str, stdin: str) -> tuple[str, int]:
    return run(["--client", client, event], time.monotonic(), stdin)


# The first event of each client that can carry text, and the exact answer carrying WS.
CARRIER_GOLDEN = {
    "claude": (
        "SessionStart",
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": WS}},
    ),
    "codex": (
        "UserPromptSubmit",
        {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": WS}},
    ),
    "qwen": (
        "PostToolUse",
        {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": WS}},
    ),
    "gemini": (
        "BeforeAgent",
        {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": WS}},
    ),
    "cursor": ("sessionStart", {"additional_context": WS}),
    "agy": ("PreInvocation", {"injectSteps": [{"ephemeralMessage": WS}]}),
    "kimi": ("UserPromptSubmit", {"message": WS}),
    "hermes": ("pre_llm_call", {"context": WS}),
    "goose": ("Stop", {"decision": "block", "reason": WS}),
}
EMPTY_GOLDEN = {client: "{}" for client in CLIENTS} | {"goose": '{"decision":"allow"}'}


@pytest.mark.parametrize("client", CLIENTS)
def test_first_text_event_carries_the_working_set_in_the_clients_exact_keys(
    client: str, daemon: FakeDaemon
) -> None:
    """Each client's first text-carrying event answers exactly its own keys with the set."""
    event, golden = CARRIER_GOLDEN[client]
    out, status = hook(client, event, payload(client, event))
    assert status == 0
    assert out == json.dumps(golden, separators=(",", ":"))
    assert daemon.ops()[0] == "session_register"


@pytest.mark.parametrize("client", CLIENTS)
def test_every_registered_event_answers_exactly_empty_once_the_set_was_given(
    client: str, daemon: FakeDaemon
) -> None:
    """After the working set, events with nothing to say print the client's exact empty reply."""
    first, _ = CARRIER_GOLDEN[client]
    hook(client, first, payload(client, first))
    for event in dialect_for(client).registered:
        out, status = hook(client, event, payload(client, event))
        assert (out, status) == (EMPTY_GOLDEN[client], 0), event


def test_working_set_is_handed_over_exactly_once_per_session(daemon: FakeDaemon) -> None:
    """Sequential and concurrent events of one session see the working set once; a new
    session gets its own."""
    outs = [hook("claude", "UserPromptSubmit", payload("claude", "UserPromptSubmit"))[0]]
    outs += [hook("claude", "PostToolUse", payload("claude", "PostToolUse"))[0] for _ in range(3)]
    assert [WS in o for o in outs] == [True, False, False, False]

    results: list[str] = []
    stdin = payload("claude", "PostToolUse", session="sess-racing")
    threads = [
        threading.Thread(target=lambda: results.append(hook("claude", "PostToolUse", stdin)[0]))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(results) == 8
    assert sum(WS in out for out in results) == 1


def test_working_set_once_also_for_odd_and_very_long_session_ids(daemon: FakeDaemon) -> None:
    """Session ids with slashes, dots or 500 characters still get the set exactly once."""
    for session in ("../../etc/passwd", "a/b\\c", "x" * 500, "\u00e9\u6f22"):
        stdin = payload("claude", "PostToolUse", session=session)
        outs = [hook("claude", "PostToolUse", stdin)[0] for _ in range(2)]
        assert [WS in out for out in outs] == [True, False], session


def test_working_set_waits_for_an_event_that_can_carry_it(daemon: FakeDaemon) -> None:
    """Goose's SessionStart cannot carry text: the set comes with the first Stop instead."""
    out, _ = hook("goose", "SessionStart", payload("goose", "SessionStart"))
    assert out == '{"decision":"allow"}'
    assert "working_set" not in daemon.ops()
    out, _ = hook("goose", "Stop", payload("goose", "Stop"))
    assert json.loads(out) == {"decision": "block", "reason": WS}


def test_prompt_marks_the_session_busy_and_stop_marks_it_idle(daemon: FakeDaemon) -> None:
    """UserPromptSubmit reports busy and Stop idle, after registering the session."""
    hook("claude", "UserPromptSubmit", payload("claude", "UserPromptSubmit"))
    hook("claude", "Stop", payload("claude", "Stop"))
    statuses = [(r["name"], r["status"]) for r in daemon.requests if r["op"] == "session_status"]
    assert statuses == [("sess-1", "busy"), ("sess-1", "idle")]
    registered = [r for r in daemon.requests if r["op"] == "session_register"]
    assert registered[0] == {
        "v": 1,
        "op": "session_register",
        "name": "sess-1",
        "client": "claude",
        "project": "/tmp",
    }


def _notice(nid: str, label: str, *, surfaced: float, batch: str = "b1") -> dict[str, Any]:
    return {
        "id": nid,
        "sender": "fp-" + label,
        "label": label,
        "session": None,
        "room": "r1",
        "from_session": "api",
        "intent": "question",
        "kind": "message",
        "decision": "notice_now",
        "due": "now",
        "created_at": surfaced,
        "surfaced_at": surfaced,
        "batch": batch,
    }


def test_waiting_notices_are_pulled_once_without_words_and_marked_shown(home: Home) -> None:
    """Pending notices come back as one notice per batch, then notice_shown names their ids."""
    rows = [_notice("m1", "ben", surfaced=1.0), _notice("m2", "ben", surfaced=2.0)]
    fake = FakeDaemon(home.socket, default_replies(rows))
    try:
        out, _ = hook("codex", "PostToolUse", payload("codex", "PostToolUse"))
        text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert text.startswith(WS + "\n\n")
        notice = text[len(WS) + 2 :]
        assert (
            notice.splitlines()[0] == "ben (api session) sent you 2 messages; call "
            "crosstalk_read to see them."
        )
        shown = [r for r in fake.requests if r["op"] == "notice_shown"]
        assert shown == [{"v": 1, "op": "notice_shown", "session": "sess-1", "ids": ["m1", "m2"]}]
        assert hook("codex", "PostToolUse", payload("codex", "PostToolUse"))[0] == "{}"
    finally:
        fake.close()


def test_push_session_leaves_fresh_notices_to_the_inbox_and_pulls_stale_ones(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an inbox socket, only notices the push left waiting past the grace are pulled."""
    monkeypatch.setenv("CLAUDE_CODE_MESSAGING_SOCKET", "/tmp/claude-inbox.sock")
    now = time.time()
    rows = [
        _notice("fresh", "ben", surfaced=now),
        _notice("old", "cy", surfaced=now - 60, batch="b2"),
    ]
    fake = FakeDaemon(home.socket, default_replies(rows))
    try:
        out, _ = hook("claude", "SessionStart", payload("claude", "SessionStart"))
        text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        assert "cy sent you a message" in text.replace(" (api session)", "")
        assert "ben" not in text
        register = next(r for r in fake.requests if r["op"] == "session_register")
        assert register["inbox_socket"] == "/tmp/claude-inbox.sock"
    finally:
        fake.close()


def test_a_stalled_daemon_costs_the_budget_and_gives_the_empty_answer(home: Home) -> None:
    """A daemon that accepts and never answers: an empty answer, exit 0, within a second."""
    fake = FakeDaemon(home.socket, {}, stall=True)
    try:
        started = time.monotonic()
        out, status = hook("claude", "SessionStart", payload("claude", "SessionStart"))
        elapsed = time.monotonic() - started
    finally:
        fake.close()
    assert (out, status) == ("{}", 0)
    assert elapsed < 1.0


def test_no_session_or_no_identity_answers_empty_without_the_daemon(home: Home) -> None:
    """Nothing names a session, or there is no identity: the empty answer, no daemon asked."""
    fake = FakeDaemon(home.socket, default_replies())
    try:
        assert hook("claude", "SessionStart", '{"hook_event_name":"SessionStart"}') == ("{}", 0)
        (home.root / "identity.json").unlink()
        assert hook("claude", "SessionStart", payload("claude", "SessionStart")) == ("{}", 0)
        assert fake.requests == []
    finally:
        fake.close()


def test_unknown_client_is_a_usage_error_with_a_valid_answer(home: Home) -> None:
    """--client nobody speaks: exit 3 (never 2, which Claude Code reads as "block"), ``{}``."""
    assert hook("emacs", "SessionStart", "{}") == ("{}", 3)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from(
    [
        "hook_event_name",
        "hookEventName",
        "event",
        "session_id",
        "conversationId",
        "cwd",
        "working_dir",
        "workspace_roots",
        "workspacePaths",
        "cursor_version",
        "prompt",
        "stop_hook_active",
        "transcript_path",
        "extra",
    ]
) | st.text(max_size=8)
payloads = st.dictionaries(field_names, json_values, max_size=8).map(json.dumps)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    client=st.sampled_from([*CLIENTS, None]),
    event=st.none() | st.sampled_from(["SessionStart", "Stop", "PreInvocation", "x"]) | st.text(),
    stdin=payloads | st.text() | st.binary().map(lambda b: b.decode("latin-1")),
)
def test_fuzzed_stdin_always_gets_a_valid_answer(
    client: str | None,
    event: str | None,
    stdin: str,
    daemon: FakeDaemon,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Whatever arrives on stdin, the answer is one JSON object and nothing crashes."""
    argv = [*(["--client", client] if client else []), *([event] if event else [])]
    if event and event.startswith("-"):
        argv = argv[:2]
    out, status = run(argv, time.monotonic(), stdin)
    assert isinstance(json.loads(out), dict)
    assert status in (0, 3)
    assert "Traceback" not in capsys.readouterr().err


# --- real processes ------------------------------------------------------------------------------


def _hook_process(
    args: list[str], stdin: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crosstalk.hook.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=False,
    )


def _bare_python_seconds() -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import json, socket"], check=True, timeout=30)
    return time.monotonic() - started


@pytest.mark.parametrize("client", CLIENTS)
def test_process_prints_only_the_exact_empty_answer_when_not_set_up(client: str) -> None:
    """A real run with no identity: exit 0, stdout exactly the client's empty answer."""
    root = Path(tempfile.mkdtemp(prefix="ct-hook-", dir=SHORT_SCRATCH))
    try:
        env = {**os.environ, "CROSSTALK_HOME": str(root)}
        for event in dialect_for(client).registered:
            done = _hook_process(["--client", client, event], payload(client, event), env)
            assert (done.stdout, done.returncode) == (EMPTY_GOLDEN[client], 0), done.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_daemon_down_gives_a_valid_empty_answer_within_a_second() -> None:
    """Identity present, nothing listening: the empty answer, a reason on stderr, exit 0, and
    no more than a second beyond a bare interpreter's start-up in the same run."""
    root = Path(tempfile.mkdtemp(prefix="ct-hook-", dir=SHORT_SCRATCH))
    # An identity that does not parse: the daemon the hook starts refuses it and exits.
    (root / "identity.json").write_text("not an identity")
    try:
        env = {**os.environ, "CROSSTALK_HOME": str(root)}
        baseline = _bare_python_seconds()
        started = time.monotonic()
        done = _hook_process(
            ["--client", "claude", "SessionStart"], payload("claude", "SessionStart"), env
        )
        elapsed = time.monotonic() - started
        assert (done.stdout, done.returncode) == ("{}", 0)
        assert "daemon" in done.stderr and "Traceback" not in done.stderr
        assert elapsed < baseline + 1.0, (elapsed, baseline)
    finally:
        _stop_started_daemon(root)
        shutil.rmtree(root, ignore_errors=True)


def daemons_for(root: Path) -> list[int]:
    """Pids of ``crosstalk daemon`` processes started for the state directory ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # it ended while we looked
        if b"daemon" in argv and os.fsencode(root) in argv:
            found.append(int(entry.name))
    return found


def _stop_started_daemon(root: Path) -> None:
    """Wait (bounded) for the daemon the hook started to take the lock, refuse the damaged
    identity and exit; stop it by pid if it has not, so that nothing outlives the test (a late
    daemon would recreate the removed directory and run there)."""
    lock = root / "daemon.lock"
    deadline = time.monotonic() + 30
    pid = 0
    while time.monotonic() < deadline:
        text = lock.read_text().strip() if lock.exists() else ""
        pid = int(text) if text.isdigit() else 0
        if pid and not pid_alive(pid):
            return
        time.sleep(0.05)
    if pid:
        stop_pid(pid)
    raise AssertionError("the daemon started for a damaged identity did not refuse it in time")


def test_hooks_start_the_daemon_at_most_once_per_interval(home: Home) -> None:
    """Two hooks finding the daemon down in quick succession start one daemon, detached, with
    nothing of its output on the client's stdout."""
    spawned: list[tuple[list[str], list[tuple[int, int, str, int, int]], bool]] = []

    def spawn(
        path: str,
        argv: list[str],
        env: dict[str, str],
        /,
        *,
        file_actions: list[tuple[int, int, str, int, int]],
        setsid: bool,
    ) -> int:
        spawned.append((argv, file_actions, setsid))
        return 0

    start_daemon_detached(home, spawn=spawn)
    start_daemon_detached(home, spawn=spawn)
    ((argv, actions, setsid),) = spawned
    assert argv[1:] == ["-m", "crosstalk", "daemon", "run", "--detach", "--home", str(home.root)]
    assert setsid and sorted(action[1] for action in actions) == [0, 1, 2]
    assert all(action[2] == os.devnull for action in actions)


def test_import_path_is_standard_library_only() -> None:
    """Importing the hook loads no trio, attrs, cattrs, nacl, typer or mcp."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import crosstalk.hook.main"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()}
    assert not loaded & {"trio", "attrs", "attr", "cattrs", "nacl", "typer", "mcp", "sqlite3"}
    assert "crosstalk" in loaded


@pytest.mark.parametrize("client", CLIENTS)
def test_every_event_is_one_request_on_the_control_socket(client: str, home: Home) -> None:
    """Each registered event is one ``hook_event`` line (plus ``notice_shown`` after an answer
    that showed notices), whatever the event needs: register, status, working set, notices. A
    pre-tool event that writes no file asks nothing at all."""
    waiting = [{"id": "m1", "sender": "ana", "label": "ana", "kind": "message", "batch": "b1"}]
    fake = FakeDaemon(home.socket, default_replies(waiting))
    dialect = dialect_for(client)
    try:
        for event in dialect.registered:
            before = len(fake.lines)
            hook(client, event, payload(client, event))
            sent = [line["op"] for line in fake.lines[before:]]
            if dialect.parse(event, payload(client, event)).kind is EventKind.BEFORE_TOOL:
                assert sent == [], (event, sent)
                continue
            assert sent[:1] == ["hook_event"] and set(sent[1:]) <= {"notice_shown"}, sent
            assert len(sent) <= 2
    finally:
        fake.close()
    assert "notice_shown" in fake.ops()  # the waiting notice was shown on a carrying event


def test_a_daemon_without_the_combined_op_is_asked_op_by_op(home: Home) -> None:
    """A daemon older than ``hook_event`` refuses it; the hook asks the ops one by one and
    prints the same answer."""
    replies = default_replies()
    replies["hook_event"] = lambda r: {
        "ok": False, "error": {"code": "unknown_op", "message": "no such op"}
    }
    fake = FakeDaemon(home.socket, replies)
    try:
        event, golden = CARRIER_GOLDEN["claude"]
        out, status = hook("claude", event, payload("claude", event))
    finally:
        fake.close()
    assert (out, status) == (json.dumps(golden, separators=(",", ":")), 0)
    assert fake.ops() == ["hook_event", "session_register", "working_set", "notices"]


def test_the_hooks_state_directory_is_the_one_home_resolves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HookHome`` (strings, no pathlib) names the same files as ``crosstalk.paths.Home``."""
    from crosstalk import paths
    from crosstalk.hook.main import HOME_ENV, HookHome

    assert HOME_ENV == paths.HOME_ENV
    for chosen in (None, "/tmp//ct-x/./home/", "~/ct-y", "relative/dir", "/a/b/../c"):
        if chosen is None:
            monkeypatch.delenv(HOME_ENV, raising=False)
        else:
            monkeypatch.setenv(HOME_ENV, chosen)
        ours, theirs = HookHome.resolve(), Home.resolve()
        assert ours.root == str(theirs.root)
        assert (ours.socket, ours.identity) == (str(theirs.socket), str(theirs.identity))


def test_the_notice_renderer_is_imported_only_when_notices_wait() -> None:
    """Importing the hook leaves ``crosstalk.core.notice`` unloaded (most events have nothing
    to show); rendering a notice row loads it."""
    code = (
        "import sys, crosstalk.hook.main, crosstalk.hook.flow as f; "
        "print('crosstalk.core.notice' in sys.modules); "
        "f.notices_text([{'id': 'm1', 'sender': 'ana', 'kind': 'message'}], marker=str); "
        "print('crosstalk.core.notice' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.split() == ["False", "True"]


def test_hook_import_path_skips_what_a_bare_interpreter_does_not_load() -> None:
    """Beyond the modules ``import json, socket`` loads, the hook imports only its own: no
    dataclasses (inspect, ast, dis), pathlib or typing. Run without site-packages processing
    (``-S``), so what a .pth file imports does not hide what the hook imports."""
    import crosstalk

    env = {**os.environ, "PYTHONPATH": str(Path(crosstalk.__file__).parents[1])}

    def loaded(code: str) -> set[str]:
        done = subprocess.run(
            [sys.executable, "-S", "-X", "importtime", "-c", code],
            capture_output=True, text=True, timeout=30, check=True, env=env,
        )
        return {line.split("|")[-1].strip() for line in done.stderr.splitlines()[1:]}

    bare = loaded("import json, socket")
    extra = loaded("import crosstalk.hook.main") - bare
    assert not {m for m in extra if not m.startswith("crosstalk")} - {"__future__"}, extra


def test_the_hook_uses_the_socket_c_module_not_socket_py() -> None:
    """``socket.py`` (its enum tables, ``selectors``, ``array``) is a measurable share of the
    hook's start-up and a unix socket needs none of it: the hook never loads it."""
    code = (
        "import sys, crosstalk.hook.main, crosstalk.core.dialects.claude; "
        "print(sorted({'socket', 'selectors'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=30,
        check=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.stdout.strip() == "[]"


def test_the_installed_command_runs_without_site_packages(tmp_path: Path) -> None:
    """The command line the installers write (``python -I -S .../hook/launch.py``) answers an
    event as the console script does, with ``site`` never imported."""
    from crosstalk.install import resolve_commands

    hook = resolve_commands().hook
    assert hook[-1].endswith("/crosstalk/hook/launch.py")
    env = {**os.environ, "CROSSTALK_HOME": str(tmp_path / "nobody")}
    stdin = json.dumps({"hook_event_name": "SessionStart", "session_id": "s", "cwd": "/tmp"})
    done = subprocess.run(
        [hook[0], "-X", "importtime", *hook[1:], "--client", "claude", "SessionStart"],
        input=stdin, capture_output=True, text=True, timeout=30, check=False, env=env,
    )
    assert (done.returncode, done.stdout) == (0, "{}"), done.stderr
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines()[1:]}
    assert "crosstalk.hook.main" in loaded and "site" not in loaded
