"""The marker parser behind the runnable-examples test finds blocks, and refuses stray markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.markdown import MarkerError, shell_blocks


def _page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_marked_unmarked_and_explained_blocks_are_told_apart(tmp_path: Path) -> None:
    """Each block's text, line and marker come back in order."""
    page = _page(
        tmp_path,
        "# t\n\n<!-- runnable -->\n```sh\ncrosstalk doctor\n```\n\n"
        "<!-- not runnable: needs cloudflared -->\n```sh\ncrosstalk room new --public\n```\n\n"
        "```sh\necho plain\n```\n\n```python\nprint('not shell')\n```\n",
    )
    blocks = shell_blocks(page)
    assert [(b.line, b.text, b.runnable, b.why_not) for b in blocks] == [
        (4, "crosstalk doctor\n", True, None),
        (9, "crosstalk room new --public\n", False, "needs cloudflared"),
        (13, "echo plain\n", False, None),
    ]


def test_a_marker_not_right_above_a_shell_block_is_an_error(tmp_path: Path) -> None:
    """A marker separated from its block by a blank line would silently skip it: refuse."""
    page = _page(tmp_path, "<!-- runnable -->\n\n```sh\nls\n```\n")
    with pytest.raises(MarkerError, match=r"page\.md:1"):
        shell_blocks(page)
