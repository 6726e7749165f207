"""How every command prints: short human text, or stable JSON with ``--json``.

Success prints one JSON object (streams print one per line, flushed). Failure prints
``{"error": {"code", "message"}}`` and exits 1; usage errors exit 2 (CLI.md).

Human text is full of what peers wrote: their labels, messages, slices, facts, tasks, session
and room names. A terminal obeys control characters in it (a window title, a cleared screen, a
cursor moved up to overwrite who sent a line, an OSC 52 write to the clipboard), so every human
line and error sentence passes through :func:`visible` on its way out, which shows each control
character as its Python escape (``\\x1b`` for ESC): one convention, one place. JSON output needs
no such step: ``json.dumps`` already writes them as ``\\u001b``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from crosstalk.errors import CannotStart, CrosstalkError, UsageError

P = ParamSpec("P")
R = TypeVar("R")


def _unprintable() -> dict[int, str]:
    """Code point -> its escape, for everything a terminal may act on instead of showing."""
    codes = [
        *range(0x20), 0x7F, *range(0x80, 0xA0),  # C0, DEL, C1 (ESC, CSI, OSC, ST among them)
        0x2028, 0x2029,  # line and paragraph separators
        *range(0x202A, 0x202F), *range(0x2066, 0x206A),  # bidi embeddings, overrides, isolates
        *range(0xD800, 0xE000),  # lone surrogates: writing one to stdout raises
    ]
    return {
        code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
        for code in codes
        if chr(code) not in "\n\t"
    }


_UNPRINTABLE = _unprintable()
_ONE_LINE = {**_UNPRINTABLE, ord("\n"): "\\x0a", ord("\t"): "\\x09"}


def visible(text: str, *, one_line: bool = False) -> str:
    """``text`` as a terminal can only show it: control characters (C0 but newline and tab,
    DEL, C1), line separators, bidi controls and lone surrogates become their escapes, so ESC
    reads ``\\x1b``. Everything else is left as it is (a backslash too: this is for eyes, not
    a reversible encoding).

    ``one_line`` escapes newline and tab as well, for a peer's name inside a line we write (a
    sender, a session): a newline there would start a line that looks like ours.
    """
    return text.translate(_ONE_LINE if one_line else _UNPRINTABLE)


class Output:
    """Prints results for one command invocation, in human or JSON form; human text only
    through :func:`visible`."""

    def __init__(self, *, json_mode: bool) -> None:
        self.json_mode = json_mode

    def emit(self, data: Mapping[str, Any], human: str | None = None) -> None:
        """Print one result: ``data`` as a JSON line, or ``human`` as text."""
        if self.json_mode:
            sys.stdout.write(json.dumps(data, sort_keys=False) + "\n")
        elif human is not None:
            sys.stdout.write(visible(human.rstrip("\n")) + "\n")
        sys.stdout.flush()

    def report(self, error: CrosstalkError) -> int:
        """Print the error envelope (JSON) or the sentence (stderr); return the exit status,
        1 (2 for usage)."""
        if self.json_mode:
            sys.stdout.write(json.dumps({"error": error.to_dict()}) + "\n")
            sys.stdout.flush()
        else:
            sys.stderr.write(f"crosstalk: {visible(error.message)}\n")
        return 2 if error.code == UsageError.code else 1

    def fail(self, error: CrosstalkError) -> None:
        """Print the error envelope (JSON) or the sentence (stderr) and exit 1 (2 for usage)."""
        import typer  # only typer commands fail this way; the typer-free paths use report()

        raise typer.Exit(self.report(error))


def reports_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn a CrosstalkError raised by a command into the CLI error envelope.

    The wrapped command must take a ``json_output`` keyword argument (the ``--json`` flag).
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except CrosstalkError as exc:
            Output(json_mode=bool(kwargs.get("json_output"))).fail(exc)
            raise AssertionError("unreachable") from None
        except Exception as exc:
            error = startup_error(exc)
            if error is None:
                raise
            Output(json_mode=bool(kwargs.get("json_output"))).fail(error)
            raise AssertionError("unreachable") from None

    return wrapper


def run_reporting(command: Callable[[], None], *, json_mode: bool) -> int:
    """Run a command outside typer and return its exit status: 0, or that of the error it
    printed, exactly as :func:`reports_errors` would have exited."""
    try:
        command()
    except CrosstalkError as exc:
        return Output(json_mode=json_mode).report(exc)
    except Exception as exc:
        error = startup_error(exc)
        if error is None:
            raise
        return Output(json_mode=json_mode).report(error)
    return 0


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def startup_error(exc: Exception) -> CrosstalkError | None:
    """The one sentence for an error that escaped a command wrapped in task groups.

    A CrosstalkError inside an exception group (a relay or cluster node failing while it
    starts) is that error; an OS error (a port in use, a folder we may not write) becomes one
    sentence with the code ``cannot_start``. Anything else is a bug and stays a traceback.
    """
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, CrosstalkError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, OSError):
            where = f" ({leaf.filename})" if leaf.filename else ""
            return CannotStart(f"Could not start: {leaf.strerror or leaf}{where}.")
    return None
