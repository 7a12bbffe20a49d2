"""Every rule row carries examples of what it matches and what it must not;
the finder must agree with each of them (Fixit's VALID/INVALID habit)."""

from __future__ import annotations

import pytest

from xferaudit.rules import available_packs, load_pack, table
from xferaudit.static.front.finder import find_in_source

RULES = [(name, rule) for name in available_packs() for rule in load_pack(name).rules]


def _prefix(pack: str) -> str:
    prelude = load_pack(pack).prelude
    return prelude.rstrip("\n") + "\n" if prelude else "import torch\n"


def _sites(pack: str, example: str):
    res = find_in_source(_prefix(pack) + example + "\n", "example.py", table())
    assert res.error is None, res.error
    return res.sites


@pytest.mark.parametrize(
    "pack,rule,example",
    [(p, r, ex) for p, r in RULES for ex in r.match],
    ids=lambda v: v if isinstance(v, str) else getattr(v, "id", None),
)
def test_match_example_is_exactly_one_site_of_its_row(pack, rule, example):
    sites = _sites(pack, example)
    assert len(sites) == 1, f"{rule.id}: {example!r} gave {[(s.rule_id, s.call) for s in sites]}"
    assert sites[0].rule_id == rule.id
    assert sites[0].line == _prefix(pack).count("\n") + 1 + example[: example.find(rule.method)].count("\n")


@pytest.mark.parametrize(
    "pack,rule,example",
    [(p, r, ex) for p, r in RULES for ex in r.ignore],
    ids=lambda v: v if isinstance(v, str) else getattr(v, "id", None),
)
def test_ignore_example_is_no_site_of_its_row(pack, rule, example):
    # `x.cpu().numpy()` is an ignore example of the numpy row: its `.cpu()` is
    # still a site, of another row.
    sites = _sites(pack, example)
    assert rule.id not in [s.rule_id for s in sites], f"{rule.id}: {example!r} gave {[(s.rule_id, s.call) for s in sites]}"


def test_every_torch_row_has_examples_both_ways():
    for rule in load_pack("torch").rules:
        assert rule.match, f"{rule.id} has no match examples"
        assert rule.ignore, f"{rule.id} has no ignore examples"
