"""The pairing word list: 512 short, distinct, easy-to-say English words of our own.

Theory of operation. A pairing code is a 4-digit slot and 4 words (6 for ``link``). With 512
words each word carries 9 bits, so four words carry 36 bits: an online attacker gets one guess per
single-use slot, so a guess succeeds about once in 68 billion tries.

How the list was chosen (so that people read it aloud and type it without mistakes):

* 3 to 7 letters, lowercase a-z only, concrete nouns (animals, food, things, places, nature);
* no word is a prefix of another, so typing can complete a word as soon as it is unambiguous;
* no word with a common homophone in any major accent (no ``bear``/``bare``, ``pasta``/``pastor``,
  ``hawk``/``hock``), none with two pronunciations (``bow``), none with British/American
  spelling variants (``harbor``), no number words (they collide with the digits of the slot);
* nothing offensive, nor with a common offensive slang sense.

Words are chosen from random bytes passed in (two bytes per word). 512 divides 65536, so taking
a 16-bit value modulo 512 is unbiased.
"""

from __future__ import annotations

from crosstalk.errors import LocalProtocolError

BYTES_PER_WORD = 2

# fmt: off
WORDS: tuple[str, ...] = (
    "acorn", "almond", "amber", "anchor", "anvil", "ape", "apple", "apron", "archer", "arena",
    "arrow", "artist", "aspen", "attic", "author", "autumn", "azure", "bacon", "badger", "bag",
    "baker", "bamboo", "banana", "banjo", "banner", "barber", "barge", "barley", "barn", "barrel",
    "basil", "basket", "bat", "beacon", "belt", "bench", "binder", "birch", "bison", "black",
    "blimp", "boat", "bobcat", "bolt", "book", "boot", "bottle", "box", "branch", "breeze",
    "brick", "bridge", "bronze", "brook", "broom", "brown", "brush", "bucket", "bugle", "bun",
    "bus", "butter", "button", "cabin", "cable", "cactus", "cake", "calf", "camel", "camera",
    "canal", "canary", "candle", "candy", "canoe", "canyon", "card", "carp", "castle", "cave",
    "cello", "chain", "chair", "chalk", "chapel", "cheese", "chef", "cherry", "chess", "chimp",
    "chrome", "cider", "city", "clam", "cliff", "clock", "cloud", "clover", "clown", "cobalt",
    "cobra", "coffee", "coin", "colt", "comb", "comet", "condor", "cookie", "copper", "corn",
    "cotton", "cow", "crab", "crane", "crater", "crayon", "cream", "crow", "cup", "curry", "daisy",
    "dancer", "delta", "denim", "desk", "dock", "doctor", "dog", "donkey", "dragon", "drum",
    "duck", "duke", "dune", "dusk", "dust", "eagle", "earth", "echo", "eel", "egg", "egret", "elk",
    "elm", "ember", "emu", "engine", "eraser", "falcon", "fan", "farm", "fence", "fern", "ferret",
    "fiddle", "field", "fiesta", "fig", "finch", "flag", "flame", "flute", "folder", "forest",
    "fork", "fox", "frog", "frost", "fudge", "funnel", "galaxy", "garden", "garlic", "gazebo",
    "gecko", "ginger", "globe", "glove", "goat", "goblin", "gold", "goose", "grape",
    "grass", "gravy", "green", "grove", "guitar", "gull", "hammer", "harp", "hazel", "helmet",
    "hen", "heron", "hill", "hippo", "hockey", "honey", "hook", "hornet", "hotel", "hut", "igloo",
    "indigo", "iris", "iron", "ivory", "ivy", "jackal", "jade", "jaguar", "jar", "jeep", "jelly",
    "jester", "jigsaw", "judge", "judo", "jug", "jungle", "kale", "karate", "kayak", "kazoo",
    "kettle", "king", "kite", "kitten", "kiwi", "koala", "ladder", "lagoon", "lake", "lamb",
    "lamp", "lantern", "lark", "leaf", "lemon", "lemur", "lever", "lilac", "lily", "lime",
    "linen", "lion",
    "lizard", "lock", "locust", "lodge", "lotus", "macaw", "magnet", "magpie", "mango", "maple",
    "marble", "marker", "market", "maroon", "marsh", "mask", "meadow", "melon", "mesa", "meteor",
    "mill", "mink", "mint", "mirror", "mitten", "mole", "monkey", "moon", "mosaic", "moss", "moth",
    "mouse", "mud", "muffin", "mug", "museum", "nacho", "nail", "navy", "nectar", "needle", "net",
    "newt", "ninja", "noodle", "noon", "nurse", "nylon", "oak", "oasis", "oat", "oboe", "ocean",
    "olive", "onion", "onyx", "opal", "orange", "orbit", "orchid", "organ", "otter", "oven", "owl",
    "oyster", "paddle", "paint", "palace", "pan", "parade", "parcel", "park", "parrot", "pastry",
    "peach", "peanut", "pebble", "pencil", "pepper", "perch", "pesto", "piano", "pickle", "pig",
    "pike", "pillow", "pilot", "pine", "pipe", "pirate", "piston", "pizza", "planet", "plaza",
    "plume", "pocket", "poet", "pollen", "polo", "pond", "pony", "poppy", "port", "potato",
    "prawn", "puddle", "puffin", "puma", "puppy", "purple", "puzzle", "python", "quail", "queen",
    "quilt", "quiver", "rabbit", "radio", "radish", "raft", "rake", "ranch", "ranger", "raven",
    "reef", "rhino", "ribbon", "rice", "ridge", "ripple", "river", "robin", "robot", "rocket",
    "rodeo", "rope", "ruby", "rugby", "ruler", "rust", "saddle", "safari", "salad", "salmon",
    "salsa", "sand", "satin", "scarf", "school", "scout", "shark", "shed", "sheep", "shelf",
    "shield", "shovel", "shrimp", "silk", "silver", "singer", "sitar", "sketch", "skunk", "sky",
    "sled", "slope", "sloth", "snail", "snake", "snow", "soccer", "sock", "sofa", "soil", "soup",
    "spider", "spiral", "sponge", "spoon", "spring", "sprout", "squash", "squid", "stamp", "star",
    "stone", "stool", "store", "storm", "stream", "studio", "sugar", "summer", "summit", "sunset",
    "sushi", "swamp", "swan", "syrup", "table", "taco", "tango", "taxi", "teal", "teapot",
    "temple", "tennis", "tent", "thrush", "ticket", "tiger", "toast", "toffee", "tofu", "tomato",
    "topaz", "torch", "towel", "tower", "toy", "tram", "tree", "trophy", "trout", "truck", "tulip",
    "tundra", "tunnel", "turkey", "turnip", "turtle", "tuxedo", "tweed", "twig", "valley",
    "velvet", "viking", "violet", "violin", "viper", "vole", "wafer", "waffle", "wagon", "wallet",
    "walnut", "walrus", "wasp", "weasel", "wheat", "willow", "window", "winter", "wizard", "wolf",
    "wombat", "wool", "worm", "yak", "yellow", "yodel", "yoga", "zebra", "zigzag", "zipper",
)
# fmt: on

_WORD_SET = frozenset(WORDS)


def is_word(word: str) -> bool:
    """Whether ``word`` (already lowercased) is on the list."""
    return word in _WORD_SET


def choose_words(entropy: bytes, count: int) -> tuple[str, ...]:
    """Pick ``count`` words from ``count * BYTES_PER_WORD`` random bytes, without bias.

    Args:
        entropy: random bytes drawn by the caller (``nacl.utils.random``).
        count: how many words (4 for ``room``, 6 for ``link``).

    Raises:
        LocalProtocolError: ``entropy`` is not exactly ``count * BYTES_PER_WORD`` bytes.
    """
    if count < 1 or len(entropy) != count * BYTES_PER_WORD:
        raise LocalProtocolError(f"choosing {count} words takes {count * BYTES_PER_WORD} bytes")
    chunks = (entropy[i : i + BYTES_PER_WORD] for i in range(0, len(entropy), BYTES_PER_WORD))
    return tuple(WORDS[int.from_bytes(chunk, "big") % len(WORDS)] for chunk in chunks)
