"""Invite codes: ``1234-word-word-word-word`` optionally followed by `` at host:port``.

Theory of operation. An invite is what one person reads to another: the relay's public 4-digit
pairing slot, then the words (4 for ``room``, 6 for ``link``) that both sides feed to SPAKE2.
When the inviter runs a relay on its LAN (``--host``), it appends `` at 192.168.1.5:8787`` so the
joiner knows where to connect.

Parsing is strict about content and lenient about typing: case is ignored, surrounding
whitespace is dropped, and the parts may be separated by dashes, spaces or both (people type what
they hear). Anything else — a wrong digit count, a wrong number of words, a word that is not on
our list, a malformed address — is a :class:`~crosstalk.errors.UsageError` whose sentence names
the expected form. Nothing else is ever raised, whatever the text (fuzzed in the tests).
"""

from __future__ import annotations

import re

import attrs

from crosstalk.core.words import choose_words, is_word
from crosstalk.errors import UsageError
from crosstalk.wire.pairing import Purpose

MAX_INVITE_TEXT = 300

_SLOT = re.compile(r"[0-9]{4}")
_AT = re.compile(r"\s+at\s+")
_SEPARATOR = re.compile(r"[\s-]+")
# A DNS name or IPv4 address, or a bracketed IPv6 address; then a port.
_HOST = r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?|\[[0-9a-f:.]{2,45}\]"
_ADDRESS = re.compile(rf"(?P<host>{_HOST}):(?P<port>[0-9]{{1,5}})")


def expected_form(purpose: Purpose) -> str:
    """The code's shape as shown to people, e.g. ``NNNN-word-word-word-word``."""
    return "NNNN" + "-word" * purpose.word_count


def _usage(purpose: Purpose, problem: str) -> UsageError:
    return UsageError(
        f"{problem}; a {purpose.value} code looks like {expected_form(purpose)} "
        "(a 4-digit slot, then the words), optionally followed by ' at host:port'."
    )


def _check_slot(slot: str) -> None:
    if not _SLOT.fullmatch(slot):
        raise ValueError("a slot is 4 digits")


def _check_words(words: tuple[str, ...]) -> None:
    if len(words) not in (Purpose.ROOM.word_count, Purpose.LINK.word_count):
        raise ValueError("an invite has 4 or 6 words")
    if not all(isinstance(word, str) and is_word(word) for word in words):
        raise ValueError("every invite word is on the word list")


def _check_port(port: int | None) -> None:
    if port is not None and not 1 <= port <= 65535:
        raise ValueError("a port is 1 to 65535")


@attrs.frozen
class Invite:
    """A parsed invite code. ``host`` and ``port`` are both set or both None.

    ``host`` is lowercase, and an IPv6 address keeps its brackets (``[fd00::5]``).
    """

    slot: str = attrs.field(validator=lambda _i, _a, v: _check_slot(v))
    words: tuple[str, ...] = attrs.field(validator=lambda _i, _a, v: _check_words(v))
    host: str | None = None
    port: int | None = attrs.field(default=None, validator=lambda _i, _a, v: _check_port(v))

    def __attrs_post_init__(self) -> None:
        if (self.host is None) != (self.port is None):
            raise ValueError("an invite has both a host and a port, or neither")
        if self.host is not None and not re.fullmatch(_HOST, self.host):
            raise ValueError("an invite's host is a lowercase name, IPv4 or [IPv6] address")

    def format(self) -> str:
        """The code as printed: ``1234-word-word-word-word`` plus `` at host:port`` if any."""
        code = "-".join((self.slot, *self.words))
        return code if self.host is None else f"{code} at {self.host}:{self.port}"

    @classmethod
    def new(
        cls,
        slot: str,
        entropy: bytes,
        *,
        purpose: Purpose,
        host: str | None = None,
        port: int | None = None,
    ) -> Invite:
        """A fresh invite for ``slot`` with words chosen from ``entropy``.

        ``entropy`` is ``purpose.word_count * BYTES_PER_WORD`` random bytes from the caller.
        """
        words = choose_words(entropy, purpose.word_count)
        return cls(slot=slot, words=words, host=host, port=port)

    @classmethod
    def parse(cls, text: str, *, purpose: Purpose) -> Invite:
        """Parse what a person typed.

        Raises:
            UsageError: the text is not a well-formed code for ``purpose``.
        """
        if len(text) > MAX_INVITE_TEXT:
            raise _usage(purpose, "that code is far too long")
        parts = _AT.split(text.strip().lower(), maxsplit=1)
        host, port = _parse_address(parts[1], purpose) if len(parts) == 2 else (None, None)
        tokens = _SEPARATOR.split(parts[0].strip(" \t\r\n-"))
        slot, words = tokens[0], tuple(tokens[1:])
        if not _SLOT.fullmatch(slot):
            raise _usage(purpose, "that code does not start with a 4-digit slot")
        if len(words) != purpose.word_count:
            raise _usage(purpose, f"that code has {len(words)} words, not {purpose.word_count}")
        for word in words:
            if not is_word(word):
                raise _usage(purpose, f"{word[:20]!r} is not one of crosstalk's words")
        return cls(slot=slot, words=words, host=host, port=port)


def _parse_address(text: str, purpose: Purpose) -> tuple[str, int]:
    match = _ADDRESS.fullmatch(text.strip())
    if match is None or not 1 <= int(match["port"]) <= 65535:
        raise _usage(purpose, "the part after ' at ' is not a host:port address")
    return match["host"], int(match["port"])
