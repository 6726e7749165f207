"""Tool profiles (crosstalk/mcp/profiles.py): which tools ``crosstalk server --tools`` serves, the
front end and the SDK answering alike for each, and what each costs in ``tools/list`` bytes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.errors import UsageError
from crosstalk.mcp.front import Front, Wire, listed_names, load_listing, tools_result
from crosstalk.mcp.listing import handshake, sdk_answers
from crosstalk.mcp.profiles import CORE, FULL, normalized, select
from crosstalk.mcp.tools import TOOLS

KNOWN = [spec.name for spec in TOOLS]
# The page's note that the regeneration keeps (tests/test_bench_notes.py: the page holds it).
PERFORMANCE = (Path(__file__).resolve().parents[2] / "docs" / "performance" / "notes"
               / "10-mcp-profiles.md")


def test_every_core_tool_is_a_tool_of_the_server() -> None:
    """CORE is an explicit list: each name exists, once."""
    assert set(CORE) <= set(KNOWN)
    assert len(set(CORE)) == len(CORE)


def test_full_serves_every_tool_including_ones_added_later() -> None:
    """``full`` is whatever the server has, not a list written down."""
    later = [*KNOWN, "crosstalk_later"]
    assert select(FULL, later) == tuple(later)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("core", [n for n in KNOWN if n in CORE]),
        ("read,send", ["crosstalk_send", "crosstalk_read"]),
        (" send , crosstalk_send,", ["crosstalk_send"]),
        ("core,crosstalk_ask", [n for n in KNOWN if n in CORE or n == "crosstalk_ask"]),
        ("core,full", KNOWN),
    ],
)
def test_a_spec_serves_the_union_of_its_items_in_server_order(
    spec: str, expected: list[str]
) -> None:
    """Profiles and names mix; short names work; the server's order wins over the spec's."""
    assert select(spec, KNOWN) == tuple(expected)


@pytest.mark.parametrize(
    ("spec", "bad"),
    [("nope", "'nope'"), ("core,crosstalk_teleport", "'crosstalk_teleport'"),
     ("Core", "'Core'"), ("", "--tools needs"), (" , ", "--tools needs")],
)
def test_an_unknown_item_is_a_usage_error_naming_it_and_the_valid_ones(
    spec: str, bad: str
) -> None:
    """The message names what was wrong and lists the profiles (and tools, when one was named)."""
    with pytest.raises(UsageError) as caught:
        select(spec, KNOWN)
    message = caught.value.message
    assert caught.value.code == "usage"
    assert bad in message and "core" in message and "full" in message
    if spec.strip(" ,"):
        assert all(name in message for name in KNOWN)


@pytest.mark.parametrize(
    ("spec", "written"),
    [("full", "full"), ("core", "core"), ("ask, core ,ask", "crosstalk_ask,core"),
     ("send,full", "full")],
)
def test_install_writes_a_spec_normalised(spec: str, written: str) -> None:
    """Tools by full name, each once; profiles by name; anything with full is full."""
    assert normalized(spec, KNOWN) == written


@pytest.fixture
def null_fd() -> Iterator[int]:
    fd = os.open(os.devnull, os.O_WRONLY)
    yield fd
    os.close(fd)


@pytest.mark.parametrize(
    "spec", ["full", "core", "send,read", "core,crosstalk_ask,crosstalk_reserve", "rooms"]
)
async def test_the_front_end_lists_each_profile_as_the_sdk_does(spec: str, null_fd: int) -> None:
    """The SDK serving only the profile's tools answers initialize and tools/list exactly as the
    front end does from the committed listing."""
    listing = load_listing()
    names = select(spec, listed_names(listing))
    lines = handshake(listing["latest"])
    sdk = await sdk_answers(lines, {}, 2, names)
    front = Front(listing, Wire(null_fd), {}, names)
    ours = [front.answer(line)[0] for line in lines]
    assert [json.loads(ours[0] or ""), json.loads(ours[2] or "")] == sdk
    assert [tool["name"] for tool in sdk[1]["result"]["tools"]] == list(names)


def _bytes(spec: str) -> int:
    listing = load_listing()
    result = tools_result(listing, select(spec, listed_names(listing)))
    return len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())


def test_core_costs_at_most_35_percent_of_full_and_the_page_says_so() -> None:
    """The tools/list result's bytes (as the front end writes them) per profile, and the same
    numbers on docs/performance.md."""
    core, full = _bytes("core"), _bytes("full")
    assert core <= 0.35 * full, (core, full)
    page = PERFORMANCE.read_text(encoding="utf-8")
    share = round(100 * core / full)
    for row in (f"| `full` | {len(KNOWN)} | {full:,} | 100 % |",
                f"| `core` | {len(CORE)} | {core:,} | {share} % |"):
        assert row in page, f"{PERFORMANCE} is stale; it should read: {row}"


def _server(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CROSSTALK_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "crosstalk", "server", *args], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def test_a_server_with_an_unknown_tool_exits_2_before_serving(tmp_path: Path) -> None:
    """Nothing on stdout (the MCP stream); the usage sentence on stderr."""
    with _server(tmp_path / "home", "--tools", "core,crosstalk_teleport") as proc:
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert out == ""
    assert "'crosstalk_teleport'" in err and "crosstalk_send" in err


def test_the_real_server_serves_its_profile_before_and_after_the_hand_over(
    tmp_path: Path,
) -> None:
    """``crosstalk server --tools core``: the front end lists core; a tool outside the profile
    is unknown to the SDK (a usage error, no daemon started); the SDK then lists core too."""
    init, initialized, tools = handshake("2025-11-25")
    call = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "crosstalk_ask", "arguments": {}}}) + "\n"
    again = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}) + "\n"
    home = tmp_path / "home"
    with _server(home, "--tools", "core") as proc:
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(init + initialized + tools + call)
            proc.stdin.flush()
            answers = {a["id"]: a for a in (json.loads(proc.stdout.readline()) for _ in range(3))}
            proc.stdin.write(again)  # after the call's answer: the SDK has taken over
            proc.stdin.flush()
            answers[4] = json.loads(proc.stdout.readline())
            proc.stdin.close()
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    core = [n for n in KNOWN if n in CORE]
    assert [t["name"] for t in answers[2]["result"]["tools"]] == core
    assert [t["name"] for t in answers[4]["result"]["tools"]] == core
    refused: dict[str, Any] = answers[3]["result"]
    assert refused["isError"] is True
    assert re.fullmatch(r"crosstalk error \[usage\]: .*'crosstalk_ask'.*", refused["content"][0][
        "text"])
    assert not (home / "daemon.lock").exists()  # no daemon was started
