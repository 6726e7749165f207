"""A file slice reads at most its cap (and the scan's margin), never the whole file; a turns
slice reads only the end of the transcript."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path
from typing import BinaryIO

import pytest

from crosstalk.errors import CredentialRefused, TooLarge
from crosstalk.slices.build import (
    FILE_READ_LIMIT,
    READ_CHUNK,
    TURNS_READ_LIMIT,
    build_slice,
    read_capped,
)
from crosstalk.wire.room_ops import MAX_SLICE

MiB = 1024 * 1024


class CountingZeros(io.RawIOBase):
    """A file of ``size`` zero bytes that is never in memory, counting what is asked of it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.position = 0
        self.largest_ask = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]  # as RawIOBase
        n = min(len(buffer), self.size - self.position)
        buffer[:n] = bytes(n)
        self.position += n
        self.largest_ask = max(self.largest_ask, len(buffer))
        return n


def test_the_reader_asks_for_no_byte_past_its_limit() -> None:
    """Reading a 400 MB file with a 144 KiB limit asks for 144 KiB in chunks, and counts the
    rest as left out."""
    stream = CountingZeros(400 * MiB)
    data, left_out = read_capped(stream, stream.size, FILE_READ_LIMIT)  # type: ignore[arg-type]
    assert len(data) == stream.position == FILE_READ_LIMIT
    assert stream.largest_ask <= READ_CHUNK
    assert left_out == 400 * MiB - FILE_READ_LIMIT


def test_a_short_file_is_read_whole_with_nothing_left_out() -> None:
    """A file under the limit is read to its end; nothing is counted as left out."""
    stream = CountingZeros(1000)
    data, left_out = read_capped(stream, stream.size, FILE_READ_LIMIT)  # type: ignore[arg-type]
    assert (len(data), left_out) == (1000, 0)


def _sparse(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "big.bin"
    with path.open("wb") as file:
        file.truncate(size)  # sparse: no disk, and all zeros when read
    return path


def _read_whole(stream: BinaryIO, size: int, limit: int) -> tuple[bytes, int]:
    """The planted bug: read everything, then keep the limit."""
    return stream.read()[:limit], max(size - limit, 0)


@pytest.mark.parametrize(("size", "plant"), [(400 * MiB, False), (16 * MiB, True)])
def test_a_file_slice_holds_no_more_than_its_cap_in_memory(
    size: int, plant: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A several-hundred-MB file becomes a slice cut at the cap, with a marker naming every byte
    left out, and building it holds a few copies of what was read at its peak (the bytes, their
    text, its encoding: about 1 MiB), never the file. The planted bug reads the file whole first
    (a smaller file, so the test stays cheap): its peak is the file's size."""
    if plant:
        monkeypatch.setattr("crosstalk.slices.build.read_capped", _read_whole)
    path = _sparse(tmp_path, size)
    tracemalloc.start()
    try:
        built = build_slice("file:big.bin", cwd=tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert path.stat().st_size == size
    assert built.truncated
    assert len(built.content.encode()) <= MAX_SLICE
    kept = MAX_SLICE - 200
    assert built.content.endswith(f"\n[… cut: {size - kept} more bytes not sent]\n")
    assert built.content[:kept] == "\x00" * kept
    if plant:
        assert peak >= size
    else:
        assert peak < 8 * FILE_READ_LIMIT


@pytest.mark.parametrize("plant", [False, True])
def test_a_secret_cut_in_two_by_the_cap_is_still_refused(
    plant: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token that starts just before the cut and ends after it is read whole (the reader's
    margin past the cap) and refused, so its first half is not sent either. The planted bug
    reads only up to the cut: the half token passes the scan and would be sent."""
    if plant:
        monkeypatch.setattr("crosstalk.slices.build.FILE_READ_LIMIT", MAX_SLICE - 200)
    token = "ghp_" + "A1b2C3d4E5" * 4
    (tmp_path / "notes.txt").write_text(
        "x" * (MAX_SLICE - 220) + " " + token + "\n" + "y" * MAX_SLICE
    )
    if plant:
        built = build_slice("file:notes.txt", cwd=tmp_path)
        assert built.truncated and "ghp_" in built.content
        return
    with pytest.raises(CredentialRefused):
        build_slice("file:notes.txt", cwd=tmp_path)


def _transcript(path: Path, *parts: int | str) -> Path:
    """A JSONL transcript: each int is that many MiB of progress lines, each str one turn
    (user and assistant in turn)."""
    progress = json.dumps({"type": "progress", "data": "." * 1000}) + "\n"
    role = "assistant"
    with path.open("w") as out:
        for part in parts:
            if isinstance(part, int):
                out.write(progress * (part * MiB // len(progress)))
                continue
            role = "user" if role == "assistant" else "assistant"
            out.write(json.dumps({"type": role, "message": {"role": role, "content": part}}))
            out.write("\n")
    return path


@pytest.mark.parametrize("plant", [False, True])
def test_turns_are_found_from_the_end_of_a_long_transcript(
    plant: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last 3 turns of a 32 MiB transcript, in order, reading only its last 4 MiB: the
    peak stays a few times that, under the transcript's size. The planted bug reads it whole."""
    if plant:
        monkeypatch.setattr("crosstalk.slices.build.TURNS_READ_LIMIT", 2**40)
    path = _transcript(tmp_path / "t.jsonl", 32, *(f"turn {n}" for n in range(6)))
    tracemalloc.start()
    try:
        built = build_slice("turns:3", cwd=tmp_path, transcript=str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert built.label == "last 3 turns"
    assert [json.loads(line)["content"] for line in built.content.splitlines()] == [
        "turn 3", "turn 4", "turn 5",
    ]
    if plant:
        assert peak > path.stat().st_size
    else:
        assert peak < 5 * TURNS_READ_LIMIT < path.stat().st_size


def test_turns_that_begin_before_the_window_are_named_in_the_label(tmp_path: Path) -> None:
    """Asked for 3 turns where the third from last begins before the last 4 MiB: the two found
    are sent and the label says so; a last turn bigger than the window is too_large."""
    path = _transcript(tmp_path / "t.jsonl", 1, "first", 1, "x" * (3 * MiB), "after")
    built = build_slice("turns:3", cwd=tmp_path, transcript=str(path))
    assert built.label == (
        "last 2 turns (of 3 asked: the others begin before the transcript's last 4 MiB)"
    )
    assert built.truncated and built.content.startswith('{"role": "assistant", "content": "xxx')
    huge = _transcript(tmp_path / "huge.jsonl", 1, "first", "x" * (5 * MiB))
    with pytest.raises(TooLarge):
        build_slice("turns:2", cwd=tmp_path, transcript=str(huge))
