"""Fuzz the real relay with thousands of hostile frames from one client."""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio_websocket import ConnectionClosed, WebSocketConnection

from crosstalk.wire import relay as w
from tests.relay.client import Identity, handshake, open_client, open_ws, pair_and_room
from tests.relay.process import RelayProcess

pytestmark = pytest.mark.e2e

TAGS = ["hello", "create", "add", "accept", "decline", "leave", "remove", "roster", "rooms",
        "post", "ack", "resume", "slot_open", "slot_join", "slot_attach", "slot_send",
        "slot_close", "work_ask", "work", "ready", "op", "nope", ""]
FIELDS = ["req", "room", "op_id", "body", "seq", "cursors", "slot", "index", "data", "ed_pub",
          "x_pub", "sig", "device", "version", "fingerprint", "t", "work", "seed", "bits"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=10,
)
huge = st.sampled_from(["x" * 200_000, "A" * 400_000, "9" * 5000])
tagged = st.builds(
    lambda tag, fields: json.dumps({"t": tag, **fields}),
    st.sampled_from(TAGS),
    st.dictionaries(st.sampled_from(FIELDS), json_values | huge, max_size=8),
)
plausible = st.builds(  # right shapes, wrong contents: unknown rooms, bad slots, bad sigs
    lambda frame: w.encode_frame(frame),
    st.one_of(
        st.builds(w.Post, st.integers(0, 9), st.text(max_size=70), st.text(max_size=200),
                  st.binary(max_size=300)),
        st.builds(w.Ack, st.text(max_size=10), st.integers()),
        st.builds(w.SlotJoin, st.integers(0, 9), st.text(max_size=6), st.binary(max_size=40)),
        st.builds(w.SlotOpen, st.integers(0, 9), st.binary(max_size=40)),
        st.builds(w.WorkAsk, st.integers(0, 9), st.text(max_size=6)),
        st.builds(w.SlotSend, st.integers(0, 9), st.text(max_size=6), st.integers(),
                  st.binary(max_size=50)),
        st.builds(w.Hello, st.binary(max_size=40), st.binary(max_size=40), st.text(max_size=70),
                  st.integers(), st.binary(max_size=70)),
        st.builds(w.Remove, st.integers(0, 9), st.text(max_size=10), st.text(max_size=30)),
        st.builds(w.Add, st.integers(0, 9), st.text(max_size=10), st.binary(max_size=33),
                  st.binary(max_size=33), st.binary(max_size=64)),
    ),
)
frames = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200),
    json_values.map(json.dumps),
    tagged,
    plausible,
)


@pytest.fixture(scope="module")
def shared_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RelayProcess]:
    base: Path = tmp_path_factory.mktemp("fuzz")
    proc = RelayProcess(base / "data", base / "relay.stderr")
    proc.start()
    try:
        yield proc
    finally:
        proc.kill(signal.SIGTERM)


# The bystanders pair once: the fuzzer's slot guesses come from the same address (127.0.0.1)
# and are meant to exhaust that address's guess budget.
BYSTANDERS = (Identity(), Identity())
BYSTANDER_ROOM = "bystanders"
_paired: list[bool] = []
_op_ids = itertools.count()


async def _fuzz_one(ws: WebSocketConnection, frame: str | bytes, authenticated: bool) -> bool:
    """Send one frame; check it was answered. Returns False once the relay closed the socket."""
    try:
        await ws.send_message(frame)
        if authenticated:  # a probe request marks the end of this frame's answers
            await ws.send_message(w.encode_frame(w.ListRooms(10**9)))
        answers: list[Any] = []
        while True:
            got = w.decode_relay_frame(await ws.get_message())
            if authenticated and isinstance(got, w.RoomList) and got.req == 10**9:
                break
            answers.append(got)
            if not authenticated:
                break
    except ConnectionClosed:
        return False
    assert answers, f"no answer to {frame[:80]!r}"
    if not authenticated:
        assert isinstance(answers[0], w.Error) and answers[0].code in {
            "unauthenticated", "bad_frame", "too_large", "version"}
    return True


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(frames, min_size=10, max_size=60), authenticate=st.booleans())
async def test_hostile_frames_get_errors_and_harm_nobody_else(
    shared_relay: RelayProcess, batch: list[str | bytes], authenticate: bool
) -> None:
    """Every hostile frame is answered; the relay stays up; a bystanding pair keeps talking."""
    port = shared_relay.port
    room = BYSTANDER_ROOM
    with trio.fail_after(60):
        async with open_client(port, BYSTANDERS[0]) as a, \
                open_client(port, BYSTANDERS[1]) as b:
            if not _paired:
                await pair_and_room(a, b, room)
                _paired.append(True)
            pending = list(batch)
            while pending:
                async with open_ws(port) as ws:
                    if authenticate:
                        await handshake(ws, Identity(), "fuzz")
                    else:
                        assert isinstance(w.decode_relay_frame(await ws.get_message()),
                                          w.Challenge)
                    while pending and await _fuzz_one(ws, pending[0], authenticate):
                        pending.pop(0)
                    if pending:
                        pending.pop(0)  # the frame that found the socket closed
            op_id = f"after-{next(_op_ids)}"
            posted = await a.ok(w.Post(a.next_req(), room, op_id, b"still here"))
            assert isinstance(posted, w.Posted)
            [op] = await b.ops(1)
            assert (op.op_id, op.body) == (op_id, b"still here")
            await a.send(w.Ack(room, op.seq))
            await b.send(w.Ack(room, op.seq))
    assert shared_relay.proc is not None and shared_relay.proc.poll() is None


async def test_frame_over_the_size_limit_is_refused_without_closing(relay: RelayProcess) -> None:
    """A 1 MiB + 1 byte op body is too_large; the same connection then works on."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(20):  # its own relay: the fuzzer spends 127.0.0.1's slot-guess budget
        async with open_client(relay.port, alice) as a, open_client(relay.port, bob) as b:
            await pair_and_room(a, b, "big-room")
            reply = await a.request(w.Post(a.next_req(), "big-room", "big", b"x" * (2**20 + 1)))
            assert isinstance(reply, w.Error) and reply.code == "too_large"
            assert isinstance(await a.ok(w.Post(a.next_req(), "big-room", "ok", b"x")), w.Posted)
