"""A scan's pull consumer (relay/nats_store.py TrioJetStream.scan) against a scripted server:
a batch request that finds no responder for a while (a cluster's routes have not carried the
new consumer's interest to this server yet, or its leader is moving) is made again, within a
bound."""

from __future__ import annotations

import json

import attrs
import pytest
import trio

from crosstalk.errors import StorageUnavailable
from relay.nats_store import NO_RESPONDERS_BACKOFF, NO_RESPONDERS_PATIENCE, TrioJetStream
from tests.relay.test_nats_conn import FakeServer, Published, connected

STREAM = "S"
NEXT = f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.c1"


@attrs.define
class ConsumerServer(FakeServer):
    """Answers a consumer create (two messages pending) and its deletion; the first
    ``unheard`` batch requests get status 503, the next one both messages. ``asked`` holds
    the time of each batch request."""

    unheard: int = 0
    asked: list[float] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        self.answer = self.answer_to

    def answer_to(self, pub: Published) -> bytes | None:
        if pub.subject.startswith("$JS.API.CONSUMER.CREATE."):
            return json.dumps({"name": "c1", "num_pending": 2}).encode()
        if pub.subject.startswith("$JS.API.CONSUMER.DELETE."):
            return b"{}"
        if pub.subject == NEXT:
            self.asked.append(trio.current_time())
            assert self.nursery is not None and pub.reply is not None
            self.nursery.start_soon(self.deliver_batch, pub.reply)
        return None

    async def deliver_batch(self, reply: str) -> None:
        [sid] = [sid for sid, subject in self.subs.items() if subject == reply]
        stream = self.streams[-1]
        if self.unheard:
            self.unheard -= 1
            status = b"NATS/1.0 503\r\n\r\n"
            await stream.send_all(b"HMSG %s %s %d %d\r\n%s\r\n" % (
                reply.encode(), sid.encode(), len(status), len(status), status))
            return
        for seq, left in ((7, 1), (9, 0)):
            ack = f"$JS.ACK.{STREAM}.c1.1.{seq}.{seq}.0.{left}".encode()
            body = b"op-%d" % seq
            await stream.send_all(b"MSG s.r.x.o %s %s %d\r\n%s\r\n" % (
                sid.encode(), ack, len(body), body))


async def test_a_scan_asks_again_while_its_consumer_has_no_responder(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Two 503s, then the batch: the scan returns every message, having asked three times,
    backing off (doubling) between the asks."""
    server = ConsumerServer(unheard=2)
    async with connected(server) as conn:
        scanned = await TrioJetStream(conn, STREAM, timeout=5.0).scan("s.r.x.o")
    assert [(m.seq, m.data) for m in scanned] == [(7, b"op-7"), (9, b"op-9")]
    gaps = [b - a for a, b in zip(server.asked, server.asked[1:], strict=False)]
    assert gaps == pytest.approx([NO_RESPONDERS_BACKOFF, 2 * NO_RESPONDERS_BACKOFF])


async def test_a_scan_whose_consumer_never_answers_fails_within_its_bound(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A consumer that stays without a responder (its server died with it): the scan gives
    up once NO_RESPONDERS_PATIENCE has passed since the first 503, not before, and not long
    after (one backoff step at most)."""
    server = ConsumerServer(unheard=1_000)
    async with connected(server) as conn:
        with pytest.raises(StorageUnavailable, match="503"):
            await TrioJetStream(conn, STREAM, timeout=5.0).scan("s.r.x.o")
    waited = server.asked[-1] - server.asked[0]
    assert NO_RESPONDERS_PATIENCE <= waited < NO_RESPONDERS_PATIENCE + 0.25
