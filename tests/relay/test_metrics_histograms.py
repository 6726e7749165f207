"""The relay's /metrics parses whole with prometheus_client's parser, counters and gauges as
before, and its latency histograms count the ops a real relay process committed and pushed."""

from __future__ import annotations

import urllib.request

import trio
from nacl.secret import SecretBox
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from crosstalk.wire import relay as w
from relay.metrics import LATENCY_BUCKETS, Histogram, Latencies, histograms_text
from tests.relay.client import Identity, open_client, pair_and_room
from tests.relay.process import RelayProcess

OPS = 5
HISTOGRAMS = ("crosstalk_relay_op_commit_seconds", "crosstalk_relay_push_seconds")


def _get_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return bytes(resp.read()).decode()


def _samples(text: str) -> dict[str, tuple[str, list[Sample]]]:
    """Family name -> (type, samples), parsed by prometheus_client (raises on invalid text)."""
    return {f.name: (f.type, f.samples) for f in text_string_to_metric_families(text)}


def _value(samples: list[Sample], name: str, **labels: str) -> float:
    (value,) = [s.value for s in samples if s.name == name and s.labels == labels]
    return value


async def test_metrics_parse_and_histograms_count_committed_and_pushed_ops(
    relay: RelayProcess,
) -> None:
    """Five posts to a room of two: five commits and five pushes observed, buckets cumulative."""
    box = SecretBox(b"k" * 32)
    alice, bob = Identity(), Identity()
    with trio.fail_after(20):
        async with open_client(relay.port, alice) as a, open_client(relay.port, bob) as b:
            await pair_and_room(a, b, "timed")
            for i in range(OPS):
                await a.ok(w.Post(a.next_req(), "timed", f"o{i}", box.encrypt(b"x")))
            assert len(await b.ops(OPS)) == OPS  # bob's connection got every push
            text = await trio.to_thread.run_sync(_get_metrics, relay.port)
    families = _samples(text)
    # The hand-written counters and gauges keep their names and types.
    assert families["crosstalk_relay_connections"][0] == "gauge"
    assert families["crosstalk_relay_ops_in"][0] == "counter"
    assert _value(families["crosstalk_relay_ops_in"][1], "crosstalk_relay_ops_in_total") >= OPS
    assert "crosstalk_relay_errors" in families
    for name in HISTOGRAMS:
        kind, samples = families[name]
        assert kind == "histogram", name
        buckets = [s for s in samples if s.name == f"{name}_bucket"]
        assert [s.labels["le"] for s in buckets] == [*map(repr, LATENCY_BUCKETS), "+Inf"]
        counts = [s.value for s in buckets]
        assert counts == sorted(counts), name  # cumulative
        count = _value(samples, f"{name}_count")
        assert count >= OPS and counts[-1] == count, (name, count)
        assert _value(samples, f"{name}_sum") > 0, name


def test_a_histogram_counts_each_value_in_the_first_bucket_that_holds_it() -> None:
    """Prometheus's ``le``: a value on a bound is in that bound's bucket; past all, in +Inf."""
    hist = Histogram((0.1, 1.0))
    hist.observe(0.1)
    hist.observe(0.5, n=3)
    hist.observe(7.0)
    assert hist.cumulative() == [("0.1", 1), ("1.0", 4), ("+Inf", 5)]
    assert hist.count == 5
    assert abs(hist.sum - (0.1 + 1.5 + 7.0)) < 1e-9


def test_empty_histograms_render_valid_text() -> None:
    """Before any op: both histograms, zero counts, still parsed whole."""
    families = _samples(histograms_text(Latencies()))
    for name in HISTOGRAMS:
        kind, samples = families[name]
        assert kind == "histogram"
        assert _value(samples, f"{name}_count") == 0
