"""FEATURES lists every feature package once, and the seams keep each seam in that order."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from crosstalk.core.room import Applied
from crosstalk.features.feature import Feature, Plugs, op
from crosstalk.features.registry import FEATURES
from crosstalk.features.seams import Seams
from crosstalk.wire.control.spec import OpSpec

PACKAGES = Path(__file__).resolve().parents[2] / "crosstalk" / "features"


def test_every_feature_package_is_in_features_once() -> None:
    """A package that exports FEATURE but is missing from FEATURES (or listed twice) fails."""
    names = [feature.name for feature in FEATURES]
    assert len(names) == len(set(names)), names
    exported = {
        importlib.import_module(f"crosstalk.features.{p.name}").FEATURE
        for p in PACKAGES.iterdir()
        if (p / "__init__.py").exists()
    }
    assert exported <= set(FEATURES), exported - set(FEATURES)


async def test_seams_keep_features_in_order_and_refuse_a_second_op_of_one_name() -> None:
    """Appliers and local listeners run in the order features were added; an op name taken by
    an earlier feature is refused when the second one is plugged in."""
    told: list[str] = []

    def plugs(name: str) -> Plugs:
        async def listener(applied: list[Applied]) -> None:
            told.append(name)

        async def status() -> str:
            return f"{name} ok"

        async def handler(params: object) -> None:
            return None

        spec = OpSpec(f"op_{name}", object, (), "A test op.", reply=type(None))
        return Plugs(ops=(op(spec, handler),), local_listeners=(listener,),
                     status=status)

    seams = Seams()
    seams.add("a", plugs("a"))
    seams.add("b", plugs("b"))
    await seams.tell_local([])
    assert told == ["a", "b"]
    assert await seams.status() == {"a": "a ok", "b": "b ok"}
    assert seams.ops.names() == ["op_a", "op_b"]
    with pytest.raises(ValueError, match="registered twice"):
        seams.add("a again", plugs("a"))


def test_a_feature_is_a_frozen_value() -> None:
    """Feature values cannot be changed once made."""
    feature = FEATURES[0]
    assert isinstance(feature, Feature)
    with pytest.raises(AttributeError):
        feature.name = "other"  # type: ignore[misc]  # frozen: the assignment must fail
