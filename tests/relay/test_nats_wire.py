"""The NATS client protocol parser and encoders (relay/nats_wire.py), without a server."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.errors import LocalProtocolError
from relay import nats_wire as wire
from relay.nats_wire import Err, Info, Msg, NatsParser, NatsProtocolError, Ok, Ping, Pong


def parse(data: bytes, **kwargs: int) -> list[wire.Event]:
    parser = NatsParser(**kwargs)
    parser.receive_data(data)
    return parser.events_received()


def test_the_wire_module_does_no_io() -> None:
    """The parser is sans-IO: it imports no trio, socket, clock or randomness."""
    tree = ast.parse(Path(wire.__file__).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not names & {"trio", "socket", "time", "random", "os", "asyncio", "secrets"}


def test_info_gives_the_fields_a_client_needs() -> None:
    """INFO's JSON becomes an Info with the version, max payload and header support."""
    [info] = parse(b'INFO {"server_id":"S1","version":"2.15.1","max_payload":1048576,'
                   b'"headers":true,"connect_urls":["127.0.0.1:4223"],"extra":1}\r\n')
    assert info == Info("S1", "2.15.1", 1048576, True, ("127.0.0.1:4223",))


def test_one_line_frames_become_events_in_order() -> None:
    """PING, PONG, +OK and -ERR each give their event, in the order they came."""
    events = parse(b"PING\r\nPONG\r\n+OK\r\n-ERR 'Unknown Protocol Operation'\r\nping\r\n")
    assert events == [Ping(), Pong(), Ok(), Err("Unknown Protocol Operation"), Ping()]


def test_msg_carries_subject_sid_reply_and_payload() -> None:
    """MSG with and without a reply subject; the payload may hold CRLF and be empty."""
    events = parse(b"MSG a.b 7 4\r\nx\r\ny\r\nMSG a.c 8 _INBOX.1 0\r\n\r\n")
    assert events == [Msg("a.b", "7", None, b"x\r\ny"), Msg("a.c", "8", "_INBOX.1", b"")]


def test_hmsg_splits_headers_from_the_payload() -> None:
    """HMSG's header block and payload come apart at the announced header size."""
    block = b"NATS/1.0\r\nNats-Sequence: 42\r\n\r\n"
    frame = b"HMSG N.p.r.x.o 3 %d %d\r\n%sbody\r\n" % (len(block), len(block) + 4, block)
    [msg] = parse(frame)
    assert msg == Msg("N.p.r.x.o", "3", None, b"body", block)


def test_arguments_may_be_separated_by_tabs_and_runs_of_spaces() -> None:
    """The protocol allows spaces or tabs between arguments."""
    [msg] = parse(b"MSG  a\t9   2\r\nhi\r\n")
    assert msg == Msg("a", "9", None, b"hi")


def test_a_frame_split_anywhere_gives_the_same_events() -> None:
    """Fed one byte at a time, a stream parses as when fed whole."""
    data = (b'INFO {"version":"2.15.1"}\r\nMSG a 1 3\r\nabc\r\n'
            b"HMSG b 2 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n")
    parser = NatsParser()
    for i in range(len(data)):
        parser.receive_data(data[i:i + 1])
    assert parser.events_received() == parse(data)


@pytest.mark.parametrize("data", [
    b"BOGUS\r\n",
    b"\r\n",
    b"MSG a 1\r\n",  # no size
    b"MSG a 1 r x 3\r\n",  # too many arguments
    b"MSG a 1 -3\r\n",
    b"MSG a 1 1_0\r\n",  # int() would take it
    b"MSG a 1 3\r\nabcXY",  # the body is not followed by CRLF
    b"HMSG a 1 10 5\r\n",  # headers larger than the whole
    b"HMSG a 1 5\r\n",
    b"INFO [1]\r\n",
    b"INFO {not json\r\n",
    b'INFO {"max_payload":"big"}\r\n',
    b"INFO " + b"[" * 5000 + b"\r\n",  # nesting deep enough for a RecursionError
    b"PING now\r\n",
    b"MSG \xff 1 0\r\n\r\n",  # not UTF-8
    b"HMSG a 1 x 2\r\nhi\r\n",  # a header size that is not a number
    b"-ERR '\xff'\r\n",
])
def test_what_is_not_the_protocol_raises_the_protocol_error(data: bytes) -> None:
    """Each malformed frame raises NatsProtocolError, and nothing else."""
    with pytest.raises(NatsProtocolError):
        parse(data)


