"""docs/errors.md lists every stable error code crosstalk can print.

The codes come from three places: ``code = "…"`` on a ``CrosstalkError`` subclass (in
``crosstalk/errors.py`` and anywhere else under ``crosstalk/``), ``code="…"`` passed when an error
is raised, and the relay's error frames (``crosstalk.wire.relay.ERROR_CODES``), whose codes the
client passes on unchanged (``crosstalk.core.link.relay_error``).
"""

from __future__ import annotations

import re
from pathlib import Path

from crosstalk import errors
from crosstalk.wire.relay import ERROR_CODES

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "errors.md"
CLASS_CODE = re.compile(r'^\s+code(?:\s*:\s*str)?\s*=\s*"([a-z_]+)"\s*$', re.MULTILINE)
RAISED_CODE = re.compile(r'\b(?:code|hint)="([a-z_]+)"')
DOC_ROW = re.compile(r"^\| `([a-z_]+)` \|", re.MULTILINE)


def codes_in_source() -> set[str]:
    """Every literal error code under crosstalk/."""
    found: set[str] = set()
    for path in (ROOT / "crosstalk").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        found.update(CLASS_CODE.findall(text))
        found.update(RAISED_CODE.findall(text))
    return found


def documented_codes() -> list[str]:
    return DOC_ROW.findall(DOC.read_text(encoding="utf-8"))


def test_the_scan_sees_the_error_classes() -> None:
    """The source scan finds every code the CrosstalkError tree defines (so it can fail)."""
    classes = {
        cls.code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.CrosstalkError)
    }
    assert {"not_set_up", "storage_full", "internal"} <= classes
    assert classes <= codes_in_source()


def test_every_code_crosstalk_can_print_is_documented() -> None:
    """A code raised under crosstalk/ or sent by the relay and missing from docs/errors.md fails."""
    wanted = codes_in_source() | set(ERROR_CODES)
    missing = sorted(wanted - set(documented_codes()))
    assert not missing, f"add these codes to docs/errors.md: {missing}"


def test_each_code_is_documented_once_and_exists() -> None:
    """No code appears twice in docs/errors.md, and none is listed that nothing can raise."""
    listed = documented_codes()
    assert len(listed) == len(set(listed))
    stale = sorted(set(listed) - codes_in_source() - set(ERROR_CODES))
    assert not stale, f"docs/errors.md lists codes nothing raises: {stale}"


def test_each_documented_code_names_a_command_that_prints_it() -> None:
    """Every row of docs/errors.md says, where it says what happened, which command prints it
    (a `crosstalk …` in backticks, or "every command")."""
    text = DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_]+)` \| (.*?) \| ", text, re.MULTILINE)
    assert len(rows) == len(documented_codes())
    silent = [
        code for code, what in rows if "`crosstalk " not in what and "every command" not in what
    ]
    assert not silent, f"say which command prints these in docs/errors.md: {silent}"


def test_every_code_a_command_printed_in_the_walk_is_documented() -> None:
    """The bad-input walk (tests/cli/test_error_walk.py) expects only documented codes, so a
    code a command prints and this page lacks fails there (its assert_clean_error checks each
    printed code against this page)."""
    from tests.cli.test_error_walk import BAD_INPUTS, NO_IDENTITY

    expected = {code for _, code in BAD_INPUTS} | {
        code for code in NO_IDENTITY.values() if isinstance(code, str)
    }
    assert expected <= set(documented_codes())
