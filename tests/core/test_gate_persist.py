"""The gate's values survive the one converter, so the shell can persist them as JSON."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.attention import AttentionEntry, AttentionSummary
from crosstalk.core.held import HeldItem
from crosstalk.core.levels import Level, TrustSettings
from crosstalk.core.mute import MuteState
from crosstalk.core.triage import Decision, Intent
from crosstalk.wire.converter import converter

keys = st.text(min_size=1, max_size=12)
levels = st.sampled_from(Level)
times = st.floats(min_value=0.0, max_value=1e10, allow_nan=False)

trust_settings = st.builds(
    TrustSettings,
    default=levels,
    local=levels,
    rooms=st.dictionaries(keys, levels, max_size=4),
    people=st.dictionaries(keys, levels, max_size=4),
    room_people=st.dictionaries(keys, st.dictionaries(keys, levels, min_size=1, max_size=3)),
)
mute_states = st.builds(MuteState, st.dictionaries(keys, times, max_size=4))
entries = st.builds(
    AttentionEntry, item=keys, source=keys, ts=times, decision=st.sampled_from(Decision)
)
held_items = st.builds(
    HeldItem,
    item=keys,
    sender=keys,
    label=keys,
    session=st.none() | keys,
    room=st.none() | keys,
    ts=times,
    intent=st.sampled_from(Intent),
    decision=st.sampled_from(Decision),
    words=st.booleans(),
)


@given(st.one_of(trust_settings, mute_states, entries, held_items))
def test_gate_values_round_trip_through_json(
    value: TrustSettings | MuteState | AttentionEntry | HeldItem,
) -> None:
    """Unstructure, dump to JSON, load and structure again gives an equal value."""
    text = json.dumps(converter.unstructure(value))
    assert converter.structure(json.loads(text), type(value)) == value


def test_attention_summary_json_has_the_cli_contract_fields() -> None:
    """`crosstalk attention --json` fields are reached_last_hour, held and by_source."""
    summary = AttentionSummary(reached_last_hour=3, held=1, by_source={"marie": 3})
    assert converter.unstructure(summary) == {
        "reached_last_hour": 3,
        "held": 1,
        "by_source": {"marie": 3},
    }
