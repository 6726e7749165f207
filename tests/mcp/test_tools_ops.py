"""Every MCP tool calls ops of the one op table with params those ops take: a static walk of
each tool's ``c.call``/``c.call_until`` requests against the op's params model (the names it
sends, the required ones it must send, and the caller-filled ones, which only the server's
own ``c.session``/``c.cwd``/``c.transcript`` may fill)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import attrs

from crosstalk.wire.control.params import CALLER
from crosstalk.wire.control.table import BY_NAME

MCP = Path(__file__).resolve().parents[2] / "crosstalk" / "mcp"
FROM_CALLER = {"c.session", "c.cwd", "c.transcript"}


def _params_dict(node: ast.expr, bound: dict[str, ast.expr]) -> ast.Dict | None:
    """The dict literal a request's params come from: literal, ``drop_none(...)``, or a name
    bound to one earlier in the tool."""
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "drop_none" and node.args:
        return _params_dict(node.args[0], bound)
    if isinstance(node, ast.Name) and node.id in bound:
        return _params_dict(bound[node.id], bound)
    return node if isinstance(node, ast.Dict) else None


def requests(source: str) -> Iterator[tuple[str, str, ast.Dict | None]]:
    """(tool, op, params) for every daemon request the tools in ``source`` make."""
    for tool in ast.walk(ast.parse(source)):
        if not isinstance(tool, ast.AsyncFunctionDef):
            continue
        bound = {t.id: n.value for n in ast.walk(tool) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tool):
            if (isinstance(node, ast.Call) and ast.unparse(node.func) in ("c.call", "c.call_until")
                    and isinstance(node.args[0], ast.Constant)):
                params = _params_dict(node.args[1], bound) if len(node.args) > 1 else None
                yield tool.name, str(node.args[0].value), params


def problems(source: str) -> list[str]:
    """What the tools in ``source`` send that their ops would not take as meant."""
    found = []
    for tool, op, params in requests(source):
        spec = BY_NAME.get(op)
        if spec is None:
            found.append(f"{tool}: no op {op!r} in the table")
            continue
        fields = {f.name.rstrip("_"): f for f in attrs.fields(spec.params)}
        pairs = [] if params is None else zip(params.keys, params.values, strict=True)
        sent = {ast.literal_eval(k): ast.unparse(v) for k, v in pairs if k is not None}
        for key, value in sent.items():
            if key not in fields:
                found.append(f"{tool}: {op} takes no {key!r}")
            elif fields[key].metadata.get(CALLER) and value not in FROM_CALLER:
                found.append(f"{tool}: {op}'s {key!r} is the caller's, not {value}")
        missing = [n for n, f in fields.items() if f.default is attrs.NOTHING and n not in sent]
        if params is not None and missing:
            found.append(f"{tool}: {op} needs {missing}")
    return found


def test_every_tool_calls_table_ops_with_params_they_take() -> None:
    """The message, presence and memory tools all fit their ops."""
    sources = [MCP / "tools.py", MCP / "memory_tools.py"]
    assert [op for s in sources for _, op, _ in requests(s.read_text())], "the walk saw no calls"
    assert [p for s in sources for p in problems(s.read_text())] == []


def test_the_walk_catches_a_tool_that_does_not_fit_its_op() -> None:
    """Planted: an unknown op, a param the op does not take, a caller field filled by the
    model, and a required param left out are each reported."""
    source = (
        "async def crosstalk_x(text, who):\n"
        "    await c.call('no_such_op', {})\n"
        "    await c.call('send', {'to': who, 'text': text, 'colour': 'red'})\n"
        "    params = {'to': who, 'text': text, 'session': who}\n"
        "    await c.call('send', drop_none(params))\n"
        "    await c.call('read_slice', {'index': 1})\n"
    )
    assert problems(source) == [
        "crosstalk_x: no op 'no_such_op' in the table",
        "crosstalk_x: send takes no 'colour'",
        "crosstalk_x: send's 'session' is the caller's, not who",
        "crosstalk_x: read_slice needs ['id']",
    ]
