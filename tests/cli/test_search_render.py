"""What ``crosstalk search`` prints: the results, and a word when the disk kept some out."""

from __future__ import annotations

from crosstalk.cli.cmd_search import INCOMPLETE, answer

HIT = {"kind": "fact", "id": "f1", "room": "dev", "from": "ana", "snippet": "[gizmo] in may",
       "ts": 1_800_000_000.0}


def test_a_whole_search_prints_its_results_and_no_word_of_the_disk() -> None:
    shown, human = answer({"results": [HIT], "incomplete": False})
    assert shown == {"results": [HIT]}
    assert human.endswith("ana: [gizmo] in may  (f1)") and INCOMPLETE not in human


def test_a_search_the_full_disk_cut_short_says_so_both_ways() -> None:
    shown, human = answer({"results": [HIT], "incomplete": True})
    assert shown == {"results": [HIT], "incomplete": True}
    assert human.splitlines()[-1] == INCOMPLETE


def test_nothing_found_is_said() -> None:
    assert answer({"results": []}) == ({"results": []}, "Nothing found.")
