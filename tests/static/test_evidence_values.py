"""The value layer on run evidence: on a line a run saw crossing, a value the
file does not place counts as a device tensor, in the categories the run's op
can come from; values the file shows on the host never do."""

from __future__ import annotations

import textwrap

from xferaudit import opforms
from xferaudit.static.front.finder import find_in_source

SCALAR = opforms.site_categories("aten._local_scalar_dense", "down")
FORMAT = opforms.site_categories("Tensor.__format__", "down")


def _implicit(src: str, hot: dict) -> list:
    res = find_in_source(textwrap.dedent(src), "t.py", evidence=hot)
    return [(s.line, s.rule, s.label) for s in res.sites if s.implicit]


PARAMS = """\
    def log(loss, step):
        print(f"loss {loss}")
        if loss > 10:
            raise ValueError
        return float(loss)
"""


def test_parameters_plain_analysis_cannot_place_are_not_sites_without_evidence():
    assert _implicit(PARAMS, {}) == []


def test_on_evidence_a_parameter_crossing_is_a_site_of_the_runs_category():
    got = _implicit(PARAMS, {2: FORMAT, 3: SCALAR, 5: SCALAR})
    assert got == [(2, "XFA403", "format(loss)"), (3, "XFA402", "truth(loss > 10)"), (5, "XFA401", "float(loss)")]


def test_a_line_not_seen_crossing_stays_as_the_proof_leaves_it():
    assert _implicit(PARAMS, {5: SCALAR}) == [(5, "XFA401", "float(loss)")]


def test_an_assumption_of_another_category_than_the_ops_is_dropped():
    src = """\
        def f(x):
            print(float(x))
    """
    assert _implicit(src, {2: FORMAT}) == []  # a print was seen; float(x) would be a scalar read
    assert _implicit(src, {2: SCALAR}) == [(2, "XFA401", "float(x)")]


def test_a_proven_site_is_kept_whatever_the_evidence_says():
    src = """\
        import torch
        t = torch.ones(2).cuda()
        print(float(t))
    """
    assert _implicit(src, {3: FORMAT}) == [(3, "XFA401", "float(t)")]


def test_values_the_file_shows_on_the_host_are_never_taken_for_device_tensors():
    src = """\
        import torch
        def f(x):
            h = torch.zeros(3)
            n = len(x)
            return float(h.sum()) + float(n) + float(x)
    """
    assert _implicit(src, {5: SCALAR}) == [(5, "XFA401", "float(x)")]


def test_a_compound_statement_is_hot_by_its_header_only():
    src = """\
        def f(x, y):
            if x:
                print(y)
    """
    assert _implicit(src, {2: SCALAR}) == [(2, "XFA402", "truth(x)")]


def test_an_attribute_and_a_dict_entry_are_placed_by_the_run_too():
    src = """\
        class Trainer:
            def step(self, batch):
                out = self.model(batch["x"])
                return float(self.scale * out["loss"])
    """
    got = _implicit(src, {4: SCALAR})
    assert [(ln, code) for ln, code, _ in got] == [(4, "XFA401")]
