"""``crosstalk install path``: put ``crosstalk`` on PATH as ``~/.local/bin/crosstalk``.

The link points at the installed console script, so upgrading the package needs no reinstall.
Where there is no such script (run as ``python -m crosstalk``), a two-line shell wrapper takes
its place, marked so that uninstall can tell it is ours. Anything else already at that name is
left alone: we refuse rather than replace someone else's file.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from crosstalk.errors import Refused
from crosstalk.install.base import Commands, Outcome, Places

CLIENT = "path"
WRAPPER_MARK = "# crosstalk wrapper written by `crosstalk install path`"


def _target(places: Places) -> Path:
    return places.bin_dir / "crosstalk"


def _is_ours(link: Path) -> bool:
    if link.is_symlink():
        return Path(os.readlink(link)).name == "crosstalk"
    if link.is_file():
        try:
            return WRAPPER_MARK in link.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    return False


def _on_path(folder: Path, environ_path: str) -> bool:
    return any(Path(p).expanduser() == folder for p in environ_path.split(os.pathsep) if p)


def install(places: Places, commands: Commands, environ_path: str) -> Outcome:
    link = _target(places)
    if (link.exists() or link.is_symlink()) and not _is_ours(link):
        raise Refused(f"{link} already exists and is not crosstalk's; remove it, then try again.")
    places.bin_dir.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    if len(commands.crosstalk) == 1:
        wanted = commands.crosstalk[0]
        if not (link.is_symlink() and os.readlink(link) == wanted):
            link.unlink(missing_ok=True)
            link.symlink_to(wanted)
            files.append(str(link))
    else:
        text = f"#!/bin/sh\n{WRAPPER_MARK}\nexec {shlex.join(commands.crosstalk)} \"$@\"\n"
        if link.is_symlink() or not link.is_file() or link.read_text(encoding="utf-8") != text:
            link.unlink(missing_ok=True)
            link.write_text(text, encoding="utf-8")
            link.chmod(0o755)
            files.append(str(link))
    if _on_path(places.bin_dir, environ_path):
        step = f"`crosstalk` now runs from {link}."
    else:
        step = (
            f"{places.bin_dir} is not on your PATH: add `export PATH=\"{places.bin_dir}:$PATH\"` "
            "to your shell's startup file (~/.profile, ~/.bashrc or ~/.zshrc), then open a new "
            "shell."
        )
    return Outcome(client=CLIENT, files=files, backups=[], next=step)


def uninstall(places: Places) -> Outcome:
    link = _target(places)
    files: list[str] = []
    if (link.exists() or link.is_symlink()) and _is_ours(link):
        link.unlink()
        files.append(str(link))
    return Outcome(client=CLIENT, files=files, backups=[], next="")
