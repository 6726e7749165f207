"""Find the shell examples in our Markdown files, and which of them a test should run.

The marker is an HTML comment on the line before a fenced ``sh`` block, so it renders as
nothing on GitHub:

    <!-- runnable -->
    ```sh
    crosstalk doctor
    ```

A block that cannot run here says why, the same way: ``<!-- not runnable: needs cloudflared -->``.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = re.compile(r"^<!--\s*runnable\s*-->\s*$")
NOT_RUNNABLE = re.compile(r"^<!--\s*not runnable:\s*(?P<why>\S.*?)\s*-->\s*$")
SHELL_FENCE = re.compile(r"^```(sh|bash|shell)\s*$")
FENCE_END = re.compile(r"^```\s*$")


@attrs.frozen
class Block:
    """One fenced shell block: where it is, its text, and what the line before it says."""

    path: Path
    line: int  # 1-based line of the opening fence
    text: str
    runnable: bool
    why_not: str | None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


class MarkerError(Exception):
    """A marker that is not followed by a shell block (a typo would silently skip a test)."""


def shell_blocks(path: Path) -> list[Block]:
    """Every fenced shell block in ``path``, in order.

    Raises:
        MarkerError: a marker line not directly followed by a fenced shell block.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        marker = lines[i].strip()
        is_marker = RUNNABLE.match(marker) or NOT_RUNNABLE.match(marker)
        if is_marker and not (i + 1 < len(lines) and SHELL_FENCE.match(lines[i + 1])):
            raise MarkerError(f"{path.name}:{i + 1}: a marker must sit right above a ```sh block")
        if SHELL_FENCE.match(lines[i]):
            end = i + 1
            while end < len(lines) and not FENCE_END.match(lines[end]):
                end += 1
            before = lines[i - 1].strip() if i > 0 else ""
            why = NOT_RUNNABLE.match(before)
            blocks.append(
                Block(
                    path=path,
                    line=i + 1,
                    text="\n".join(lines[i + 1 : end]) + "\n",
                    runnable=bool(RUNNABLE.match(before)),
                    why_not=why.group("why") if why else None,
                )
            )
            i = end
        i += 1
    return blocks


def doc_files() -> list[Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
