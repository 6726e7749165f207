"""The mutation script's mutants are all valid: each one's text is in the product exactly once,
and planting it changes a file that still compiles (so each one switches a bug on)."""

from __future__ import annotations

import pytest

from tests.sim.mutate import MUTANTS, ROOT, Mutant, check


def test_ten_mutants_with_distinct_names() -> None:
    assert len(MUTANTS) >= 10
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert any("not yet in the roster" in m.why for m in MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_plants(mutant: Mutant) -> None:
    planted = check(mutant)
    assert planted != (ROOT / mutant.path).read_text()
    compile(planted, mutant.path, "exec")
