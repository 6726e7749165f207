"""The pairing word list and how words are chosen from random bytes."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.words import BYTES_PER_WORD, WORDS, choose_words, is_word
from crosstalk.errors import LocalProtocolError

# Words that sound like another English word in some common accent, or are said two ways. The
# list must contain none of them (not merely one of each pair), so that whatever spelling a
# listener writes down is either the listed word or obviously not a word on the list.
HOMOPHONES = """
ant aunt bare bear beach beech beet beat berry bury blue blew bored board bowl bole
bread bred break brake buy by bye cell sell cent scent cereal serial chili chilly coarse
course colonel kernel creak creek dear deer dew due die dye doe dough ewe you fair fare fir
fur flea flee flour flower for four fort fought gate gait hair hare hall haul heal heel hear
here hole whole horse hoarse hour our idle idol key quay knight night knot not know no
lead led leak leek made maid mail male main mane meat meet moose mousse none nun oar ore
one won pail pale pain pane pair pear pare pause paws peace piece peak peek plain plane plum
plumb pole poll pray prey rain reign raise rays read reed real reel right write ring wring
road rode role roll root route rose rows sail sale sea see seam seem sew sow so sole soul
some sum son sun stair stare stake steak steal steel sweet suite tail tale tea tee tide
tied toe tow vain vein waist waste wait weight way weigh weak week wood would yoke yolk
pasta pastor panda pander tuba tuber lava larva llama lama hawk hock dawn don stork stalk
petal pedal diner dinar coral choral ferry fairy merry marry mare mayor golf gulf tray
trey ball bawl fleece fleas suede swayed pearl purl soar sore roar raw purr per wave waive
mule mewl geyser geezer fawn faun carrot carat toucan beetle pigeon pidgin cart kart lens
lends white wight shore sure atom adam raisin celery salary pendant pendent build billed
""".split()

OFFENSIVE = """
kill gun bomb drug dope weed crack bitch bastard damn hell slave ass tit cock dick pussy
beaver cougar tart hooker slut whore fag dyke retard gypsy nazi
""".split()


def test_the_list_has_512_words_so_two_bytes_choose_without_bias() -> None:
    """At least 512 words, and their number divides 65536, so a 16-bit value mod it is fair."""
    assert len(WORDS) >= 512
    assert 2 ** (8 * BYTES_PER_WORD) % len(WORDS) == 0


def test_every_word_is_short_lowercase_and_distinct() -> None:
    """Every word is 3 to 7 ASCII lowercase letters, and no word appears twice."""
    assert all(re.fullmatch(r"[a-z]{3,7}", word) for word in WORDS)
    assert len(set(WORDS)) == len(WORDS)


def test_no_word_is_a_prefix_of_another() -> None:
    """No word starts another word, so a word is recognised as soon as it is complete.

    In sorted order a prefix sorts right before the words it starts, so neighbours suffice.
    """
    ordered = sorted(WORDS)
    clashes = [(a, b) for a, b in itertools.pairwise(ordered) if b.startswith(a)]
    assert clashes == []


def test_no_word_has_a_common_homophone() -> None:
    """No word on the list sounds like another word (checked against a list of known pairs)."""
    assert sorted(set(WORDS) & set(HOMOPHONES)) == []


def test_no_word_is_offensive() -> None:
    """None of a list of offensive words (or words with an offensive slang sense) is used."""
    assert sorted(set(WORDS) & set(OFFENSIVE)) == []


def test_no_word_is_a_number_word() -> None:
    """Number words would be confused with the digits of the slot."""
    numbers = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
    assert sorted(set(WORDS) & numbers) == []


def test_is_word_accepts_only_listed_lowercase_words() -> None:
    """is_word is exact: listed words yes, case variants and strangers no."""
    assert is_word(WORDS[0])
    assert not is_word(WORDS[0].upper())
    assert not is_word("xylophone")


def test_choose_words_maps_bytes_to_words_by_index() -> None:
    """Each big-endian pair of bytes picks WORDS[value mod 512]."""
    assert choose_words(b"\x00\x00\x01\xff\x02\x00\x00\x05", 4) == (
        WORDS[0],
        WORDS[511],
        WORDS[0],
        WORDS[5],
    )


@pytest.mark.parametrize(("size", "count"), [(7, 4), (9, 4), (8, 6), (0, 0)])
def test_choose_words_refuses_entropy_of_the_wrong_size(size: int, count: int) -> None:
    """The caller must pass exactly two bytes per word (and ask for at least one word)."""
    with pytest.raises(LocalProtocolError):
        choose_words(b"\x00" * size, count)


@given(st.binary(min_size=12, max_size=12))
def test_choose_words_always_returns_listed_words(entropy: bytes) -> None:
    """Any 12 random bytes give six words from the list."""
    words = choose_words(entropy, 6)
    assert len(words) == 6
    assert all(is_word(word) for word in words)
