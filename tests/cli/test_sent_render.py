"""The human ``sent`` line: the start of the text, escaped and on one line; ``--since``."""

from __future__ import annotations

import pytest

from crosstalk.cli.cmd_messages import SENT_TEXT, _sent_line, parse_since
from crosstalk.errors import UsageError


def _row(text: str, **extra: object) -> dict[str, object]:
    return {"id": "0123456789abcdef", "to": "ben", "kind": "handoff", "state": "refused",
            "text": text, **extra}


def test_a_line_shows_the_start_of_the_text_cut_and_escaped() -> None:
    """A long text is cut at SENT_TEXT with an ellipsis; a newline or ESC in it cannot start
    a line of its own or reach the terminal."""
    line = _sent_line(_row("first\nsecond \x1b[31m" + "y" * 100, reason="ben refused it"))
    assert "\n" not in line and "\x1b" not in line
    assert "first\\x0asecond \\x1b[31m" in line and line.count("y") < SENT_TEXT
    assert "…" in line and line.endswith("(ben refused it)")
    assert line.startswith("  refused   ben              handoff  01234567  ")


def test_a_short_text_is_shown_whole() -> None:
    """No ellipsis when nothing was cut."""
    assert _sent_line(_row("hi")).endswith("01234567  hi")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("30m", 1800.0), ("2h", 7200.0), ("7d", 604800.0), ("1.5", 129600.0)],
)
def test_since_reads_a_duration(text: str, seconds: float) -> None:
    """A unit of s, m, h or d; a bare number is days."""
    assert parse_since(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-1h", "inf", "nan", "1e308d", "h"])
def test_since_refuses_anything_else_as_a_usage_error(text: str) -> None:
    """One sentence, code usage (exit 2)."""
    with pytest.raises(UsageError):
        parse_since(text)
