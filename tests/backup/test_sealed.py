"""The sealed file format: what goes in comes out, and any change to the bytes is refused.

Every test uses libsodium's cheapest argon2id limits (recorded in the header like any others),
so a hundred files cost milliseconds; ``crosstalk backup`` itself uses MODERATE.
"""

from __future__ import annotations

import io
import struct

import nacl.pwhash.argon2id as argon2id
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.backup.sealed import (
    CHUNK,
    HEADER_SIZE,
    MAX_MEMLIMIT,
    MODERATE,
    KdfLimits,
    SealedReader,
    SealedWriter,
)
from crosstalk.errors import BadPassphrase, DamagedBackup

FAST = KdfLimits(argon2id.OPSLIMIT_MIN, argon2id.MEMLIMIT_MIN)
SALT = bytes(range(16))


def seal(
    manifest: bytes, pieces: list[bytes], passphrase: str = "correct horse", **kw: object
) -> bytes:
    out = io.BytesIO()
    writer = SealedWriter(out, passphrase, manifest, limits=FAST, **kw)  # type: ignore[arg-type]
    for piece in pieces:
        writer.write(piece)
    writer.finish()
    assert writer.written == len(out.getvalue())
    return out.getvalue()


def open_all(data: bytes, passphrase: str = "correct horse") -> tuple[bytes, bytes]:
    reader = SealedReader(io.BytesIO(data), passphrase)
    return reader.manifest, b"".join(reader.messages())


@given(
    manifest=st.binary(max_size=2000),
    pieces=st.lists(st.binary(max_size=3000), max_size=5),
    passphrase=st.text(min_size=1, max_size=40),
)
def test_what_is_sealed_opens_unchanged(
    manifest: bytes, pieces: list[bytes], passphrase: str
) -> None:
    """Any manifest, contents and (non-empty) passphrase round-trip exactly."""
    data = seal(manifest, pieces, passphrase)
    assert open_all(data, passphrase) == (manifest, b"".join(pieces))


