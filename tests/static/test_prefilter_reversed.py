"""The prefilter's search for called names runs over the reversed text
(xferaudit/static/front/prefilter.py, ``_Reversed``): it must keep exactly the
lines the forward search keeps, names that end another name included
(``new_tensor(`` / ``tensor(``, ``device_get(`` / ``get(``)."""

from __future__ import annotations

import random
import re
from pathlib import Path

from xferaudit.config import load_config
from xferaudit.static.front import prefilter
from xferaudit.static.front.source import split_lines
from xferaudit.wrapform import GENERIC


def _forward(text: str, lines: list, rules) -> list:
    """candidate_lines with the forward pattern of the same names (the reference)."""
    key = (id(rules), None)
    prefilter._table_patterns(rules, None)
    table, (calls, bare, fnames) = prefilter._CANDIDATE_RX[key]
    assert type(calls) is prefilter._Reversed
    words = set(GENERIC)
    for r in rules.rules:
        words |= {r.method, r.wrapper} | {a.rsplit(".", 1)[-1] for a in r.aliases}
    forward = re.compile("(?:" + prefilter._trie(words) + r")\s*\(")
    prefilter._CANDIDATE_RX[key] = (table, (forward, bare, fnames))
    try:
        return prefilter.candidate_lines(text, lines, rules)
    finally:
        prefilter._CANDIDATE_RX[key] = (table, (calls, bare, fnames))


def test_reversed_search_keeps_the_forward_lines():
    rules = load_config(Path(__file__).parent).table()
    pieces = ["to", "tolist", "new_tensor", "tensor", "device_get", "get", "x", "_", ".", "(", " ", "\n", "\t",
              "cpu", "cuda", "1", "é", "cupy_set", "set", "#", "'", "as", "@"]
    rng = random.Random(7)
    texts = ["x.new_tensor(1)\ny_tensor(2)\nz.tensor (3)\n", "a.to\n(dev)\n_to(x)\nto(x)\n", "éto(1)\n1to(2)\n",
             "device_get(x)\nxdevice_get(x)\n.get (x)\n"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    kept = 0
    for text in texts:
        lines = split_lines(text)
        got = prefilter.candidate_lines(text, lines, rules)
        assert got == _forward(text, lines, rules), text
        kept += bool(got)
    assert kept > 100  # (the texts do hold calls of the names)
    assert prefilter.candidate_lines(texts[0], split_lines(texts[0]), rules) == [1, 3]
    assert prefilter.candidate_lines(texts[1], split_lines(texts[1]), rules) == [1, 4]
