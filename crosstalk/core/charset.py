"""Sets of characters as sorted lists of code point ranges, for the pathspec overlap search.

Theory of operation
-------------------
A :data:`CharSet` is a tuple of disjoint, sorted, inclusive ``(low, high)`` code point ranges that
do not touch. Intersection and difference walk two such lists once, so deciding whether two
character classes (``[a-f]``, ``[!x]``, ``?``) share a character is exact for all of Unicode and
costs the number of ranges, not characters. Everything here is a pure function of its arguments.
"""

from __future__ import annotations

CharSet = tuple[tuple[int, int], ...]
MAX_CODE = 0x10FFFF
EVERYTHING: CharSet = ((0, MAX_CODE),)


def normalise(ranges: list[tuple[int, int]]) -> CharSet:
    """Sort and merge ranges that overlap or touch."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def intersect(a: CharSet, b: CharSet) -> CharSet:
    """The characters in both sets."""
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if low <= high:
            out.append((low, high))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def subtract(a: CharSet, b: CharSet) -> CharSet:
    """The characters of ``a`` that are not in ``b``."""
    complement: list[tuple[int, int]] = []
    low = 0
    for b_low, b_high in b:
        if b_low > low:
            complement.append((low, b_low - 1))
        low = b_high + 1
    if low <= MAX_CODE:
        complement.append((low, MAX_CODE))
    return intersect(a, tuple(complement))


def pick(charset: CharSet) -> str:
    """One character of a non-empty set, a printable one if it has any (for readable examples)."""
    printable = intersect(charset, ((0x21, 0x7E), (0xA1, MAX_CODE)))
    return chr((printable or charset)[0][0])
