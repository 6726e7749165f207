"""Requests that find no responder (status 503) against a scripted server: while a stream
elects a leader, or before a new consumer's interest has crossed a cluster's routes, the
server answers 503, meaning the request reached no one. Publishes, API requests and a scan's
batch requests are made again, backing off, for at most the storage's timeout in a row."""

from __future__ import annotations

import itertools
import json

import attrs
import pytest
import trio

from crosstalk.errors import StorageUnavailable
from relay.nats_layout import Outgoing
from relay.nats_store import NO_RESPONDERS_BACKOFF, NO_RESPONDERS_BACKOFF_MAX, TrioJetStream
from tests.relay.test_nats_conn import FakeServer, Published, connected

STREAM = "S"
NEXT = f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.c1"
TIMEOUT = 5.0
NO_RESPONDERS = b"NATS/1.0 503\r\n\r\n"


@attrs.define
class ElectingServer(FakeServer):
    """Answers the first ``unheard`` publishes to the stream and batch requests with 503,
    then as JetStream would: a publish with an ack, a consumer create (two messages
    pending), a batch request with both messages. ``asked`` holds the time of each publish
    or batch request."""

    unheard: int = 0
    asked: list[float] = attrs.Factory(list)

    def __attrs_post_init__(self) -> None:
        self.answer = self.answer_to

    def answer_to(self, pub: Published) -> bytes | None:
        if pub.subject.startswith("$JS.API.CONSUMER.CREATE."):
            return json.dumps({"name": "c1", "num_pending": 2}).encode()
        if pub.subject.startswith("$JS.API.CONSUMER.DELETE."):
            return b"{}"
        assert self.nursery is not None and pub.reply is not None
        self.asked.append(trio.current_time())
        self.nursery.start_soon(self.reply_to, pub)
        return None

    async def reply_to(self, pub: Published) -> None:
        assert pub.reply is not None
        [sid] = [sid for sid, subject in self.subs.items()
                 if subject == pub.reply
                 or (subject.endswith(".*") and pub.reply.startswith(subject[:-1]))]
        stream = self.streams[-1]
        if self.unheard:
            self.unheard -= 1
            await stream.send_all(b"HMSG %s %s %d %d\r\n%s\r\n" % (
                pub.reply.encode(), sid.encode(), len(NO_RESPONDERS), len(NO_RESPONDERS),
                NO_RESPONDERS))
        elif pub.subject != NEXT:
            ack = json.dumps({"stream": STREAM, "seq": 12}).encode()
            await stream.send_all(b"MSG %s %s %d\r\n%s\r\n" % (
                pub.reply.encode(), sid.encode(), len(ack), ack))
        else:
            for seq, left in ((7, 1), (9, 0)):
                reply = f"$JS.ACK.{STREAM}.c1.1.{seq}.{seq}.0.{left}".encode()
                body = b"op-%d" % seq
                await stream.send_all(b"MSG s.r.x.o %s %s %d\r\n%s\r\n" % (
                    sid.encode(), reply, len(body), body))


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


async def test_a_publish_is_made_again_while_no_one_takes_the_streams_messages(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Two 503s (no stream leader yet), then the ack: the publish returns its sequence,
    having been made three times, backing off (doubling) between them."""
    server = ElectingServer(unheard=2)
    async with connected(server) as conn:
        stored = await TrioJetStream(conn, STREAM, TIMEOUT).publish(
            Outgoing("s.r.x.o", b"op", {}), {"Nats-Msg-Id": "x"})
    assert stored == (12, False)
    assert gaps(server.asked) == pytest.approx([NO_RESPONDERS_BACKOFF, 2 * NO_RESPONDERS_BACKOFF])


async def test_a_publish_no_one_takes_fails_after_the_timeout(
    autojump_clock: trio.abc.Clock,
) -> None:
    """503s all along: StorageUnavailable once the timeout has passed since the first, not
    before, and at most one backoff step after."""
    server = ElectingServer(unheard=1_000)
    async with connected(server) as conn:
        with pytest.raises(StorageUnavailable, match="no JetStream answered"):
            await TrioJetStream(conn, STREAM, TIMEOUT).publish(Outgoing("s.r.x.o", b"op", {}),
                                                               {})
    assert TIMEOUT <= server.asked[-1] - server.asked[0] < TIMEOUT + NO_RESPONDERS_BACKOFF_MAX


async def test_a_scan_asks_again_while_its_consumer_has_no_responder(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Two 503s to the batch request, then the batch: the scan returns every message, having
    asked three times, backing off (doubling) between the asks."""
    server = ElectingServer(unheard=2)
    async with connected(server) as conn:
        scanned = await TrioJetStream(conn, STREAM, TIMEOUT).scan("s.r.x.o")
    assert [(m.seq, m.data) for m in scanned] == [(7, b"op-7"), (9, b"op-9")]
    assert gaps(server.asked) == pytest.approx([NO_RESPONDERS_BACKOFF, 2 * NO_RESPONDERS_BACKOFF])


async def test_a_scan_whose_consumer_never_answers_fails_after_the_timeout(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A consumer that stays without a responder (its server died with it): the scan gives
    up once the timeout has passed since the first 503, and not long after."""
    server = ElectingServer(unheard=1_000)
    async with connected(server) as conn:
        with pytest.raises(StorageUnavailable, match="503"):
            await TrioJetStream(conn, STREAM, TIMEOUT).scan("s.r.x.o")
    assert TIMEOUT <= server.asked[-1] - server.asked[0] < TIMEOUT + NO_RESPONDERS_BACKOFF_MAX
