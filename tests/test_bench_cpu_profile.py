"""bench/cpu_profile.py: py-spy's raw samples binned by kind of work."""

from __future__ import annotations

from bench.cpu_profile import (
    BINS,
    CRYPTO,
    OTHER,
    OURS,
    SCHEDULING,
    classify,
    frame_path,
    parse_raw,
    shares,
)

THREAD = "thread (26906): MainThread"
MAIN = "run_foreground (crosstalk/cli/daemon_main.py:46)"
RUN = "unrolled_run (trio/_core/_run.py:2866)"
SEND = "Sender.send (crosstalk/actors/room_send.py:69)"
SITE_SIGN = "crypto_sign (/root/.venv/lib/python3.11/site-packages/nacl/bindings/crypto_sign.py:72)"
JSON = "iterencode (/root/.pyenv/versions/3.11.7/lib/python3.11/json/encoder.py:205)"
SEND_NOWAIT = "MemorySendChannel.send_nowait (trio/_channel.py:218)"
SOCKET = "_nonblocking_helper (trio/_socket.py:820)"


def test_a_frame_s_file_is_taken_relative_to_site_packages_or_the_standard_library() -> None:
    assert frame_path(SEND) == "crosstalk/actors/room_send.py"
    assert frame_path(SITE_SIGN) == "nacl/bindings/crypto_sign.py"
    assert frame_path(JSON) == "json/encoder.py"
    assert frame_path("<module> (<frozen runpy>:88)") == "<frozen runpy>"


def test_a_sample_goes_to_the_bin_of_its_innermost_frame_that_names_one() -> None:
    assert classify([MAIN, RUN, SEND, SITE_SIGN]) == CRYPTO
    assert classify([MAIN, RUN, SEND]) == OURS
    assert classify([MAIN, RUN, SEND, SEND_NOWAIT]) == SCHEDULING
    assert classify([MAIN, RUN]) == SCHEDULING  # the run loop itself
    assert classify([MAIN, RUN, SEND, SOCKET]).startswith("sockets")  # before trio's own bin
    assert classify([MAIN, RUN, SEND, JSON]).startswith("JSON")
    assert classify(["<module> (<frozen runpy>:88)"]) == OTHER
    assert classify([]) == OTHER


def test_raw_lines_are_counted_per_bin_and_broken_lines_skipped() -> None:
    text = "\n".join([
        f"{THREAD};{MAIN};{RUN};{SEND};{SITE_SIGN} 3",
        f"{THREAD};{MAIN};{RUN};{SEND} 5",
        f"{THREAD};{MAIN};{RUN} 2",
        "not a sample line",
        "",
    ])
    bins = parse_raw(text)
    assert bins == {CRYPTO: 3, OURS: 5, SCHEDULING: 2}
    assert shares(bins) == {OURS: 0.5, CRYPTO: 0.3, SCHEDULING: 0.2}
    assert shares(parse_raw("")) == {}


def test_every_bin_has_a_distinct_name() -> None:
    names = [name for name, _ in BINS]
    assert len(set(names)) == len(names) and OTHER not in names
