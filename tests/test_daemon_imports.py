"""The daemon's start imports only what serving its ops needs: the libraries of rarer paths load
when those paths first run (pairing, dialling a relay)."""

from __future__ import annotations

import subprocess
import sys

#: Imported on first use, never by ``import crosstalk.daemon.tree``: pairing's SPAKE2 (with the
#: cryptography package behind it), and the WebSocket stack the relay link dials with.
LATER = {"spake2", "trio_websocket", "wsproto", "h11"}


def loaded_by(code: str) -> set[str]:
    """Top-level names of the modules a fresh interpreter has loaded after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}; import sys; print(' '.join(sys.modules))"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return {name.split(".")[0] for name in done.stdout.split()}


def test_importing_the_daemon_leaves_pairing_and_the_websocket_stack_unloaded() -> None:
    """``import crosstalk.daemon.tree`` (what a starting daemon imports behind its gate) loads none
    of the libraries that only pairing and dialling the relay use."""
    assert not loaded_by("import crosstalk.daemon.tree") & LATER


def test_the_check_sees_a_library_that_is_loaded() -> None:
    """The same check, run after importing those libraries, finds every one of them."""
    assert loaded_by("import crosstalk.daemon.tree, spake2, trio_websocket") >= LATER
