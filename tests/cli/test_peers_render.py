"""Human `crosstalk peers`: each peer with their fingerprint, so a person can compare it."""

from __future__ import annotations

from typing import Any

from crosstalk.cli.cmd_messages import peers_text


def _peer(label: str, fingerprint: str, **fields: Any) -> dict[str, Any]:
    return {"label": label, "fingerprint": fingerprint, "online": True, "machine": None,
            "level": "notify", "muted": False, "agent": False, "unread": 0, "sessions": [],
            **fields}


def test_every_peer_line_shows_their_fingerprint() -> None:
    """Not only your own fingerprint: each peer's, on their line."""
    reply = {
        "me": {"label": "ana", "fingerprint": "AAAA-1111", "sessions": []},
        "peers": [_peer("ben", "BBBB-2222"), _peer("cy", "CCCC-3333", online=False)],
    }
    lines = peers_text(reply).split("\n")
    assert lines[0] == "you: ana (AAAA-1111)"
    assert "BBBB-2222" in lines[1] and lines[1].lstrip().startswith("ben ")
    assert "CCCC-3333" in lines[2] and "offline" in lines[2]
