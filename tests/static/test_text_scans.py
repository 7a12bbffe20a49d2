"""The finder's text scans that stand in for a regex search: each gives what
the search gave, on random texts made of the words that matter to it."""

from __future__ import annotations

import random
import re

from xferaudit.static.front.kernels import _words, may_hold_kernels
from xferaudit.static.front.prefilter import _word_before
from xferaudit.static.front.suppress import _ANY_SUPPRESSION, _may_suppress


def _texts(pieces: list, n: int, longest: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        yield "".join(rng.choice(pieces) for _ in range(rng.randint(0, longest)))


def test_word_before_is_the_search_it_replaced():
    rx = re.compile(r"(\w+)[ \t]*$")
    rng = random.Random(0)
    for text in _texts(list("ab_1 \t\n.(é٣"), 30000, 12, 1):
        lo = rng.randint(0, len(text))
        hi = rng.randint(lo, len(text))
        m = rx.search(text, lo, hi)
        assert _word_before(text, lo, hi) == (m.group(1) if m else ""), (text, lo, hi)


def test_may_suppress_is_the_search_it_replaced():
    # (ASCII and not: `ı` and the Kelvin sign are letters the pattern's ignoring of case reaches)
    pieces = ["#", " ", "noqa", "NoQa", "nOQA", "xferaudit", "XferAudit", ":", "ignore", "\n", "x", "ı", "K", "no"]
    hits = 0
    for text in _texts(pieces, 30000, 8, 2):
        want = _ANY_SUPPRESSION.search(text) is not None
        assert _may_suppress(text) == want, text
        hits += want
    assert hits > 1000


class _Kernels:
    def top_modules(self):
        return frozenset({"triton", "cuda"})


def test_may_hold_kernels_is_the_search_it_replaced():
    kernels = _Kernels()
    rx = _words(kernels.top_modules())
    pieces = ["from", "import", " ", "\t", "\n", "triton", "cuda", "x", ".", "fromx", "\r", "#", "_", "as"]
    hits = 0
    for text in _texts(pieces, 30000, 10, 3):
        want = rx.search(text) is not None
        assert may_hold_kernels(text, kernels) == want, repr(text)
        hits += want
    assert hits > 200
