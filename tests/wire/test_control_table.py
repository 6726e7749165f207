"""The one table of control ops holds together: every op in it is served by exactly one feature
with a handler of its kind, its models are attrs classes, its errors are documented codes, and
no handler raises an error its spec leaves out (a static walk of each handler and the functions
of its module it calls)."""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from crosstalk import errors
from crosstalk.wire.control.spec import COMMON_ERRORS, OpSpec
from crosstalk.wire.control.table import BY_NAME, OPS
from tests.docs.test_error_codes import documented_codes

FEATURES = Path(__file__).resolve().parents[2] / "crosstalk" / "features"
ERROR_CLASSES = {
    name: cls for name, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.CrosstalkError)
}  # fmt: skip


def test_every_spec_is_well_formed() -> None:
    """Names are unique; params and replies are attrs models; errors are CrosstalkErrors whose
    codes docs/errors.md explains; each op has its one line of doc."""
    assert len(BY_NAME) == len(OPS)
    documented = set(documented_codes())
    for spec in OPS:
        assert attrs.has(spec.params), spec.name
        assert all(attrs.has(model) for model in spec.replies()), spec.name
        assert spec.doc and "\n" not in spec.doc, spec.name
        for error in (*spec.errors, *COMMON_ERRORS):
            assert issubclass(error, errors.CrosstalkError), (spec.name, error)
            assert error.code in documented | {"internal"}, (spec.name, error.code)


def _registrations() -> Iterator[tuple[Path, ast.Call]]:
    """Every ``op(SPEC, handler)`` and ``stream_op(SPEC, handler)`` call in the features."""
    for path in sorted(FEATURES.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("op", "stream_op") and len(node.args) == 2):
                yield path, node


def test_every_op_in_the_table_is_served_once_by_a_handler_of_its_kind() -> None:
    """Each spec is registered by exactly one feature, with stream_op exactly when it streams."""
    seen: dict[str, str] = {}
    for path, call in _registrations():
        first = call.args[0]
        assert isinstance(first, ast.Name), ast.unparse(call)
        spec = _spec_named(first.id)
        assert spec.name not in seen, f"{spec.name} registered in {seen[spec.name]} and {path}"
        seen[spec.name] = path.name
        assert (call.func.id == "stream_op") == spec.stream, spec.name  # type: ignore[attr-defined]
    assert sorted(seen) == sorted(BY_NAME)


def _spec_named(constant: str) -> OpSpec[object]:
    from crosstalk.wire.control import table, table_memory

    spec = getattr(table, constant, None) or getattr(table_memory, constant)
    assert isinstance(spec, OpSpec), constant
    return spec


def _handler_name(node: ast.expr) -> str | None:
    """The module-level function behind ``fn``, ``functools.partial(fn, ...)`` or a lambda."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith("partial"):
        return _handler_name(node.args[0])
    return None


def raised(tree: ast.Module, name: str) -> set[str]:
    """The CrosstalkError classes the function ``name`` raises (or returns, for its caller to
    raise), directly or through the functions of the same module it calls (nested functions
    are looked up by name too)."""
    defs = {n.name: n for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}  # fmt: skip
    found: set[str] = set()
    todo, done = [name], set()
    while todo:
        current = todo.pop()
        if current in done or current not in defs:
            continue
        done.add(current)
        for node in ast.walk(defs[current]):
            # An error made to be raised by the caller (``return Refused(...)``) counts too.
            made = node.exc if isinstance(node, ast.Raise) else (
                node.value if isinstance(node, ast.Return) else None)
            if isinstance(made, ast.Call):
                error = ast.unparse(made.func).rsplit(".", 1)[-1]
                if error in ERROR_CLASSES:
                    found.add(error)
            if isinstance(node, ast.Call):
                todo.append(ast.unparse(node.func).rsplit(".", 1)[-1])
    return found


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def undeclared() -> list[str]:
    """Each (op, error) where a handler may raise an error its spec does not declare."""
    wrong = []
    for path, call in _registrations():
        spec = _spec_named(ast.unparse(call.args[0]))
        handler = _handler_name(call.args[1])
        if handler is None:
            continue
        for error in raised(_parsed(path), handler):
            if not spec.declares(ERROR_CLASSES[error]("")):
                wrong.append(f"{spec.name}: {error} ({path.relative_to(FEATURES)})")
    return sorted(wrong)


def test_no_handler_raises_an_error_its_spec_leaves_out() -> None:
    """The walk finds every error a handler (and what it calls in its module) raises declared."""
    assert undeclared() == []


def test_the_walk_finds_an_undeclared_error() -> None:
    """Planted: a handler raising WrongWords is caught by the walk (it is in no memory op)."""
    tree = ast.parse(
        "async def handler(params):\n    return helper()\n\n"
        "def helper():\n    raise WrongWords('planted')\n"
    )
    assert raised(tree, "handler") == {"WrongWords"}
    assert not BY_NAME["facts"].declares(errors.WrongWords(""))


@pytest.mark.parametrize("spec", OPS, ids=[s.name for s in OPS])
def test_every_spec_declares_the_common_errors(spec: OpSpec[object]) -> None:
    """Every op may answer invalid_request (its params did not fit) and internal (a bug)."""
    assert spec.declares(errors.InvalidRequest("")) and spec.declares(errors.CrosstalkError(""))
