"""The MCP read tool acknowledges after building its result and shows each id once."""

from __future__ import annotations

from typing import Any

from crosstalk.errors import CrosstalkError
from crosstalk.mcp.tools import TOOLS


class FakeDaemon:
    """A Caller whose ``read`` hands out the same message until an ack gets through."""

    session: str | None = "s1"
    cwd = "/tmp"
    transcript: str | None = None

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ack_fails = True
        self.read_done = False

    async def call(self, op: str, params: dict[str, Any], *, limit: float = 0.0) -> Any:
        self.calls.append(op)
        if op == "ack":
            if self.ack_fails:
                raise CrosstalkError("The daemon closed the connection.", code="daemon_unreachable")
            self.read_done = True
            return {"acked": 1}
        message = {"id": "m1", "text": "hello"}
        return {"messages": [] if self.read_done else [message], "lease": "L1"}

    async def call_until(self, op: str, params: dict[str, Any], key: str, *, limit: float) -> Any:
        raise AssertionError("not used")


async def test_a_message_whose_ack_failed_is_handed_out_again_but_shown_once() -> None:
    """read → result built → ack (fails) → read again: the same id is dropped, then acked."""
    daemon = FakeDaemon()
    read = next(spec for spec in TOOLS if spec.name == "crosstalk_read").make(daemon)
    first = await read()
    assert [m["id"] for m in first["messages"]] == ["m1"]
    assert "not marked read" in first["note"]
    assert daemon.calls == ["read", "ack"]
    daemon.ack_fails = False
    second = await read()
    assert second["messages"] == [] and daemon.calls[-2:] == ["read", "ack"]
    assert daemon.read_done
