"""The sealed backup file: a versioned header, then one libsodium secretstream under a key made
from a passphrase.

Theory of operation. The file is written and read front to back, one message at a time, so its
size never decides how much memory either side holds (a message is at most ``CHUNK`` bytes).

Layout (integers big-endian)::

    offset size
      0     8   magic  b"CTBACKUP"
      8     2   format version (1)
     10     1   KDF (1 = argon2id v1.3, libsodium crypto_pwhash_argon2id)
     11     4   opslimit
     15     8   memlimit, bytes
     23    16   salt (random per file)
     39    24   secretstream header (its random nonce)
     63    16   verifier: shows whether the passphrase is right, before any message is opened
     79    16   checksum: unkeyed BLAKE2b-128 of bytes 0..78
     95         frames: a 4-byte length, then that many bytes of one secretstream message

The passphrase (NFC, UTF-8) and salt go through argon2id with the limits in the header, which
records them so that a later crosstalk may choose others and still open this file; a reader
accepts only limits between libsodium's minimum and ``MAX_OPSLIMIT``/``MAX_MEMLIMIT``, so a
changed header cannot make it allocate without bound. From that master key, keyed BLAKE2b with
two personalisations makes the stream key and the verifier (one-way: the verifier tells nothing
about the stream key; it lets a guesser test a passphrase exactly as fast as opening the first
message would, so it gives nothing away).

The messages, in order (libsodium crypto_secretstream_xchacha20poly1305: each message is
authenticated, numbered by the stream's state, and the last is tagged FINAL, so reordering,
dropping, duplicating or cutting messages off is detected):

1. the manifest (TAG_MESSAGE), with the whole 95-byte header as associated data: a changed
   header byte that still passed the checksum fails here, so every byte of the file is covered;
2. the contents, TAG_MESSAGE each, no associated data (their order is bound by the stream);
3. one empty message tagged FINAL. Nothing may follow it.

Errors: anything wrong before the KDF (short file, magic, checksum, version, limits) or after it
(a frame's length, a message that does not open, a missing FINAL, bytes after it) is
:class:`~crosstalk.errors.DamagedBackup`; only a verifier that does not match is
:class:`~crosstalk.errors.BadPassphrase`. A header changed on purpose, checksum recomputed, reads
as a wrong passphrase or as damage, never as a good file.
"""

from __future__ import annotations

import hmac
import struct
import unicodedata
from collections.abc import Iterator
from typing import BinaryIO

import attrs
import nacl.bindings as sodium
import nacl.exceptions
import nacl.hash
import nacl.pwhash.argon2id as argon2id
import nacl.utils
from nacl.encoding import RawEncoder

from crosstalk.errors import BadPassphrase, DamagedBackup

MAGIC = b"CTBACKUP"
VERSION = 1
KDF_ARGON2ID = 1
CHUNK = 1 << 20
"""The most plaintext one message carries: what either side holds of the contents at a time."""

_HEAD = struct.Struct(">8sHBIQ16s24s16s")
_CHECKSUM_SIZE = 16
HEADER_SIZE = _HEAD.size + _CHECKSUM_SIZE
_LENGTH = struct.Struct(">I")
_ABYTES = sodium.crypto_secretstream_xchacha20poly1305_ABYTES
_TAG_MESSAGE = sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
_TAG_FINAL = sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL
MAX_FRAME = CHUNK + _ABYTES
MAX_OPSLIMIT = 16
MAX_MEMLIMIT = argon2id.MEMLIMIT_SENSITIVE  # 1 GiB


@attrs.frozen
class KdfLimits:
    """argon2id's cost: passes over memory (``opslimit``) and memory in bytes (``memlimit``)."""

    opslimit: int
    memlimit: int


MODERATE = KdfLimits(argon2id.OPSLIMIT_MODERATE, argon2id.MEMLIMIT_MODERATE)
"""What ``crosstalk backup`` uses: 3 passes over 256 MiB (libsodium's MODERATE, about a second)."""


def _passphrase_bytes(passphrase: str) -> bytes:
    # NFC: the same passphrase typed on two systems may arrive composed or decomposed.
    return unicodedata.normalize("NFC", passphrase).encode("utf-8")


def _keys(passphrase: str, salt: bytes, limits: KdfLimits) -> tuple[bytes, bytes]:
    """(stream key, verifier) for ``passphrase`` under ``salt`` and ``limits``."""
    master = argon2id.kdf(
        32, _passphrase_bytes(passphrase), salt,
        opslimit=limits.opslimit, memlimit=limits.memlimit,
    )  # fmt: skip
    key = nacl.hash.blake2b(b"", digest_size=32, key=master, person=b"crosstalk-bk-key",
                            encoder=RawEncoder)
    verifier = nacl.hash.blake2b(b"", digest_size=16, key=master, person=b"crosstalk-bk-chk",
                                 encoder=RawEncoder)
    return key, verifier


def _checksum(head: bytes) -> bytes:
    return nacl.hash.blake2b(head, digest_size=_CHECKSUM_SIZE, encoder=RawEncoder)


