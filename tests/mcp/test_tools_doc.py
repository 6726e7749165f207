"""``docs/tools.md`` is generated from the MCP server's own tool list and must not go stale."""

from __future__ import annotations

from pathlib import Path

from crosstalk.mcp.listing import tools_doc
from crosstalk.mcp.tools import TOOLS

DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"


async def test_tools_doc_matches_the_servers_tool_list() -> None:
    """The committed file equals a fresh rendering; regenerate it when a tool changes."""
    expected = await tools_doc()
    assert DOC.read_text(encoding="utf-8") == expected, (
        "docs/tools.md is stale: run `python -m crosstalk.mcp.listing --write-docs docs/tools.md`"
    )


async def test_tools_doc_documents_every_tool_once() -> None:
    """Each tool has exactly one section, in the server's order."""
    text = await tools_doc()
    headings = [line[4:-1] for line in text.splitlines() if line.startswith("## `")]
    assert headings == [spec.name for spec in TOOLS]
