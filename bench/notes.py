"""Hand-measured notes the generated page keeps when it is written again.

Some figures cannot come from one run of ``python -m bench``: interleaved A/B runs of two trees,
profiles taken by hand, the simulation's seed runs. Each lives in ``docs/performance/notes/`` as
a markdown file whose first line says where it goes::

    <!-- after: One message, stage by stage -->

and the renderer puts its text at the end of the section whose ``## `` heading starts with that
title. A note that is a section of its own starts (after that line) with its ``## `` heading; a
note whose section is missing from this run goes before "Not measured yet", so nothing written by
hand is ever dropped by a regeneration. Each note says when and how it was measured. The page is
never edited: tests/test_bench_notes.py checks it is exactly what its results and notes render.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

NOTES = Path(__file__).resolve().parents[1] / "docs" / "performance" / "notes"
_PLACE = re.compile(r"<!--\s*after:\s*(.+?)\s*-->")
LAST = "## Not measured yet"


@attrs.frozen
class Note:
    after: str  # the title a ``## `` heading starts with
    text: str


def read_notes(folder: Path = NOTES) -> list[Note]:
    """Every note in ``folder``, in file-name order; a file without its placing line is an
    error (it would otherwise vanish from the page)."""
    notes = []
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        first, _, rest = path.read_text().partition("\n")
        found = _PLACE.fullmatch(first.strip())
        if found is None:
            raise ValueError(f"{path}: the first line must be '<!-- after: SECTION TITLE -->'")
        notes.append(Note(found.group(1), rest.strip("\n")))
    return notes


def place_notes(sections: list[str], notes: list[Note]) -> list[str]:
    """``sections`` (each starting with its ``## `` heading) with every note appended to the
    section it names; a note whose section is absent goes just before the last section."""
    out = list(sections)
    for note in notes:
        at = next((i for i, s in enumerate(out) if s.startswith("## " + note.after)), None)
        if at is None:
            at = next((i - 1 for i, s in enumerate(out) if s.startswith(LAST)), len(out) - 1)
        out[at] = out[at].rstrip("\n") + "\n\n" + note.text + "\n"
    return out
