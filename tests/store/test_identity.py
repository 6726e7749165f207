"""The identity file: round trip, 0600, hidden secrets, damaged files left alone."""

from __future__ import annotations

import base64
import json
import re
import stat
import tempfile
from pathlib import Path

import nacl.public
import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.errors import DamagedState, LocalProtocolError
from crosstalk.store.identity import IdentityRecord, load_identity, save_identity
from tests.store.helpers import FileSnapshot

SEED = bytes(range(32))
BOX = bytes(range(100, 132))


def make_record(**changes: object) -> IdentityRecord:
    fields: dict[str, object] = {
        "label": "alice",
        "machine": "laptop",
        "signing_seed": SEED,
        "box_secret": BOX,
        "created_at": 1_790_000_000.25,
    }
    fields.update(changes)
    return IdentityRecord(**fields)  # type: ignore[arg-type]  # test builder over known fields


def test_identity_round_trips_through_the_file(tmp_path: Path) -> None:
    """What save_identity writes, load_identity reads back equal."""
    path = tmp_path / "identity.json"
    record = make_record()
    save_identity(path, record)
    assert load_identity(path) == record


def test_identity_file_is_0600_json_with_base64_keys(tmp_path: Path) -> None:
    """The file is mode 0600 and carries the seeds as standard base64 strings."""
    path = tmp_path / "identity.json"
    save_identity(path, make_record())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert base64.b64decode(data["signing_seed"]) == SEED
    assert base64.b64decode(data["box_secret"]) == BOX
    assert data["label"] == "alice"


def test_missing_identity_loads_as_none(tmp_path: Path) -> None:
    """No identity file means no identity yet (None), not an error."""
    assert load_identity(tmp_path / "identity.json") is None


def test_repr_hides_the_secret_seeds() -> None:
    """repr shows label and machine but neither secret, in any encoding."""
    record = make_record()
    text = repr(record)
    assert "alice" in text and "laptop" in text
    for secret in (SEED, BOX):
        assert repr(secret) not in text
        assert base64.b64encode(secret).decode() not in text
        assert secret.hex() not in text
    assert "signing_seed" not in text and "box_secret" not in text


def test_public_keys_derive_from_the_seeds() -> None:
    """ed25519_public and x25519_public are the public halves of the stored secrets."""
    record = make_record()
    assert record.ed25519_public == bytes(nacl.signing.SigningKey(SEED).verify_key)
    assert record.x25519_public == bytes(nacl.public.PrivateKey(BOX).public_key)


def test_record_refuses_secrets_of_the_wrong_size() -> None:
    """A seed that is not 32 bytes cannot make a record."""
    with pytest.raises(ValueError, match="signing_seed must be 32 bytes"):
        make_record(signing_seed=b"short")


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


GOOD = {
    "label": "alice",
    "machine": "laptop",
    "signing_seed": _b64(SEED),
    "box_secret": _b64(BOX),
    "created_at": 1.5,
}
DAMAGED_IDENTITIES = {
    "not json": b"{label: alice",
    "json null": b"null",
    "a list": b"[1, 2]",
    "missing field": json.dumps({k: v for k, v in GOOD.items() if k != "box_secret"}).encode(),
    "label not a string": json.dumps({**GOOD, "label": 5}).encode(),
    "created_at a string": json.dumps({**GOOD, "created_at": "yesterday"}).encode(),
    "created_at a bool": json.dumps({**GOOD, "created_at": True}).encode(),
    "seed not base64": json.dumps({**GOOD, "signing_seed": "!!!not base64!!!"}).encode(),
    "seed too short": json.dumps({**GOOD, "box_secret": _b64(BOX[:31])}).encode(),
}


@pytest.mark.parametrize("content", DAMAGED_IDENTITIES.values(), ids=DAMAGED_IDENTITIES.keys())
def test_damaged_identity_is_named_and_left_byte_identical(tmp_path: Path, content: bytes) -> None:
    """An unparsable or wrongly shaped identity raises DamagedState; the file is unchanged."""
    path = tmp_path / "identity.json"
    path.write_bytes(content)
    before = FileSnapshot.of(path)
    with pytest.raises(DamagedState) as caught:
        load_identity(path)
    assert "identity.json" in caught.value.message
    assert "left untouched" in caught.value.message
    assert FileSnapshot.of(path) == before


def test_damage_message_never_contains_key_material(tmp_path: Path) -> None:
    """The error for a wrong-size key names the field, not its value."""
    path = tmp_path / "identity.json"
    short = _b64(BOX[:31])
    path.write_text(json.dumps({**GOOD, "box_secret": short}))
    with pytest.raises(DamagedState) as caught:
        load_identity(path)
    assert "box_secret" in caught.value.message
    assert short not in caught.value.message
    assert _b64(SEED) not in caught.value.message


def test_save_never_overwrites_a_damaged_identity(tmp_path: Path) -> None:
    """Saving over a file that does not parse raises DamagedState and keeps its bytes."""
    path = tmp_path / "identity.json"
    path.write_bytes(b"{half a file")
    before = FileSnapshot.of(path)
    with pytest.raises(DamagedState):
        save_identity(path, make_record())
    assert FileSnapshot.of(path) == before


def test_save_refuses_to_replace_different_keys(tmp_path: Path) -> None:
    """An identity with other keys is not overwritten unless replace_keys is set."""
    path = tmp_path / "identity.json"
    save_identity(path, make_record())
    other = make_record(signing_seed=bytes(32))
    with pytest.raises(LocalProtocolError, match="different identity"):
        save_identity(path, other)
    assert load_identity(path) == make_record()
    save_identity(path, other, replace_keys=True)
    assert load_identity(path) == other


def test_save_allows_renaming_with_the_same_keys(tmp_path: Path) -> None:
    """A new label over the same keys is written (this is `rename me`)."""
    path = tmp_path / "identity.json"
    save_identity(path, make_record())
    save_identity(path, make_record(label="alice-2"))
    loaded = load_identity(path)
    assert loaded is not None and loaded.label == "alice-2"


@settings(max_examples=40)
@given(
    label=st.text(max_size=40),
    machine=st.text(max_size=40),
    seed=st.binary(min_size=32, max_size=32),
    box=st.binary(min_size=32, max_size=32),
    created_at=st.floats(min_value=0, max_value=4e9, allow_nan=False),
)
def test_any_identity_round_trips(
    label: str, machine: str, seed: bytes, box: bytes, created_at: float
) -> None:
    """Every valid record survives save and load unchanged, and its file never shows secrets."""
    record = IdentityRecord(label, machine, seed, box, created_at)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "identity.json"
        save_identity(path, record)
        assert load_identity(path) == record
    assert not re.search(re.escape(seed.hex()), repr(record))
