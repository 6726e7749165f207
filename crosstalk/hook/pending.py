"""Edit warnings kept for a session's next text-carrying event, in the hook's state directory.

Theory of operation
-------------------
Before an edit the daemon may warn (``edit_warning``). Claude Code and Codex show a warning to
the model in the pre-tool answer itself; most clients have no such channel, or show it only to
the person (``Dialect.before_tool_reaches_model``). There the hook program keeps the text here,
and the session's next event that carries text (the tool's own post-tool event, or the next
prompt) shows it, after the working set and before the notices.

One file per session under :data:`PENDING_DIR` (named like the working-set claims: the session id
in hex, hashed when long), one JSON string per line. :func:`keep` appends with ``O_APPEND``: a
short line is written whole, so hooks of one session running at once cannot interleave inside a
line. :func:`take` renames the file to a name of its own before reading it, so exactly one
event takes each warning; :func:`settle` then deletes what it took once the answer was written,
or gives it back when it was not (the next event shows it instead). A warning already waiting
is not kept twice, and the file stops growing at :data:`PENDING_LIMIT` characters: a warning is
a nudge, not a log.

Nothing here raises: a state directory that cannot be written loses the warning (stderr is not
the client's, and the edit itself must never be held up by crosstalk).
"""

from __future__ import annotations

import json
import os

from crosstalk.hook.flow import claim_path

#: Where the waiting warnings live, under the state directory.
PENDING_DIR = "hook-warnings"
#: Most characters of warnings waiting for one session.
PENDING_LIMIT = 8000


def pending_path(state_dir: str | os.PathLike[str], session: str) -> str:
    """The file holding ``session``'s waiting warnings."""
    name = os.path.basename(claim_path(state_dir, session))
    return os.path.join(state_dir, PENDING_DIR, name)


def _read(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    texts: list[str] = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue  # a line cut by a full disk: skip it, keep the rest
        if isinstance(value, str) and value and value not in texts:
            texts.append(value)
    return texts


def keep(state_dir: str | os.PathLike[str], session: str, text: str) -> bool:
    """Add ``text`` to the session's waiting warnings; False if it was not kept."""
    path = pending_path(state_dir, session)
    waiting = _read(path)
    if not text or text in waiting or sum(map(len, waiting)) + len(text) > PENDING_LIMIT:
        return False
    line = (json.dumps(text) + "\n").encode("utf-8", "surrogatepass")
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        return False
    try:
        os.write(fd, line)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


class Taken:
    """Warnings one event took: their text, and the file they are in until :func:`settle`."""

    __slots__ = ("path", "texts")

    def __init__(self, texts: list[str], path: str | None) -> None:
        self.texts = texts
        self.path = path

    @property
    def text(self) -> str:
        return "\n\n".join(self.texts)


def take(state_dir: str | os.PathLike[str], session: str) -> Taken:
    """Take every warning waiting for ``session`` (no other event can take them now)."""
    path = pending_path(state_dir, session)
    mine = f"{path}.taken-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        os.rename(path, mine)
    except OSError:
        return Taken([], None)  # none waiting (or another event took them first)
    return Taken(_read(mine), mine)


def settle(state_dir: str | os.PathLike[str], session: str, taken: Taken, shown: bool) -> None:
    """Forget what was shown; give back what was not, for the session's next event."""
    if taken.path is None:
        return
    if not shown:
        for text in taken.texts:
            keep(state_dir, session, text)
    try:
        os.unlink(taken.path)
    except OSError:
        pass  # already gone: nothing left to forget
