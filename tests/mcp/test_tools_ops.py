"""The MCP tools are generated from the op table: each tool's listed schema is its op's params
model (minus the caller's fields and what the tool leaves out), and what a call sends is what
that op takes on the wire. Planted params and declarations show the generation follows the
model and refuses declarations that do not fit it."""

from __future__ import annotations

import functools
from typing import Any

import attrs
import pytest
import trio

from crosstalk.mcp.server import CrosstalkServer
from crosstalk.mcp.tool_kit import Arg, Tool
from crosstalk.mcp.tools import TOOLS
from crosstalk.wire.control import table as t
from crosstalk.wire.control.params import CALLER, caller
from crosstalk.wire.converter import structure_remote, unstructure


class Recorder:
    """A Caller that keeps every request and answers each with an empty reply."""

    session: str | None = "s1"
    cwd = "/project"
    transcript: str | None = "/t.jsonl"

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def call(self, op: str, params: dict[str, Any], *, limit: float = 0.0) -> Any:
        self.sent.append((op, params))
        return {}

    async def call_until(self, op: str, params: dict[str, Any], key: str, *, limit: float) -> Any:
        self.sent.append((op, params))
        return {key: "x"}


def schema(tool: Tool) -> dict[str, Any]:
    """The input schema the server lists for ``tool``."""
    server = CrosstalkServer("t")
    server.add_tool(tool.make(Recorder()), name=tool.name, structured_output=False)
    (listed,) = trio.run(server.list_tools)
    return dict(listed.input_schema)


def sample(prop: dict[str, Any]) -> Any:
    """A value the property takes (the first choice of an enum, a non-null one of a union)."""
    if "enum" in prop:
        return prop["enum"][0]
    if "anyOf" in prop:
        return sample(next(p for p in prop["anyOf"] if p.get("type") != "null"))
    minimum = prop.get("minimum", prop.get("exclusiveMinimum", 0))
    values = {"string": "x", "boolean": True, "integer": minimum + 1, "number": minimum + 1.5,
              "array": ["x"]}
    return values[prop["type"]]


def test_every_tool_sends_what_its_op_takes_on_the_wire() -> None:
    """Each tool, called with every argument it lists, sends params that structure into its op's
    model through the daemon's own converter and come back out unchanged (a key the model does
    not take, or a renamed one sent under the wrong name, would not)."""
    for tool in TOOLS:
        props = schema(tool)["properties"]
        assert all(not name.startswith("_") for name in props)
        recorder = Recorder()
        fn = tool.make(recorder)
        trio.run(functools.partial(fn, **{n: sample(p) for n, p in props.items()}))
        op, params = recorder.sent[0]
        spec = t.BY_NAME[op]
        assert spec is tool.spec or tool.run is not None, tool.name
        back = unstructure(structure_remote(params, spec.params))
        assert {k: back[k] for k in params} == params, tool.name


def test_no_tool_lists_a_caller_field_and_the_server_fills_them() -> None:
    """session, cwd and transcript come from where the server runs, never from the agent."""
    for tool in TOOLS:
        props = schema(tool)["properties"]
        for field in attrs.fields(tool.spec.params):
            if field.metadata.get(CALLER):
                assert field.name not in props, (tool.name, field.name)
    recorder = Recorder()
    send = next(tool for tool in TOOLS if tool.name == "crosstalk_send")
    trio.run(lambda: send.make(recorder)(to="ana", text="hi"))
    _, params = recorder.sent[0]
    assert (params["session"], params["cwd"], params["transcript"]) == ("s1", "/project",
                                                                         "/t.jsonl")
    assert "peer_cwd" not in params  # the control server's, from the kernel


@attrs.frozen
class PlantedParams:
    """ReadParams with a param added, and a caller field the server does not know."""

    all: bool = False
    colour: str = "red"
    limit: int | None = None
    session: str | None = caller()
    origin: str | None = caller()


PLANTED = attrs.evolve(t.READ, params=PlantedParams)


def test_a_param_added_to_the_model_shows_up_in_its_tool() -> None:
    """Planted: a model with two new params lists them, typed and defaulted as the model says;
    a tool that leaves one out does not."""
    listed = schema(Tool("crosstalk_planted", "planted", PLANTED))["properties"]
    assert listed["colour"] == {"default": "red", "type": "string"}
    assert listed["limit"]["default"] is None and "limit" in listed
    left_out = Tool("crosstalk_planted", "planted", PLANTED, omit=("colour",))
    assert "colour" not in schema(left_out)["properties"]


def test_a_caller_field_is_never_in_a_schema() -> None:
    """Planted: caller fields of a model, known to the server or not, are never listed; a known
    one is filled, an unknown one is left to the control server."""
    tool = Tool("crosstalk_planted", "planted", PLANTED, args={"colour": Arg(name="hue")})
    assert sorted(schema(tool)["properties"]) == ["all", "hue", "limit"]
    recorder = Recorder()
    trio.run(lambda: tool.make(recorder)(hue="blue"))
    assert recorder.sent == [("read", {"all": False, "colour": "blue", "session": "s1"})]


def test_a_declaration_that_does_not_fit_its_op_is_refused() -> None:
    """Planted: an override of a param the op lacks, and a required param left out unfixed."""
    with pytest.raises(TypeError, match="send has no param 'colour'"):
        Tool("crosstalk_x", "x", t.SEND, args={"colour": Arg()}).arguments()
    with pytest.raises(TypeError, match="leaves out send's required 'to'"):
        Tool("crosstalk_x", "x", t.SEND, omit=("to",)).arguments()
    assert Tool("crosstalk_x", "x", t.SEND, omit=("to",), fixed={"to": "ana"}).arguments()
