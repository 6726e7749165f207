"""`crosstalk backup FILE` and `crosstalk restore FILE`: parse, ask for the passphrase, call one
function of :mod:`crosstalk.backup` (imported when the command runs: it pulls in nacl and
sqlite3, which no other command's start-up should pay for).

The passphrase comes from ``CROSSTALK_PASSPHRASE`` (for scripts and tests) or from a prompt on
the terminal that does not echo (``getpass``); ``backup`` asks twice. An empty one is refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import Output, reports_errors
from crosstalk.errors import BadPassphrase
from crosstalk.paths import Home

PASSPHRASE_ENV = "CROSSTALK_PASSPHRASE"

FileArgument = Annotated[Path, typer.Argument(help="The backup file.")]


def passphrase(*, confirm: bool) -> str:
    """The passphrase from ``CROSSTALK_PASSPHRASE``, else typed (twice with ``confirm``)."""
    given = os.environ.get(PASSPHRASE_ENV)
    if given is None:
        import getpass

        given = getpass.getpass("Backup passphrase: ")
        if confirm and given and getpass.getpass("The same passphrase again: ") != given:
            raise BadPassphrase("The two passphrases differ; nothing was written.")
    if not given:
        raise BadPassphrase(
            f"An empty passphrase protects nothing; type one, or set {PASSPHRASE_ENV}."
        )
    return given


@reports_errors
def backup(file: FileArgument, json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Write this identity, its state and settings into FILE, encrypted under a passphrase."""
    from crosstalk.backup.take import take_backup

    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    taken = take_backup(h, file.expanduser().absolute(), passphrase(confirm=True))
    out.emit(
        {"file": taken.file, "bytes": taken.bytes},
        f"Backed up {h.root} to {taken.file} ({taken.bytes} bytes). Keep the passphrase: "
        "without it the file cannot be opened.",
    )


@reports_errors
def restore(file: FileArgument, json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Restore a backup into a home with no identity (the default home, or --home)."""
    from crosstalk.backup.restore import refuse_live, restore_backup

    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    refuse_live(h)  # before the prompt: say at once that this home cannot take it
    restored = restore_backup(file.expanduser().absolute(), h, passphrase(confirm=False))
    out.emit(
        {
            "label": restored.label,
            "fingerprint": restored.fingerprint,
            "storage": restored.storage,
        },
        f"Restored {restored.label} ({restored.fingerprint}) into {h.root}; the keys are in "
        f"{'the OS keyring' if restored.storage == 'keyring' else 'identity.json'}. "
        "The daemon picks up where the backup left off when it next starts.",
    )
