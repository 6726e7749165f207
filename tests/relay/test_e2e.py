"""The real relay process with real WebSocket clients."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

import pytest
import trio
from nacl.secret import SecretBox

from crosstalk.wire import relay as w
from tests.relay.client import Identity, handshake, open_client, open_ws, pair_and_room
from tests.relay.process import RelayProcess

pytestmark = pytest.mark.e2e


async def test_offline_member_gets_everything_in_order_after_reconnecting(
    relay: RelayProcess,
) -> None:
    """Bob goes away, Alice posts 30 ops, Bob comes back with his cursor and gets them in order."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(20):
        async with open_client(relay.port, alice) as a:
            async with open_client(relay.port, bob) as b:
                await pair_and_room(a, b, "room-1")
                await a.ok(w.Post(a.next_req(), "room-1", "first", b"sealed-0"))
                [op] = await b.ops(1)
                await b.send(w.Ack("room-1", op.seq))
            for i in range(1, 31):
                posted = await a.ok(w.Post(a.next_req(), "room-1", f"op-{i}", b"sealed-%d" % i))
                assert isinstance(posted, w.Posted) and posted.seq == i + 1
            async with open_client(relay.port, bob, resume={"room-1": 1}) as b:
                ops = await b.ops(30)
                assert [o.seq for o in ops] == list(range(2, 32))
                assert [o.body for o in ops] == [b"sealed-%d" % i for i in range(1, 31)]
                assert b.resumed is not None
                assert b.resumed.rooms == [w.ResumedRoom("room-1", 1, 31)]
                await a.ok(w.Post(a.next_req(), "room-1", "live", b"live"))
                [live] = await b.ops(1)
                assert live.seq == 32


async def test_acknowledged_op_survives_kill_9(relay: RelayProcess) -> None:
    """Every op the relay answered 'posted' is still there after kill -9 and a restart."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(30):
        async with open_client(relay.port, alice) as a, open_client(relay.port, bob) as b:
            await pair_and_room(a, b, "durable")
            seqs = []
            for i in range(50):
                posted = await a.ok(w.Post(a.next_req(), "durable", f"o{i}", b"x%d" % i))
                assert isinstance(posted, w.Posted)
                seqs.append(posted.seq)
        relay.kill(signal.SIGKILL)  # no graceful shutdown: only what was committed survives
        relay.start()
        async with open_client(relay.port, bob, resume={"durable": 0}) as b2:
            ops = await b2.ops(50)
            assert [o.seq for o in ops] == seqs
            assert [o.body for o in ops] == [b"x%d" % i for i in range(50)]
        async with open_client(relay.port, alice) as a2:
            again = await a2.ok(w.Post(a2.next_req(), "durable", "o7", b"x7"))
            assert isinstance(again, w.Posted) and again.seq == seqs[7]


async def test_client_that_cannot_sign_for_a_fingerprint_gets_nothing(relay: RelayProcess) -> None:
    """Claiming Alice's keys without her private key authenticates nothing and reads nothing."""
    alice, bob, mallory = Identity(), Identity(), Identity()
    with trio.fail_after(20):
        async with open_client(relay.port, alice) as a, open_client(relay.port, bob) as b:
            await pair_and_room(a, b, "private")
            await b.ok(w.Post(b.next_req(), "private", "o1", b"for alice"))
        async with open_ws(relay.port) as ws:
            challenge = w.decode_relay_frame(await ws.get_message())
            assert isinstance(challenge, w.Challenge)
            transcript = w.hello_transcript(challenge.nonce, challenge.relay_key, alice.ed_pub,
                                            alice.x_pub, "evil", w.PROTOCOL_VERSION)
            forged = w.Hello(alice.ed_pub, alice.x_pub, "evil", w.PROTOCOL_VERSION,
                             mallory.key.sign(transcript).signature)
            for frame in (forged, w.Resume(1, {"private": 0}),
                          w.Post(2, "private", "o2", b"as alice"), w.GetRoster(3, "private")):
                await ws.send_message(w.encode_frame(frame))
                reply = w.decode_relay_frame(await ws.get_message())
                assert isinstance(reply, w.Error) and reply.code == "unauthenticated"
        async with open_client(relay.port, bob, resume={"private": 0}) as b:
            ops = await b.ops(1)
            assert [o.op_id for o in ops] == ["o1"]  # nothing was posted as Alice


