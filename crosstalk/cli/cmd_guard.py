"""`crosstalk guard install` / `uninstall` / `check`: the commit guard (a git pre-commit hook).

The hook refuses a commit that touches paths someone else holds exclusively reserved, and lets
``CROSSTALK_GUARD=off git commit …`` through once. The git side and the decision live in
:mod:`crosstalk.cli.guard_check` and :mod:`crosstalk.core.guard`; the hook file in
:mod:`crosstalk.install.git_hook`. All are imported when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import Output, reports_errors, visible
from crosstalk.errors import Reserved

app = typer.Typer(help="A git pre-commit hook that respects reservations.")

OVERRIDE = "CROSSTALK_GUARD=off git commit …"


@app.command("install")
@reports_errors
def install(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Add the guard to this repository's pre-commit hook (an existing hook still runs first)."""
    from crosstalk.cli.guard_check import hooks_dir
    from crosstalk.install.base import resolve_commands
    from crosstalk.install.git_hook import install as install_hook
    from crosstalk.paths import Home

    done = install_hook(
        hooks_dir(Path.cwd()), resolve_commands().crosstalk, Home.resolve(home).root
    )
    if done.already:
        human = f"The crosstalk commit guard is already installed: {done.hook}"
    else:
        human = f"Installed the crosstalk commit guard: {done.hook}"
    if done.chained is not None:
        human += f"\nIt runs the hook that was there first, kept as {done.chained}."
    human += f"\nTo commit once without it: {OVERRIDE}"
    data = {
        "hook": str(done.hook),
        "chained": None if done.chained is None else str(done.chained),
        "already": done.already,
    }
    Output(json_mode=json_output).emit(data, human)


@app.command("uninstall")
@reports_errors
def uninstall(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Take the guard out, putting back the pre-commit hook that was there, byte for byte."""
    from crosstalk.cli.guard_check import hooks_dir
    from crosstalk.install.git_hook import uninstall as uninstall_hook

    done = uninstall_hook(hooks_dir(Path.cwd()))
    if not done.removed:
        human = f"The crosstalk commit guard is not installed in {done.hook}; nothing changed."
    elif done.restored:
        human = f"Removed the crosstalk commit guard; {done.hook} is the hook it replaced again."
    else:
        human = f"Removed the crosstalk commit guard: {done.hook}"
    data = {"hook": str(done.hook), "removed": done.removed, "restored": done.restored}
    Output(json_mode=json_output).emit(data, human)


@app.command("check")
@reports_errors
def check(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """What the hook runs: refuse (exit 1) if the staged paths touch someone else's reservation.

    Prints nothing when the commit may go ahead; a warning when the daemon could not be asked.
    """
    from crosstalk.cli.guard_check import check as run_check
    from crosstalk.core.guard import Outcome

    verdict = run_check(home, Path.cwd(), dict(os.environ))
    if verdict.outcome is Outcome.REFUSED:
        raise Reserved(verdict.message)
    if json_output:
        data = {"outcome": verdict.outcome.value, "message": verdict.message}
        Output(json_mode=True).emit(data)
    elif verdict.message:
        sys.stderr.write(visible(verdict.message) + "\n")