def test_a_message_larger_than_max_payload_is_refused() -> None:
    """A body announced past the server's max_payload is refused before it is buffered."""
    with pytest.raises(NatsProtocolError):
        parse(b"MSG a 1 11\r\n", max_payload=10)
    assert parse(b"MSG a 1 10\r\n0123456789\r\n", max_payload=10)


def test_a_control_line_past_the_limit_is_refused_even_unfinished() -> None:
    """A line that never ends cannot grow the buffer without bound."""
    parser = NatsParser()
    with pytest.raises(NatsProtocolError):
        parser.receive_data(b"MSG " + b"a" * (wire.MAX_CONTROL_LINE + 2))


def test_after_a_protocol_error_the_parser_refuses_everything() -> None:
    """The parser parks in ERROR: the connection is useless after a fault."""
    parser = NatsParser()
    with pytest.raises(NatsProtocolError):
        parser.receive_data(b"PING\r\nBOGUS\r\n")
    assert parser.events_received() == [Ping()]  # what came before the fault is kept
    assert parser.state is wire.ParserState.ERROR
    with pytest.raises(NatsProtocolError):
        parser.receive_data(b"PING\r\n")


def test_headers_parse_with_and_without_a_status() -> None:
    """A plain block gives its fields; a no-responders answer gives status 503."""
    plain = wire.parse_headers(b"NATS/1.0\r\nA: 1\r\nB:two words \r\nA: 3\r\n\r\n")
    assert plain == wire.Headers(None, "", {"A": "1", "B": "two words"})
    status = wire.parse_headers(b"NATS/1.0 503\r\n\r\n")
    assert (status.status, status.fields) == (503, {})
    timeout = wire.parse_headers(b"NATS/1.0 408 Request Timeout\r\n\r\n")
    assert (timeout.status, timeout.description) == (408, "Request Timeout")


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1\r\n\r\n", b"NATS/1.0\r\nA: 1\r\n", b"NATS/1.0 x\r\n\r\n",
    b"NATS/1.0\r\nno colon\r\n\r\n", b"NATS/1.0\r\n\xff: 1\r\n\r\n",
])
def test_broken_header_blocks_raise_the_protocol_error(raw: bytes) -> None:
    """A header block that does not parse raises NatsProtocolError."""
    with pytest.raises(NatsProtocolError):
        wire.parse_headers(raw)


def test_header_value_finds_one_key_without_parsing_the_rest() -> None:
    """The feed's shortcut reads one header as parse_headers would."""
    raw = wire.encode_headers({"Nats-Stream": "s", "Nats-Sequence": "17", "X": "y"})
    assert wire.header_value(raw, b"Nats-Sequence") == b"17"
    assert wire.header_value(raw, b"Nats-Seq") is None
    assert wire.header_value(raw, b"Missing") is None


def test_pub_and_hpub_frame_what_the_server_expects() -> None:
    """PUB without headers, HPUB with the header and total sizes."""
    assert wire.pub("a.b", b"hi") == b"PUB a.b 2\r\nhi\r\n"
    assert wire.pub("a.b", b"hi", reply="_INBOX.x.1") == b"PUB a.b _INBOX.x.1 2\r\nhi\r\n"
    block = b"NATS/1.0\r\nK: v\r\n\r\n"
    assert wire.pub("a", b"hi", headers={"K": "v"}) == (
        b"HPUB a %d %d\r\n%shi\r\n" % (len(block), len(block) + 2, block))
    assert wire.sub("a.>", "4") == b"SUB a.> 4\r\n"
    assert wire.unsub("4") == b"UNSUB 4\r\n"
    assert wire.unsub("4", 1) == b"UNSUB 4 1\r\n"
    assert wire.connect(name="n").startswith(b'CONNECT {"verbose":false')
    assert b'"headers":true,"no_responders":true' in wire.connect(name="n")


