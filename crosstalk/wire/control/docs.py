"""docs/control.md, written from the op table: every op, its params, its reply and its errors.

``python -m crosstalk.wire.control.docs --write docs/control.md`` rewrites it;
``tests/wire/test_control_docs.py`` fails while the file differs from what the table says.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import attrs

from crosstalk.wire.control.params import CALLER
from crosstalk.wire.control.spec import COMMON_ERRORS, OpSpec
from crosstalk.wire.control.table import OPS

HEADER = """\
# Control ops

<!-- Generated from crosstalk/wire/control/table.py by
     `python -m crosstalk.wire.control.docs --write docs/control.md`; do not edit. -->

Every CLI command, hook and MCP tool reaches the daemon through its control socket
(`daemon.sock`, mode 0600): one JSON object per line, `{"v": 1, "op": NAME, ...params}`, answered
by `{"ok": true, ...reply}` or `{"ok": false, "error": {"code", "message"}}` (a stream op answers
with one line per record). This page lists every op the daemon serves, from the one table the
daemon dispatches by. A param marked *caller* is filled by the MCP server from where its session
runs (its name, its directory, its transcript), never typed by the model; `peer_cwd` is set by
the control server from the kernel. The error codes are explained in [errors.md](errors.md).

Any op may also fail with: {common}.
"""


def _type(model: type[Any], field: attrs.Attribute[Any]) -> str:
    """The field's annotation as written: the converter may have resolved ``field.type`` into
    type objects already (it does on first use), which would render differently."""
    written = next(
        (inspect.get_annotations(klass)[field.name] for klass in model.__mro__
         if field.name in inspect.get_annotations(klass)),
        field.type,
    )  # fmt: skip
    kind = written if isinstance(written, str) else getattr(written, "__name__", str(written))
    return "`" + kind.replace("|", "\\|") + "`"  # a bare | would end the table's cell


def _default(field: attrs.Attribute[Any]) -> str:
    if field.default is attrs.NOTHING:
        return "required"
    factory = getattr(field.default, "factory", None)  # attrs.Factory(list) and the like
    value = factory() if callable(factory) else field.default
    return f"`{json.dumps(value)}`"  # as it travels


def _fields(model: type[Any], *, params: bool) -> list[str]:
    fields = attrs.fields(model)
    if not fields:
        return ["none"]
    head = ["| field | type | default |", "| --- | --- | --- |"] if params else [
        "| field | type |", "| --- | --- |"]  # fmt: skip
    rows = []
    for field in fields:
        name = field.name.rstrip("_")  # ``from_`` travels as ``from``
        if params:
            note = " (*caller*)" if field.metadata.get(CALLER) else ""
            rows.append(f"| `{name}`{note} | {_type(model, field)} | {_default(field)} |")
        else:
            rows.append(f"| `{name}` | {_type(model, field)} |")
    return head + rows


def _codes(errors: tuple[type[Exception], ...]) -> str:
    codes = sorted({str(getattr(error, "code", "internal")) for error in errors})
    return ", ".join(f"`{code}`" for code in codes) or "none of its own"


def _op(spec: OpSpec[Any]) -> list[str]:
    kind = " A stream: one reply line per record." if spec.stream else ""
    lines = [f"## `{spec.name}`", "", f"{spec.doc}{kind}", ""]
    lines += [f"Params (`{spec.params.__name__}`):", ""]
    lines += _fields(spec.params, params=True)
    lines += [""]
    for model in spec.replies():
        which = "Record" if spec.stream else "Reply"
        lines += [f"{which} (`{model.__name__}`):", "", *_fields(model, params=False), ""]
    lines += [f"Errors: {_codes(spec.errors)}.", ""]
    return lines


def render(ops: tuple[OpSpec[Any], ...] = OPS) -> str:
    """The whole of docs/control.md, for the table ``ops``."""
    lines = [HEADER.replace("{common}", _codes(COMMON_ERRORS))]
    for spec in ops:
        lines += _op(spec)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    """``--write PATH``: write the page there; with no arguments, print it."""
    if argv[:1] == ["--write"] and len(argv) == 2:
        Path(argv[1]).write_text(render())
        return 0
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
