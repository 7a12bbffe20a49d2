"""The gate on a real CUDA device (skipped without one): a pageable
``non_blocking`` upload at a line nothing names is held to the line's
``pageable = 0`` (a pinned one passes), and a compiled function the budget
does not hold fails the run (issue 40, part 1).

Run on the GPU machine (torch + CUDA, no libcst needed):
    python -m pytest tests/runtime/test_gate_gpu.py -v -rs
"""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from xferaudit.runtime.runs.budget import load_budget  # noqa: E402
from xferaudit.runtime.runs.runner import run_path  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

UPLOAD = """\
import torch
x = torch.ones(1 << 16){pin}
for _ in range(3):
    y = x.to("cuda", non_blocking=True)
torch.cuda.synchronize()
"""


def _run(tmp_path, name, text, budget):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / name).write_text(textwrap.dedent(text))
    return run_path(str(tmp_path / name), [], output=str(tmp_path / "r.json"), quiet=True,
                    budget=load_budget(budget))


@pytest.mark.parametrize("pin, problems", [("", ["pageable"]), (".pin_memory()", [])])
def test_a_lines_pageable_zero_holds_on_cuda(tmp_path, pin, problems):
    res = _run(tmp_path, "up.py", UPLOAD.format(pin=pin), {"up.py:4": {"crossings": 3, "pageable": 0}})
    assert res.exit_code == 0
    assert [p.kind for p in res.problems] == problems
    (u,) = [u for u in res.report.unwrapped if u.line == 4]
    assert (u.count, u.pageable) == (3, 3 if not pin else 0)


def test_a_compiled_function_not_in_the_budget_fails_on_cuda(tmp_path):
    res = _run(tmp_path, "c.py", """\
        import torch
        f = torch.compile(lambda t: t * 2 + 1)
        x = torch.ones(8, device="cuda")
        for _ in range(3):
            f(x)
        torch.cuda.synchronize()
    """, {"other.py:f:x.cpu": 1})
    (new,) = [p for p in res.problems if p.what == "launches"]  # (the compiler's own crossings aside)
    assert (new.kind, new.measured) == ("unexpected", 3)
    again = _run(tmp_path, "c.py", (tmp_path / "c.py").read_text(), {new.site: 0})
    assert [(p.kind, p.measured) for p in again.problems if p.what == "launches"] == [("over", 3)]