@pytest.mark.parametrize("call", [
    lambda: wire.pub("a b", b""),
    lambda: wire.pub("", b""),
    lambda: wire.pub("a", b"", reply="r\r\n"),
    lambda: wire.pub("a", b"", headers={"K": "v\r\nX: y"}),
    lambda: wire.pub("a", b"", headers={"K:": "v"}),
    lambda: wire.pub("a", b"", headers={"A": "1", "K": "v\r"}),
    lambda: wire.pub("a", b"", headers={"K\n": "v", "A": "1"}),
    lambda: wire.pub("a", b"", headers={"": "v"}),
    lambda: wire.sub("a", "1 2"),
])
def test_commands_that_would_break_the_framing_are_refused(call: object) -> None:
    """A subject, sid or header that would break a frame raises LocalProtocolError."""
    assert callable(call)
    with pytest.raises(LocalProtocolError):
        call()


def test_versions_parse_for_the_server_gate() -> None:
    """Versions compare as numbers; what does not parse is taken as too old."""
    assert wire.parse_version("2.15.1") == (2, 15, 1)
    assert wire.parse_version("2.11.0-beta.2") == (2, 11, 0)
    assert wire.parse_version("2.9") == (2, 9, 0)
    assert wire.parse_version("v2") == (0, 0, 0)


# --- fuzz -------------------------------------------------------------------------------------

FRAMES = st.one_of(
    st.sampled_from([b"PING\r\n", b"PONG\r\n", b"+OK\r\n", b"-ERR 'x'\r\n",
                     b'INFO {"version":"2.15.1","headers":true}\r\n']),
    st.builds(lambda s, p: b"MSG %s 1 %d\r\n%s\r\n" % (s, len(p), p),
              st.sampled_from([b"a", b"a.b.c", b"_INBOX.x.9"]), st.binary(max_size=40)),
    st.builds(lambda h, p: b"HMSG s 2 r %d %d\r\n%s%s\r\n" % (len(h), len(h) + len(p), h, p),
              st.sampled_from([b"NATS/1.0\r\n\r\n", b"NATS/1.0 503\r\n\r\n"]),
              st.binary(max_size=40)),
    st.binary(max_size=12),  # noise
)


def feed(chunks: list[bytes]) -> tuple[list[wire.Event], bool]:
    """Events and whether a protocol error was raised, feeding ``chunks`` until it is."""
    parser = NatsParser(max_payload=1024)
    for chunk in chunks:
        try:
            parser.receive_data(chunk)
        except NatsProtocolError:
            return parser.events_received(), True
    return parser.events_received(), False


# Lines that start like frames, so that random input reaches past the operation name.
OPS = st.sampled_from([b"INFO ", b"MSG ", b"HMSG ", b"-ERR ", b"PING", b"PONG", b"+OK", b"msg "])
PIECES = st.sampled_from([b" ", b"\t", b"1", b"12", b"a.b", b"{", b"}", b"[", b'"', b"\xff",
                          b"NATS/1.0", b"\r\n", b"\r"])
LINES = st.builds(lambda op, rest: op + b"".join(rest) + b"\r\n", OPS,
                  st.lists(st.one_of(PIECES, st.binary(max_size=4)), max_size=12))
NOISE = st.one_of(st.binary(max_size=300), st.lists(LINES, max_size=6).map(b"".join))


@given(NOISE)
def test_arbitrary_bytes_raise_nothing_but_the_protocol_error(data: bytes) -> None:
    """Any bytes parse, or raise NatsProtocolError (anything else escapes and fails this)."""
    feed([data])


@given(st.lists(FRAMES, max_size=8).map(b"".join), st.lists(st.integers(0, 400), max_size=6))
def test_input_split_anywhere_parses_as_whole(data: bytes, cuts: list[int]) -> None:
    """Cut anywhere into chunks, a byte stream gives the same events (and the same fault)."""
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert feed(chunks) == feed([data])
