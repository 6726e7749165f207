"""Relay frames survive encode/decode, and decoding rejects what does not match exactly."""

from __future__ import annotations

import json
from typing import Any, get_args

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire import relay as w
from crosstalk.wire.converter import converter

FINITE = st.floats(allow_nan=False, allow_infinity=False)


def _frames(union: Any) -> st.SearchStrategy[Any]:
    options = []
    for cls in get_args(union):
        attrs.resolve_types(cls)  # string annotations (PEP 563) hypothesis cannot infer from
        floats = {name: FINITE for name in ("ts", "expires_in") if name in cls.__annotations__}
        options.append(st.builds(cls, **floats))
    return st.one_of(options)


@given(_frames(w.ClientFrame))
def test_client_frames_round_trip(frame: w.ClientFrame) -> None:
    """Every client frame decodes to exactly what was encoded."""
    assert w.decode_client_frame(w.encode_frame(frame)) == frame


@given(_frames(w.RelayFrame))
def test_relay_frames_round_trip(frame: w.RelayFrame) -> None:
    """Every relay frame decodes to exactly what was encoded."""
    assert w.decode_relay_frame(w.encode_frame(frame)) == frame


def test_tag_names_the_frame() -> None:
    """The t field carries the documented name; request and reply may share one."""
    assert json.loads(w.encode_frame(w.GetRoster(1, "r")))["t"] == "roster"
    assert json.loads(w.encode_frame(w.Roster(1, "r", [])))["t"] == "roster"
    assert json.loads(w.encode_frame(w.SlotMsg("0001", "owner", 0, b"x")))["t"] == "slot_msg"


@pytest.mark.parametrize("text", [
    '{"t":"ack","room":"r","seq":"5"}',  # a number as a string is not coerced
    '{"t":"ack","room":7,"seq":5}',  # nor a number into a string
    '{"t":"ack","room":"r","seq":5.0}',
    '{"t":"ack","room":"r"}',
    '{"t":"slot_send","req":1,"slot":"1","index":0,"data":"***"}',
    '{"t":"resume","req":1,"cursors":{"r":"1"}}',
    '{"t":"resume","req":1,"cursors":[]}',
    '{"t":"slot_open","req":1,"work":5}',
    '{"t":"slot_join","req":1,"slot":"0001","work":null}',
    '{"t":"slot_open","req":1,"work":"***"}',
    '{"t":"work_ask","req":1,"slot":3}',
])
def test_mistyped_fields_are_bad_frames(text: str) -> None:
    """The strict shape check refuses anything the converter would otherwise coerce."""
    with pytest.raises(RemoteProtocolError) as caught:
        w.decode_client_frame(text)
    assert caught.value.hint == "bad_frame"


def test_a_slot_frame_from_before_proof_of_work_decodes_with_no_proof() -> None:
    """An older client's slot_open and slot_join (no ``work``) decode, with an empty proof."""
    assert w.decode_client_frame('{"t":"slot_open","req":3}') == w.SlotOpen(3, b"")
    joined = w.decode_client_frame('{"t":"slot_join","req":4,"slot":"0042"}')
    assert joined == w.SlotJoin(4, "0042", b"")
    assert w.decode_client_frame('{"t":"work_ask","req":5}') == w.WorkAsk(5, "")


@given(st.sampled_from(["slot_open", "slot_join", "work_ask", "work"]),
       st.dictionaries(st.sampled_from(["req", "slot", "work", "seed", "bits"]),
                       st.none() | st.booleans() | st.integers() | st.text(max_size=12)
                       | st.lists(st.integers(), max_size=2), max_size=5))
def test_proof_of_work_fields_decode_or_are_bad_frames(tag: str, fields: dict[str, Any]) -> None:
    """Any JSON in the proof-of-work frames' fields decodes to its model or is bad_frame."""
    text = json.dumps({"t": tag, **fields})
    decode = w.decode_relay_frame if tag == "work" else w.decode_client_frame
    try:
        frame = decode(text)
    except RemoteProtocolError as exc:
        assert exc.hint == "bad_frame"
        return
    assert w.tag_of(frame) == tag and frame.req == fields["req"]


def test_transcripts_are_domain_separated_and_unambiguous() -> None:
    """Different purposes and different field splits never produce the same bytes."""
    k = b"k" * 32
    assert w.hello_transcript(b"n", k, k, k, "d", 1) != w.ready_transcript(b"n", k, k, k)
    assert w.member_transcript("ab", b"c", b"") != w.member_transcript("a", b"bc", b"")



@given(st.one_of(_frames(w.ClientFrame), _frames(w.RelayFrame)))
def test_encode_frame_writes_what_the_tagged_union_writes(frame: Any) -> None:
    """Encoding by each class's own hook gives the tagged union's JSON byte for byte."""
    union = w.ClientFrame if isinstance(frame, get_args(w.ClientFrame)) else w.RelayFrame
    expected = json.dumps(converter.unstructure(frame, union), separators=(",", ":"))
    assert w.encode_frame(frame) == expected
