"""The lines a kernel's names are called or named on (xferaudit/static/front/kernels.py,
``_name_lines``): the boundary before a name tested on each match gives the lines
of the ``\\b`` pattern, names that end or begin another name included."""

from __future__ import annotations

import random

from xferaudit.static.front.kernels import _lines, _name_lines


def _reference(text: str, names, tail: str) -> list:
    import re

    return _lines(text, r"\b(?:" + "|".join(map(re.escape, sorted(names))) + ")" + tail)


def test_name_lines_are_the_boundary_pattern_lines():
    names_sets = [frozenset({"jit", "autotune"}), frozenset({"tl", "triton", "t"}), frozenset({"cute", "cutlass"})]
    pieces = ["jit", "autotune", "tl", "triton", "t", "cute", "cutlass", "x", "_", ".", "(", " ", "\n", "@", "1",
              "é", "xjit", "tl_"]
    rng = random.Random(3)
    texts = ["@triton.jit\ndef k(x):\n    tl.load(x)\n", "xtl.load(x)\n_tl(x)\ntl (x)\n", "étl(x)\n1jit(x)\n"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    hits = 0
    for names in names_sets:
        for tail in (r"\s*\(", r"\b"):
            for text in texts:
                got = _name_lines(text, names, tail)
                assert got == _reference(text, names, tail), (text, names, tail)
                hits += bool(got)
    assert hits > 1000
    assert _name_lines(texts[1], frozenset({"tl"}), r"\s*\(") == [3]
    # a name that is no ASCII identifier keeps the pattern's own boundary
    assert _name_lines("a.b(x)\n", frozenset({"a.b"}), r"\s*\(") == _reference("a.b(x)\n", {"a.b"}, r"\s*\(") == [1]
