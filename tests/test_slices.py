"""A file slice reads at most its cap (and the scan's margin), never the whole file."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path
from typing import BinaryIO

import pytest

from crosstalk.errors import CredentialRefused
from crosstalk.slices import FILE_READ_LIMIT, READ_CHUNK, build_slice, read_capped
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
        monkeypatch.setattr("crosstalk.slices.read_capped", _read_whole)
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
        monkeypatch.setattr("crosstalk.slices.FILE_READ_LIMIT", MAX_SLICE - 200)
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
