"""The entry point's fast paths take only the plain forms of `server` and `hook`."""

from __future__ import annotations

import pytest

from crosstalk.cli.entry import _server_home


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], (True, None)),
        (["--json"], (True, None)),
        (["--home", "/tmp/h"], (True, "/tmp/h")),
        (["--home=/tmp/h", "--json"], (True, "/tmp/h")),
        (["--help"], (False, None)),
        (["--home"], (False, None)),
        (["extra"], (False, None)),
    ],
)
def test_server_fast_path_accepts_only_home_and_json(
    args: list[str], expected: tuple[bool, str | None]
) -> None:
    """Anything but --home/--json goes to the full CLI (which prints help or a usage error)."""
    assert _server_home(args) == expected
