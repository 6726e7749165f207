"""The performance page keeps what was measured by hand when written again (bench/notes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.notes import Note, place_notes, read_notes

PAGE = ["# Performance\n\nintro\n", "## Goals\n\n| a |\n", "## Side by side: one\n\ntable\n",
        "## Not measured yet\n\nNothing.\n"]


def test_a_note_goes_at_the_end_of_the_section_it_names() -> None:
    out = place_notes(PAGE, [Note("Side by side", "An A/B by hand.")])
    assert out[2] == "## Side by side: one\n\ntable\n\nAn A/B by hand.\n"
    assert out[:2] == PAGE[:2] and out[3] == PAGE[3]


def test_a_note_whose_section_did_not_run_is_kept_before_the_last_section() -> None:
    out = place_notes(PAGE, [Note("Simulation", "## Simulation (`tests/sim`)\n\nseeds")])
    assert out[2].endswith("table\n\n## Simulation (`tests/sim`)\n\nseeds\n")
    assert out[3] == PAGE[3]


def test_notes_keep_their_order(tmp_path: Path) -> None:
    (tmp_path / "20-b.md").write_text("<!-- after: Goals -->\nsecond\n")
    (tmp_path / "10-a.md").write_text("<!-- after: Goals -->\n\nfirst\n")
    out = place_notes(PAGE, read_notes(tmp_path))
    assert out[1] == "## Goals\n\n| a |\n\nfirst\n\nsecond\n"


def test_a_note_that_does_not_say_where_it_goes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("## Somewhere\n\ntext\n")
    with pytest.raises(ValueError, match="first line"):
        read_notes(tmp_path)


def test_no_notes_folder_means_no_notes(tmp_path: Path) -> None:
    assert read_notes(tmp_path / "absent") == []


PERFORMANCE = Path(__file__).resolve().parents[1] / "docs" / "performance.md"


def test_every_note_is_on_the_page_in_the_section_it_names() -> None:
    """The page as committed holds each note whole, under a heading it names, so the next
    regeneration keeps what the page says now (text written into the page alone is lost)."""
    page = PERFORMANCE.read_text()
    headings = [line[3:] for line in page.splitlines() if line.startswith("## ")]
    notes = read_notes()
    assert notes, "docs/performance/notes/ holds the hand-measured notes"
    for note in notes:
        assert any(h.startswith(note.after) for h in headings), note.after
        assert note.text in page, f"the page lacks the note placed after {note.after!r}"


def test_the_page_is_what_its_results_and_notes_render(tmp_path: Path) -> None:
    """docs/performance.md is written, never edited: what python -m bench measured
    (docs/performance/results.json) and the notes, rendered. A passage written into the page
    alone fails here (it would be gone at the next regeneration): put it in a note."""
    import json

    from bench import report

    results = json.loads((PERFORMANCE.parent / "performance" / "results.json").read_text())
    assert report.render(results, tmp_path) == PERFORMANCE.read_text(), (
        "docs/performance.md differs from its render: after changing a note, run "
        "python -m bench --from-results docs/performance/results.json")