async def test_non_member_can_neither_read_post_nor_see_presence(relay: RelayProcess) -> None:
    """Mallory, authenticated but outside the room, learns nothing and changes nothing."""
    alice, bob, mallory = Identity(), Identity(), Identity()
    with trio.fail_after(20):
        async with open_client(relay.port, mallory) as m:
            async with open_client(relay.port, alice) as a, open_client(relay.port, bob) as b:
                await pair_and_room(a, b, "closed")
                await a.ok(w.Post(a.next_req(), "closed", "o1", b"secret"))
                for frame in (w.Post(m.next_req(), "closed", "m1", b"spam"),
                              w.GetRoster(m.next_req(), "closed"),
                              w.Add(m.next_req(), "closed", mallory.ed_pub, mallory.x_pub,
                                    mallory.vouch("closed", mallory))):
                    reply = await m.request(frame)
                    assert isinstance(reply, w.Error) and reply.code == "not_a_member"
                resumed = await m.ok(w.Resume(m.next_req(), {"closed": 0}))
                assert isinstance(resumed, w.Resumed)
                assert (resumed.rooms, resumed.missing) == ([], ["closed"])
            # Alice and Bob went offline meanwhile; a round trip proves nothing was queued for us.
            listing = await m.ok(w.ListRooms(m.next_req()))
            assert isinstance(listing, w.RoomList) and listing.rooms == []
            assert m.pushes == []


async def test_marker_plaintext_never_reaches_relay_disk_or_log(relay: RelayProcess) -> None:
    """Only ciphertext crosses the relay: the marker is in no file under --data nor in stderr."""
    marker = b"MARKER-plaintext-7f3a9c"
    box = SecretBox(b"k" * 32)
    alice, bob = Identity(), Identity()
    with trio.fail_after(20):
        async with open_client(relay.port, alice) as a, open_client(relay.port, bob) as b:
            await pair_and_room(a, b, "sealed")
            for i in range(5):
                await a.ok(w.Post(a.next_req(), "sealed", f"o{i}", box.encrypt(marker)))
            assert [box.decrypt(o.body) for o in await b.ops(5)] == [marker] * 5
    relay.kill(signal.SIGTERM)
    files = [p for p in relay.data.rglob("*") if p.is_file()]
    assert any(p.name == "relay.db" for p in files)
    for path in [*files, relay.stderr_path]:
        assert marker not in path.read_bytes(), path
        assert marker.decode() not in path.read_bytes().decode("latin-1"), path


async def test_health_and_metrics_answer_plain_http(relay: RelayProcess) -> None:
    """GET /health is JSON with ok; GET /metrics is Prometheus text with the counters."""
    alice = Identity()
    with trio.fail_after(20):
        async with open_client(relay.port, alice) as a:
            await a.ok(w.ListRooms(a.next_req()))

            def get(path: str) -> bytes:
                url = f"http://127.0.0.1:{relay.port}{path}"
                with urllib.request.urlopen(url, timeout=5) as resp:
                    return bytes(resp.read())

            health = json.loads(await trio.to_thread.run_sync(get, "/health"))
            assert health["ok"] is True and health["connections"] == 1
            metrics = (await trio.to_thread.run_sync(get, "/metrics")).decode()
            assert "crosstalk_relay_connections 1" in metrics
            assert "# TYPE crosstalk_relay_ops_in_total counter" in metrics
            assert "crosstalk_relay_errors_total" in metrics


async def test_relay_key_persists_across_restarts(relay: RelayProcess) -> None:
    """The relay presents the same key after a restart, and the key file is 0600."""
    first = relay.pubkey
    relay.kill(signal.SIGTERM)
    relay.start()
    assert relay.pubkey == first
    assert (relay.data / "relay.key").stat().st_mode & 0o777 == 0o600


async def test_sigterm_stops_the_relay_cleanly(relay: RelayProcess) -> None:
    """SIGTERM ends the process with status 0 even with a client connected."""
    with trio.fail_after(20):
        async with open_ws(relay.port) as ws:
            await handshake(ws, Identity(), "d")
            status = await trio.to_thread.run_sync(relay.kill, signal.SIGTERM)
    assert status == 0


def _status(url: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "crosstalk", "relay", "status", "--relay", url, "--json"],
        capture_output=True, text=True, timeout=30, check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


async def test_relay_status_reports_reachable_and_unreachable(relay: RelayProcess) -> None:
    """`crosstalk relay status --json` says whether /health answers."""
    url = f"ws://127.0.0.1:{relay.port}"
    assert await trio.to_thread.run_sync(_status, url) == {"url": url, "reachable": True}
    relay.kill(signal.SIGTERM)
    assert await trio.to_thread.run_sync(_status, url) == {"url": url, "reachable": False}