class SealedWriter:
    """Writes one sealed file to ``out``: :meth:`write` the contents, then :meth:`finish`.

    Args:
        out: where the bytes go (a file opened for binary writing).
        passphrase: not empty.
        manifest: the first message (what the contents are); at most ``CHUNK`` bytes.
        limits: argon2id's cost, recorded in the header.
        salt: 16 random bytes; tests pass their own.
    """

    def __init__(
        self,
        out: BinaryIO,
        passphrase: str,
        manifest: bytes,
        *,
        limits: KdfLimits = MODERATE,
        salt: bytes | None = None,
    ) -> None:
        if not passphrase:
            raise BadPassphrase("An empty passphrase protects nothing; choose one.")
        if len(manifest) > CHUNK:
            raise ValueError("the manifest is larger than one message")
        salt = nacl.utils.random(argon2id.SALTBYTES) if salt is None else salt
        key, verifier = _keys(passphrase, salt, limits)
        self._state = sodium.crypto_secretstream_xchacha20poly1305_state()
        stream_header = sodium.crypto_secretstream_xchacha20poly1305_init_push(self._state, key)
        head = _HEAD.pack(MAGIC, VERSION, KDF_ARGON2ID, limits.opslimit, limits.memlimit, salt,
                          stream_header, verifier)
        header = head + _checksum(head)
        self._out = out
        self.written = 0
        self._emit(header)
        self._push(manifest, ad=header)

    def _emit(self, data: bytes) -> None:
        self._out.write(data)
        self.written += len(data)

    def _push(self, message: bytes, *, ad: bytes | None = None, tag: int = _TAG_MESSAGE) -> None:
        sealed = sodium.crypto_secretstream_xchacha20poly1305_push(self._state, message, ad, tag)
        self._emit(_LENGTH.pack(len(sealed)))
        self._emit(sealed)

    def write(self, data: bytes) -> None:
        """Seal ``data`` as one message per ``CHUNK`` bytes (none for empty data)."""
        view = memoryview(data)
        for start in range(0, len(view), CHUNK):
            self._push(bytes(view[start : start + CHUNK]))

    def finish(self) -> None:
        """Write the FINAL message; the file is complete."""
        self._push(b"", tag=_TAG_FINAL)


def _read_exactly(inp: BinaryIO, size: int, what: str) -> bytes:
    data = inp.read(size)
    if len(data) != size:
        raise DamagedBackup(f"The backup file ends early, inside {what}; it is truncated.")
    return data


def _read_header(inp: BinaryIO) -> tuple[bytes, KdfLimits, bytes, bytes, bytes]:
    """(header bytes, limits, salt, stream header, verifier), or DamagedBackup."""
    header = inp.read(HEADER_SIZE)
    if not header.startswith(MAGIC[: len(header)]) or not header:
        raise DamagedBackup("This is not a crosstalk backup file.")
    if len(header) < HEADER_SIZE:
        raise DamagedBackup("The backup file ends early, inside its header; it is truncated.")
    head, checksum = header[: _HEAD.size], header[_HEAD.size :]
    if not hmac.compare_digest(_checksum(head), checksum):
        raise DamagedBackup("The backup file's header has been changed or damaged.")
    _magic, version, kdf, ops, mem, salt, stream_header, verifier = _HEAD.unpack(head)
    if version != VERSION:
        raise DamagedBackup(
            f"This backup is in format {version}, which this crosstalk cannot read "
            "(it was written by a newer one); upgrade crosstalk and restore again."
        )
    if kdf != KDF_ARGON2ID:
        raise DamagedBackup(f"This backup names a key derivation ({kdf}) crosstalk does not know.")
    if not (argon2id.OPSLIMIT_MIN <= ops <= MAX_OPSLIMIT
            and argon2id.MEMLIMIT_MIN <= mem <= MAX_MEMLIMIT):  # fmt: skip
        raise DamagedBackup("This backup asks for key derivation limits out of bounds.")
    return header, KdfLimits(ops, mem), salt, stream_header, verifier


class SealedReader:
    """Opens a sealed file from ``inp``: :attr:`manifest`, then :meth:`messages`.

    Raises:
        DamagedBackup: the header is not a backup's, or the manifest does not open.
        BadPassphrase: the passphrase is not the one the file was sealed with.
    """

    def __init__(self, inp: BinaryIO, passphrase: str) -> None:
        header, limits, salt, stream_header, verifier = _read_header(inp)
        key, expected = _keys(passphrase, salt, limits)
        if not hmac.compare_digest(verifier, expected):
            raise BadPassphrase("That passphrase does not open this backup; nothing was written.")
        self._inp = inp
        self._state = sodium.crypto_secretstream_xchacha20poly1305_state()
        sodium.crypto_secretstream_xchacha20poly1305_init_pull(self._state, stream_header, key)
        self._done = False
        manifest, tag = self._pull(ad=header)
        if tag != _TAG_MESSAGE:
            raise DamagedBackup("The backup file has no contents list; it is damaged.")
        self.manifest = manifest

    def _pull(self, *, ad: bytes | None = None) -> tuple[bytes, int]:
        length = _LENGTH.unpack(_read_exactly(self._inp, _LENGTH.size, "a frame's length"))[0]
        if not _ABYTES <= length <= MAX_FRAME:
            raise DamagedBackup("The backup file has a frame of impossible length; it is damaged.")
        sealed = _read_exactly(self._inp, length, "a frame")
        pull = sodium.crypto_secretstream_xchacha20poly1305_pull
        try:
            message, tag = pull(self._state, sealed, ad)
        except (nacl.exceptions.CryptoError, ValueError):
            raise DamagedBackup(
                "The backup file has been changed or damaged since it was written."
            ) from None
        return message, tag

    def messages(self) -> Iterator[bytes]:
        """Each content message, in order; ends at the FINAL one, once nothing follows it."""
        while not self._done:
            message, tag = self._pull()
            if tag == _TAG_FINAL:
                if message or self._inp.read(1):
                    raise DamagedBackup("The backup file has bytes after its end; it is damaged.")
                self._done = True
                return
            if tag != _TAG_MESSAGE:
                raise DamagedBackup("The backup file has a message of an unknown kind.")
            yield message
