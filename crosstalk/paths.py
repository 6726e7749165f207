"""Where a crosstalk identity keeps its files.

Standard library only. The CLI, the daemon and the MCP server import it; the hook program does
not any more (it builds its few paths as strings, without pathlib or dataclasses, and a test keeps
its copy of :data:`HOME_ENV` equal: crosstalk/hook/main.py). One state directory
(``CROSSTALK_HOME``, default ``~/.crosstalk``) is one identity.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

HOME_ENV = "CROSSTALK_HOME"
HEARTBEAT_ENV = "CROSSTALK_HEARTBEAT"
RELAY_ENV = "CROSSTALK_RELAY"
DEFAULT_HEARTBEAT = 5.0
# sun_path is 108 bytes on Linux, including the terminating NUL.
MAX_SOCKET_PATH = 107


class Home:
    """The files of one state directory (a value: equal and hashed by ``root``, immutable).

    Written by hand, not as a dataclass: ``dataclasses`` imports ``inspect`` (and with it ast,
    dis and tokenize), a few milliseconds on the start of every CLI call that reads a path.
    """

    __slots__ = ("root",)
    root: Path

    def __init__(self, root: Path) -> None:
        object.__setattr__(self, "root", root)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Home is immutable; cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Home) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"Home(root={self.root!r})"

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> Home:
        """``--home`` wins, then ``CROSSTALK_HOME``, then ``~/.crosstalk``."""
        chosen = explicit or os.environ.get(HOME_ENV) or Path.home() / ".crosstalk"
        return cls(Path(chosen).expanduser().absolute())

    @property
    def socket(self) -> Path:
        return self.root / "daemon.sock"

    @property
    def lock(self) -> Path:
        return self.root / "daemon.lock"

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def database(self) -> Path:
        return self.root / "state.db"

    @property
    def identity(self) -> Path:
        return self.root / "identity.json"

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    def check_socket_path(self) -> None:
        """Refuse a home whose socket path is longer than a unix socket address allows."""
        length = len(os.fsencode(self.socket))
        if length > MAX_SOCKET_PATH:
            from crosstalk.errors import InvalidConfig

            raise InvalidConfig(
                f"The state directory {self.root} is too deep for a unix socket path "
                f"({length} bytes, limit {MAX_SOCKET_PATH}); choose a shorter CROSSTALK_HOME."
            )

    def ensure(self) -> None:
        """Create the directory 0700 (and tighten it if it exists looser)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.root.stat().st_mode & 0o077:
            self.root.chmod(0o700)


def positive_seconds(raw: str | None) -> float | None:
    """A positive, finite number of seconds from an environment variable's text, or None (unset,
    not a number, zero or less, infinite)."""
    try:
        value = float(raw or "nan")
    except ValueError:
        return None
    return value if 0 < value < math.inf else None  # NaN is neither


def heartbeat_from_env() -> float:
    """The actor heartbeat in seconds from ``CROSSTALK_HEARTBEAT`` (default 5)."""
    return positive_seconds(os.environ.get(HEARTBEAT_ENV)) or DEFAULT_HEARTBEAT


def relay_data_dir() -> Path:
    """Where a relay on this machine keeps its data unless told otherwise: per user,
    ``$XDG_DATA_HOME/crosstalk/relay`` (``~/.local/share/crosstalk/relay``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "crosstalk" / "relay"