def test_contents_larger_than_a_message_are_split_and_joined() -> None:
    """Contents over CHUNK travel as several messages, each at most CHUNK, and rejoin."""
    big = bytes(range(256)) * (CHUNK // 256 * 2 + 3)
    data = seal(b"m", [big])
    reader = SealedReader(io.BytesIO(data), "correct horse")
    messages = list(reader.messages())
    assert len(messages) == 3 and all(len(m) <= CHUNK for m in messages)
    assert b"".join(messages) == big


def test_the_passphrase_is_compared_in_nfc() -> None:
    """A passphrase typed decomposed opens a file sealed with it composed."""
    data = seal(b"m", [b"x"], "caf\u00e9")
    assert open_all(data, "cafe\u0301") == (b"m", b"x")


def test_a_wrong_passphrase_is_bad_passphrase() -> None:
    """Another passphrase, even one letter off, is bad_passphrase, not damage."""
    data = seal(b"m", [b"secret"])
    with pytest.raises(BadPassphrase):
        SealedReader(io.BytesIO(data), "correct hors")


def test_an_empty_passphrase_is_refused() -> None:
    """Nothing is sealed under an empty passphrase."""
    with pytest.raises(BadPassphrase):
        SealedWriter(io.BytesIO(), "", b"m", limits=FAST)


def test_the_header_records_the_limits_it_was_sealed_with() -> None:
    """The KDF limits are read from the header: a file sealed with MODERATE records them."""
    out = io.BytesIO()
    SealedWriter(out, "pw", b"m", limits=MODERATE, salt=SALT).finish()
    ops, mem = struct.unpack(">IQ", out.getvalue()[11:23])
    assert (ops, mem) == (argon2id.OPSLIMIT_MODERATE, argon2id.MEMLIMIT_MODERATE)
    assert out.getvalue()[23:39] == SALT


def test_two_files_from_the_same_input_differ() -> None:
    """A fresh salt and stream nonce each time: the same input never seals to the same bytes."""
    assert seal(b"m", [b"x"]) != seal(b"m", [b"x"])


# Where each part of the file sits, for the tampering table below.
SAMPLE = seal(b'{"manifest": true}', [b"a" * 100, b"b" * 50])
FIRST_FRAME = HEADER_SIZE
FIRST_LENGTH = struct.unpack(">I", SAMPLE[FIRST_FRAME : FIRST_FRAME + 4])[0]
SECOND_FRAME = FIRST_FRAME + 4 + FIRST_LENGTH
PLACES = {
    "magic": 0,
    "version": 8,
    "kdf": 10,
    "opslimit": 12,
    "memlimit": 20,
    "salt": 30,
    "stream header": 45,
    "verifier": 70,
    "checksum": 85,
    "manifest length": FIRST_FRAME + 3,
    "manifest ciphertext": FIRST_FRAME + 4 + 2,
    "manifest tag": FIRST_FRAME + 4 + FIRST_LENGTH - 1,
    "content ciphertext": SECOND_FRAME + 4 + 30,
    "content tag": SECOND_FRAME + 4 + 100 + 16,
    "final message": len(SAMPLE) - 5,
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_flipped_byte_anywhere_is_damaged_backup(place: str) -> None:
    """One bit changed in any part of the file (header, salt, tag, ciphertext) is refused."""
    data = bytearray(SAMPLE)
    data[PLACES[place]] ^= 0x01
    with pytest.raises(DamagedBackup):
        open_all(bytes(data))


def test_every_single_byte_flip_is_refused() -> None:
    """Not just the chosen places: flipping each byte of the file in turn is always refused as
    damaged (the header's checksum catches a changed salt or verifier before any passphrase
    check could call it a wrong passphrase)."""
    for index in range(len(SAMPLE)):
        data = bytearray(SAMPLE)
        data[index] ^= 0x80
        with pytest.raises(DamagedBackup):
            open_all(bytes(data))


def test_truncation_at_every_length_is_damaged_backup() -> None:
    """A file cut short at any byte, even at a frame boundary, is refused as damaged."""
    for length in range(len(SAMPLE)):
        with pytest.raises(DamagedBackup):
            open_all(SAMPLE[:length])


@pytest.mark.parametrize(
    "extra",
    [b"\x00", b"more", SAMPLE[HEADER_SIZE:]],
    ids=["a zero byte", "text", "the frames again"],
)
def test_bytes_after_the_end_are_damaged_backup(extra: bytes) -> None:
    """Anything appended after the FINAL message is refused (a second stream too)."""
    with pytest.raises(DamagedBackup):
        open_all(SAMPLE + extra)


def test_frames_swapped_or_dropped_are_damaged_backup() -> None:
    """The stream numbers its messages: dropping the first content frame is refused."""
    second_length = struct.unpack(">I", SAMPLE[SECOND_FRAME : SECOND_FRAME + 4])[0]
    third = SECOND_FRAME + 4 + second_length
    with pytest.raises(DamagedBackup):
        open_all(SAMPLE[:SECOND_FRAME] + SAMPLE[third:])


def test_a_header_from_another_file_does_not_open_this_one() -> None:
    """A valid header (same passphrase) spliced onto another file's frames is refused."""
    other = seal(b'{"manifest": true}', [b"a" * 100, b"b" * 50])
    with pytest.raises(DamagedBackup):
        open_all(other[:HEADER_SIZE] + SAMPLE[HEADER_SIZE:])


def test_a_file_that_is_not_a_backup_is_damaged_backup() -> None:
    """Some other file (a SQLite database, say) is not taken for a backup."""
    with pytest.raises(DamagedBackup, match="not a crosstalk backup"):
        open_all(b"SQLite format 3\x00" + bytes(200))


def test_limits_out_of_bounds_are_refused_before_deriving() -> None:
    """A header asking for more memory than MAX_MEMLIMIT is refused, checksum and all."""
    import nacl.hash
    from nacl.encoding import RawEncoder

    head = bytearray(SAMPLE[: HEADER_SIZE - 16])
    head[15:23] = struct.pack(">Q", MAX_MEMLIMIT * 4)
    checksum = nacl.hash.blake2b(bytes(head), digest_size=16, encoder=RawEncoder)
    with pytest.raises(DamagedBackup, match="out of bounds"):
        open_all(bytes(head) + checksum + SAMPLE[HEADER_SIZE:])
