"""The converter's special cases that are declared at import and built on first use."""

from __future__ import annotations

import attrs

from crosstalk.wire.converter import converter, rename_fields, tagged_union


@attrs.frozen
class Ping:
    n: int


@attrs.frozen
class Pong:
    text: str


@attrs.frozen
class Carrier:
    """A model with a field of the union's type: its generated hook captures the union's."""

    frame: Ping | Pong


@attrs.frozen
class Renamed:
    from_: str
    to: str


Frame = Ping | Pong
TAGS = {Ping: "ping", Pong: "pong"}


def test_a_tagged_union_round_trips_through_a_hook_taken_before_its_first_use() -> None:
    """A union declared with ``tagged_union`` carries its tag both ways, also through a hook
    generated for an enclosing model before the union was ever used (it captured the stand-in)."""
    tagged_union(Frame, tag_generator=TAGS.__getitem__, tag_name="t")
    carrier_in = converter.get_structure_hook(Carrier)
    carrier_out = converter.get_unstructure_hook(Carrier)

    assert carrier_out(Carrier(Ping(3))) == {"frame": {"n": 3, "t": "ping"}}
    assert carrier_in({"frame": {"t": "pong", "text": "hi"}}, Carrier) == Carrier(Pong("hi"))
    assert converter.unstructure(Pong("x"), Frame) == {"text": "x", "t": "pong"}
    assert converter.structure({"t": "ping", "n": 1}, Frame) == Ping(1)


def test_renamed_fields_travel_under_their_wire_names_both_ways() -> None:
    """``rename_fields`` puts ``from_`` on the wire as ``from`` and, with ``structure``, reads
    it back from there."""
    rename_fields(Renamed, structure=True, from_="from")

    assert converter.unstructure(Renamed("ana", "ben")) == {"from": "ana", "to": "ben"}
    assert converter.structure({"from": "ana", "to": "ben"}, Renamed) == Renamed("ana", "ben")
