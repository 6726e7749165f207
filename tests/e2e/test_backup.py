"""`crosstalk backup` and `crosstalk restore` through the real CLI: backup, wipe, restore and
carry on with two real daemons on a real relay; keys back where they lived; clean refusals."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from crosstalk.store.identity import new_identity, save_identity
from tests.e2e.conftest import Cli, Person, pair, stop_pid, wait_for_messages, wait_until

pytestmark = pytest.mark.e2e

PASS = {"CROSSTALK_PASSPHRASE": "several words nobody would guess"}


def facts_of(person: Person) -> set[str]:
    return {fact["text"] for fact in person.json("facts")["facts"]}


def test_backup_wipe_restore_and_carry_on(people: list[Person]) -> None:
    """Ana backs up with her daemon running; her home is wiped; ben sends her a message and
    adds a fact meanwhile; ana restores into the same path and starts: the message arrives,
    both facts are there, ben still sees her fingerprint, and her next message reaches him."""
    ana, ben, _ = people
    pair(ana, ben)
    ana.json("facts", "add", "the api is frozen until friday")
    wait_until(lambda: "the api is frozen until friday" in facts_of(ben), timeout=30,
               what="ana's fact at ben's")
    fingerprint = ana.json("status")["fingerprint"]

    backup = ana.home.parent / "ana.backup"
    taken = ana.json("backup", str(backup), env=PASS)
    assert taken == {"file": str(backup), "bytes": backup.stat().st_size}
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600

    pid = ana.daemon_pid()
    assert pid is not None
    stop_pid(pid)
    shutil.rmtree(ana.home)
    sent = ben.json("send", "ana", "sent while your disk was gone")
    ben.json("facts", "add", "staging moved to eu-west")
    wait_until(lambda: "staging moved to eu-west" in facts_of(ben), timeout=30,
               what="ben's own fact")

    restored = ana.json("restore", str(backup), env=PASS)
    assert restored == {"label": "ana", "fingerprint": fingerprint, "storage": "file"}
    assert ana.json("daemon", "start")["running"] is True

    (message,) = wait_for_messages(ana, 1)
    assert (message["id"], message["from"]) == (sent["id"], "ben")
    assert message["text"] == "sent while your disk was gone"
    wait_until(
        lambda: facts_of(ana) == {"the api is frozen until friday", "staging moved to eu-west"},
        timeout=30, what="both facts at ana's",
    )
    (seen,) = [p for p in ben.json("peers")["peers"] if p["label"] == "ana"]
    assert seen["fingerprint"] == fingerprint
    ana.json("send", "ben", "back, same keys")
    assert [m["text"] for m in wait_for_messages(ben, 1)] == ["back, same keys"]


def keyring_env(path: Path) -> dict[str, str]:
    return {
        "PYTHON_KEYRING_BACKEND": "tests.e2e.file_keyring.FileKeyring",
        "CT_TEST_KEYRING": str(path),
    }


NO_KEYRING = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


def identity_file(cli: Cli) -> dict[str, Any]:
    return dict(json.loads((cli.home / "identity.json").read_text()))


def test_keys_from_the_keyring_go_back_to_a_keyring_or_else_to_the_file(
    short_tmp: Path, cli: Cli
) -> None:
    """Keys kept in the keyring (after `secure`) are backed up from it; restored where a
    keyring works they go into it, and where none does into identity.json, 0600."""
    first = keyring_env(short_tmp / "keyring.json")
    cli.home.mkdir(mode=0o700)
    save_identity(cli.home / "identity.json", new_identity("ana"))
    cli.json("daemon", "start", env=first)
    assert cli.json("secure", env=first) == {"storage": "keyring"}
    fingerprint = cli.json("status", env=first)["fingerprint"]
    backup = short_tmp / "ana.backup"
    cli.json("backup", str(backup), env={**first, **PASS})
    assert b"signing_seed" not in backup.read_bytes()

    with_keyring = Cli(short_tmp / "with")
    second = keyring_env(short_tmp / "second-keyring.json")
    restored = with_keyring.json("restore", str(backup), env={**second, **PASS})
    assert restored == {"label": "ana", "fingerprint": fingerprint, "storage": "keyring"}
    stored = identity_file(with_keyring)
    assert stored["storage"] == "keyring" and "signing_seed" not in stored
    assert len(json.loads((short_tmp / "second-keyring.json").read_text())) == 2
    assert with_keyring.json("status", env=second)["fingerprint"] == fingerprint

    without = Cli(short_tmp / "without")
    restored = without.json("restore", str(backup), env={**NO_KEYRING, **PASS})
    assert restored["storage"] == "file" and restored["fingerprint"] == fingerprint
    stored = identity_file(without)
    assert "storage" not in stored and len(stored["signing_seed"]) == 44
    assert stat.S_IMODE((without.home / "identity.json").stat().st_mode) == 0o600
    assert without.json("status", env=NO_KEYRING)["fingerprint"] == fingerprint


def test_refusals_are_one_code_each_and_write_nothing(short_tmp: Path, cli: Cli) -> None:
    """No identity: not_set_up; an empty passphrase: bad_passphrase; a wrong one:
    bad_passphrase; a home with an identity: already_set_up; a file that is not a backup:
    damaged_backup. None of them writes a file."""
    cli.home.mkdir(mode=0o700)
    backup = short_tmp / "ana.backup"
    assert cli.json("backup", str(backup), env=PASS, expect=1)["error"]["code"] == "not_set_up"
    save_identity(cli.home / "identity.json", new_identity("ana"))
    empty = cli.json("backup", str(backup), env={"CROSSTALK_PASSPHRASE": ""}, expect=1)
    assert empty["error"]["code"] == "bad_passphrase"
    assert not backup.exists()
    cli.json("backup", str(backup), env=PASS)

    before = sorted(p.name for p in short_tmp.iterdir())
    other = Cli(short_tmp / "other")
    wrong = other.json("restore", str(backup), env={"CROSSTALK_PASSPHRASE": "nope"}, expect=1)
    assert wrong["error"]["code"] == "bad_passphrase"
    (short_tmp / "not-a-backup").write_text("hello\n")
    before.append("not-a-backup")
    damaged = other.json("restore", str(short_tmp / "not-a-backup"), env=PASS, expect=1)
    assert damaged["error"]["code"] == "damaged_backup"
    assert sorted(p.name for p in short_tmp.iterdir()) == sorted(before)

    identity = (cli.home / "identity.json").read_bytes()
    live = cli.json("restore", str(backup), env=PASS, expect=1)["error"]
    assert live["code"] == "already_set_up" and str(cli.home) in live["message"]
    assert (cli.home / "identity.json").read_bytes() == identity
