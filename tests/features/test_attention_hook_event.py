"""``hook_event``, the one op a hook event sends, against the gate actor and a real (in-memory)
database: what it commits, and how many times."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from crosstalk.core.triage import SessionStatus
from crosstalk.features.attention.sessions import HookEventParams, hook_event
from crosstalk.store.sessions import get_session
from crosstalk.wire.control.replies.daemon import EditWarning
from crosstalk.wire.control.replies.memory import CheckReply, TouchedReply
from crosstalk.wire.control.spec import OpSpec
from crosstalk.wire.converter import structure_remote, unstructure
from tests.actors.gate_world import InlineStore
from tests.actors.test_gate_actor import gate_world


class NoOps:
    """The op table of a daemon without the memory feature (no ``working_set``)."""

    def has(self, name: str) -> bool:
        return False

    async def run(self, spec: OpSpec[Any], params: Any, reply: type[Any]) -> Any:
        raise AssertionError(f"no op {spec.name} here")


class Host:
    def __init__(self, store: Any) -> None:
        self.store = store
        self.ops = NoOps()


def commits_so_far(store: InlineStore) -> int:
    count = 0
    while True:
        try:
            store.commits.receive_nowait()
        except trio.WouldBlock:
            return count
        count += 1


async def test_a_prompt_registers_and_turns_its_session_in_one_commit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A new session's prompt (``status: busy``) registers it and marks it busy in the gate's
    one transaction; the reply describes the session as registered."""
    async with gate_world() as world:
        await trio.testing.wait_all_tasks_blocked()
        commits_so_far(world.store)
        params = HookEventParams("s1", client="claude", project="/p", status="busy")
        reply = await hook_event(Host(world.store), world.inbox, params)
        await trio.testing.wait_all_tasks_blocked()

        assert commits_so_far(world.store) == 1
        assert (reply.session.name, reply.session.client, reply.session.project) == (
            "s1", "claude", "/p",
        )
        stored = world.store.now(lambda conn: get_session(conn, "s1"))
        assert stored is not None
        assert (stored.client, stored.status) == ("claude", SessionStatus.BUSY)


async def test_an_event_without_a_status_only_registers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A tool event (no status) registers the session without asking the gate."""
    async with gate_world() as world:
        await trio.testing.wait_all_tasks_blocked()
        commits_so_far(world.store)
        params = HookEventParams("s2", client="codex", project="/q")
        reply = await hook_event(Host(world.store), world.inbox, params)

        assert commits_so_far(world.store) == 1
        assert reply.session.status == SessionStatus.UNKNOWN.value


class Counted:
    """The store as ``hook_event`` sees it, counting its transactions."""

    def __init__(self, store: InlineStore) -> None:
        self._store = store
        self.writes = self.reads = 0

    async def write(self, fn: Any) -> Any:
        self.writes += 1
        return await self._store.write(fn)

    async def read(self, fn: Any) -> Any:
        self.reads += 1
        return await self._store.read(fn)


async def test_a_tool_event_registers_and_reads_its_notices_in_one_transaction(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An event without a status that asks for notices is one write transaction (register,
    then the pending notices) and no separate read."""
    async with gate_world() as world:
        await trio.testing.wait_all_tasks_blocked()
        counted = Counted(world.store)
        host = Host(counted)
        params = HookEventParams("s3", client="claude", project="/r", notices=True)
        reply = await hook_event(host, world.inbox, params)

        assert (counted.writes, counted.reads) == (1, 0)
        assert reply.notices == []
        assert reply.session.name == "s3"


async def test_a_stop_is_the_gates_commit_and_one_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A stop that asks for notices: the gate's one commit, then one read of what it
    surfaced; the handler itself writes nothing."""
    async with gate_world() as world:
        await trio.testing.wait_all_tasks_blocked()
        commits_so_far(world.store)
        counted = Counted(world.store)
        host = Host(counted)
        params = HookEventParams("s4", client="claude", project="/r", status="idle", notices=True)
        reply = await hook_event(host, world.inbox, params)
        await trio.testing.wait_all_tasks_blocked()

        assert (counted.writes, counted.reads) == (0, 1)
        assert commits_so_far(world.store) == 1
        assert reply.notices == []


class EditOps:
    """An op table serving the edits feature's two ops, recording each call in order."""

    def __init__(self, warning: dict[str, Any]) -> None:
        self.warning = warning
        self.calls: list[tuple[str, Any]] = []

    def has(self, name: str) -> bool:
        return name in ("edits_touched", "edits_check")

    async def run(self, spec: OpSpec[Any], params: Any, reply: type[Any]) -> Any:
        sent = {k: v for k, v in unstructure(params).items() if v is not None}
        self.calls.append((spec.name, sent))
        if spec.name == "edits_check":
            return CheckReply(**self.warning)
        return TouchedReply([], [])


class EditHost:
    def __init__(self, store: Any, ops: EditOps) -> None:
        self.store = store
        self.ops = ops


async def test_edited_paths_are_handed_to_edits_touched(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``edited`` goes to ``edits_touched`` with the session and cwd; no check is asked."""
    async with gate_world() as world:
        ops = EditOps({})
        params = HookEventParams("s5", client="claude", project="/p", cwd="/p/sub",
                                 edited=["a.py", "/p/b.py"])
        reply = await hook_event(EditHost(world.store, ops), world.inbox, params)

        assert ops.calls == [
            ("edits_touched", {"session": "s5", "cwd": "/p/sub", "paths": ["a.py", "/p/b.py"]})
        ]
        assert reply.edit_warning is None


async def test_editing_paths_get_the_warning_edits_check_gives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``editing`` asks ``edits_check``; its text and decision are the reply's edit_warning."""
    async with gate_world() as world:
        ops = EditOps({"text": "ana is editing a.py", "decision": "ask"})
        params = HookEventParams("s6", client="codex", project="/p", cwd="/p", editing=["a.py"])
        reply = await hook_event(EditHost(world.store, ops), world.inbox, params)

        assert ops.calls == [("edits_check", {"session": "s6", "cwd": "/p", "paths": ["a.py"]})]
        assert reply.edit_warning == EditWarning("ana is editing a.py", "ask")
        assert unstructure(reply)["edit_warning"] == {
            "text": "ana is editing a.py", "decision": "ask",
        }


async def test_an_allow_without_text_is_no_warning(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``edits_check`` with nothing to say gives ``edit_warning: null``."""
    async with gate_world() as world:
        ops = EditOps({"text": None, "decision": "allow"})
        params = HookEventParams("s7", project="/p", cwd="/p", editing=["a.py"])
        reply = await hook_event(EditHost(world.store, ops), world.inbox, params)

        assert [name for name, _ in ops.calls] == ["edits_check"]
        assert reply.edit_warning is None


async def test_edits_are_ignored_by_a_daemon_without_the_edits_feature(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Without the ops, edit paths change nothing: no call (NoOps would fail it), no warning."""
    async with gate_world() as world:
        params = HookEventParams("s8", project="/p", cwd="/p", edited=["a"], editing=["b"])
        reply = await hook_event(Host(world.store), world.inbox, params)

        assert reply.edit_warning is None and reply.session.name == "s8"


def test_the_edit_keys_are_optional_on_the_wire() -> None:
    """A hook that sends no edit keys is read with empty lists; one that sends them, with them."""
    plain = structure_remote({"name": "s"}, HookEventParams)
    assert (plain.edited, plain.editing) == ([], [])
    edits = structure_remote({"name": "s", "cwd": "/p", "editing": ["x"]}, HookEventParams)
    assert (edits.editing, edits.cwd) == (["x"], "/p")
