"""docs/control.md is what the op table says: every op, its params, reply and errors."""

from __future__ import annotations

from pathlib import Path

import attrs

from crosstalk.wire.control.docs import render
from crosstalk.wire.control.table import OPS, SEND

DOC = Path(__file__).resolve().parents[2] / "docs" / "control.md"


def test_the_control_doc_is_current() -> None:
    """docs/control.md is exactly what the table renders; rewrite it with
    `python -m crosstalk.wire.control.docs --write docs/control.md`."""
    assert DOC.read_text() == render(), "docs/control.md is stale: regenerate it"


def test_a_change_to_the_table_shows_in_the_doc() -> None:
    """Planted: one op's doc line changed in the table renders a different page, so the
    currency check above fails until the page is written again."""
    changed = tuple(attrs.evolve(s, doc="Changed.") if s is SEND else s for s in OPS)
    assert render(changed) != render()
    assert "Changed." in render(changed)


def test_the_doc_lists_every_op_with_its_errors() -> None:
    """Each op has its heading; send lists its own codes and its caller-filled fields."""
    page = render()
    for spec in OPS:
        assert f"## `{spec.name}`" in page
    send = page.split("## `send`")[1].split("## `")[0]
    assert "`needs_reason`" in send and "`session` (*caller*)" in send


def test_the_doc_is_the_same_once_the_converter_has_used_the_models() -> None:
    """Structuring resolves a model's field types into objects; the page still shows the
    annotations as written (a run that used the converter first rendered them differently)."""
    before = render()
    for spec in OPS:
        attrs.resolve_types(spec.params)
        for model in spec.replies():
            attrs.resolve_types(model)
    assert render() == before
