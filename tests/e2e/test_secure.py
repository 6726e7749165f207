"""`crosstalk secure`: the seeds move into the OS keyring, or nothing changes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.e2e.conftest import Person, pair, stop_pid, wait_for_messages


def test_without_a_keyring_secure_says_so_and_changes_nothing(people: list[Person]) -> None:
    """No keyring backend: no_keyring, one sentence, identity.json byte-identical."""
    ana, ben, _ = people
    pair(ana, ben)
    before = (ana.home / "identity.json").read_bytes()
    error = ana.json(
        "secure", expect=1, env={"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    )["error"]
    assert error["code"] == "no_keyring" and "Nothing was changed" in error["message"]
    assert (ana.home / "identity.json").read_bytes() == before


def test_secure_moves_the_seeds_and_the_identity_still_works(
    short_tmp: Path, relay_url: str
) -> None:
    """With a keyring, identity.json loses its seeds, and a restarted daemon still talks."""
    env = {
        "PYTHON_KEYRING_BACKEND": "tests.e2e.file_keyring.FileKeyring",
        "CT_TEST_KEYRING": str(short_tmp / "keyring.json"),
    }

    class KeyringPerson(Person):
        def run(self, *args: str, **kw):  # type: ignore[no-untyped-def,override]
            return super().run(*args, env={**env, **(kw.pop("env", None) or {})}, **kw)

    ana = KeyringPerson(short_tmp / "ana", relay_url)
    ben = Person(short_tmp / "ben", relay_url)
    try:
        os.environ.update(env)  # the daemon that `pair` starts inherits it
        pair(ana, ben)
        fingerprint = ana.json("status")["fingerprint"]
        assert ana.json("secure") == {"storage": "keyring"}
        stored = json.loads((ana.home / "identity.json").read_text())
        assert "signing_seed" not in stored and "box_secret" not in stored
        assert stored["storage"] == "keyring"
        assert (short_tmp / "keyring.json").exists()
        ana.json("daemon", "stop")
        assert ana.json("status")["fingerprint"] == fingerprint
        ana.json("send", "ben", "still me")
        assert wait_for_messages(ben, 1)[0]["from"] == "ana"
    finally:
        for key in env:
            os.environ.pop(key, None)
        for person in (ana, ben):
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
