"""The run-to-source loop end to end, on the simulated device: a program that
crosses in every category, none of it wrapped, is recorded by `xferaudit run`; `wrap --from`
wraps every line the run saw (the crossings on function parameters too, which
plain `wrap` leaves alone; a mask read and a list-index upload, which no call
makes, by naming their statements); a second run sees no unnamed crossing and
the same totals; `check --evidence` on the original reports those lines and
nothing else, and nothing after the apply; edits above keep the evidence, an
edited line is stale."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("libcst")

from xferaudit.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "bench" / "evidence_program"  # (bench/gpu_evidence.py runs the same on a GPU)
METRICS = (PROGRAM / "metrics.py").read_text()
EVERY = (PROGRAM / "every.py").read_text()

#: Each line the run must see crossing, worked out by hand: (file, text) ->
#: (op, direction, events, copies, bytes). Two steps; w is 4x3 float32 (48 B).
EXPECTED = {
    ("metrics.py", 'print(f"loss {loss}")'): ("aten._local_scalar_dense", "down", 2, 2, 8),  # 0-dim: .item()
    ("metrics.py", "if loss > 100:"): ("aten._local_scalar_dense", "down", 2, 2, 2),  # a bool, 1 B
    ("metrics.py", "if math.isnan(loss):"): ("aten._local_scalar_dense", "down", 2, 2, 8),
    ("metrics.py", "return float(loss)"): ("aten._local_scalar_dense", "down", 2, 2, 8),
    ("every.py", "w = torch.ones(4, 3).to(dev)"): ("aten._to_copy", "up", 1, 1, 48),
    ("every.py", "idx = torch.tensor([0, 2], device=dev)"): ("aten.lift_fresh", "up", 1, 1, 16),  # 2 int64
    ("every.py", "kept = w[mask]"): ("aten.index.Tensor", "down", 2, 2, 8),  # an int32 count each
    ("every.py", "host = w.cpu()"): ("aten._to_copy", "down", 2, 2, 96),
    ("every.py", "rows = w[[0, 1]]"): ("aten.lift_fresh", "up", 2, 2, 32),  # the index, 2 int64
    ("every.py", "n = loss.item()"): ("aten._local_scalar_dense", "down", 2, 2, 8),
    ("every.py", "buf.copy_(w)"): ("aten.copy_", "down", 1, 1, 48),
}
#: The lines no call makes: `wrap` names their statements with a site comment.
NO_CALL = {("every.py", "kept = w[mask]"): "count(w[mask])", ("every.py", "rows = w[[0, 1]]"): "upload(w[[0,1]])"}


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "metrics.py").write_text(METRICS)
    (tmp_path / "every.py").write_text(EVERY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def record(proj: Path, out: str) -> dict:
    """`xferaudit run -o OUT every.py` in `proj`: the unmodified program counted,
    the guard on at count level for the whole run; the run file it wrote."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-m", "xferaudit", "run", "-q", "-o", out, "every.py"], cwd=proj,
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    data = json.loads((proj / out).read_text())
    assert data["meta"]["kind"] == "run"
    return data


def _text(proj: Path, path: str, line: int) -> str:
    return (proj / path).read_text().splitlines()[line - 1].strip()


def _totals(data: dict) -> Counter:
    """Copies and bytes per direction, wrapped and not."""
    out: Counter = Counter()
    for r in data["rows"]:
        for d, cell in r["by_direction"].items():
            out[(d, "copies")] += cell["copies"]
            out[(d, "bytes")] += cell["bytes"]
    for u in data["unwrapped"]:
        out[(u["direction"], "copies")] += u["copies"]
        out[(u["direction"], "bytes")] += u["bytes"]
    return +out


def _findings(out: str) -> list:
    return [(ln.split(":")[0], int(ln.split(":")[1]), ln.split()[1]) for ln in out.splitlines()
            if ln.endswith(")") or " XFA" in ln]


def test_run_apply_run_again_check(proj, capsys):
    first = record(proj, "run.json")
    seen = {(u["path"], u["text"]): (u["op"], u["direction"], u["count"], u["copies"], u["bytes"])
            for u in first["unwrapped"]}
    assert seen == EXPECTED
    for u in first["unwrapped"]:
        assert _text(proj, u["path"], u["line"]) == u["text"]
    original = {p: (proj / p).read_text() for p in ("metrics.py", "every.py")}

    # check --evidence on the original: those lines, and nothing else
    assert main(["check", "--no-cache", "--evidence", "run.json", "."]) == 1
    out = capsys.readouterr().out
    lines = {(p, ln) for p, ln, _ in _findings(out)}
    assert lines == {(u["path"], u["line"]) for u in first["unwrapped"]}
    assert out.count("seen crossing at run time") == len(EXPECTED)

    # plain wrap leaves the crossings on report()'s parameters alone
    plain = proj.parent / (proj.name + "_plain")
    plain.mkdir()
    for p in original:
        shutil.copy(proj / p, plain / p)
    assert main(["wrap", "-q", str(plain)]) == 0
    capsys.readouterr()
    assert (plain / "metrics.py").read_text() == METRICS
    assert "_xfer.cpu(w, site=" in (plain / "every.py").read_text()

    # wrap --from: every line, the two no call makes by naming their statements
    assert main(["wrap", "--from", "run.json"]) == 0
    err = capsys.readouterr().err
    assert "11 lines the run saw crossing: 11 wrapped" in err
    assert "left as it is" not in err
    metrics = (proj / "metrics.py").read_text()
    for form in ("_xfer.read(loss, site=", "_xfer.bool(loss > 100, site=", "_xfer.reads(math.isnan, loss, site=",
                 "return _xfer.float(loss, site="):
        assert form in metrics
    every = (proj / "every.py").read_text()
    for form in ("_xfer.to(torch.ones(4, 3), dev, site=", "_xfer.tensor([0, 2], device=dev, site=",
                 "_xfer.cpu(w, site=", "_xfer.item(loss, site=", "_xfer.copy_(buf, w, site="):
        assert form in every
    for (_, text), label in NO_CALL.items():
        assert f'{text}  # xferaudit: site=":main:{label}"' in every

    # a second run: the same totals, no unnamed crossing; the two statements are rows of their names
    second = record(proj, "run2.json")
    assert second["unwrapped"] == []
    assert _totals(second) == _totals(first)
    rows = {r["site"]: (r["kind"], r["crossings"], r["bytes"]) for r in second["rows"]}
    for key, label in NO_CALL.items():
        assert rows[f"every.py:main:{label}"] == ("statement",) + EXPECTED[key][2:5:2]

    # check --evidence after the apply: clean
    assert main(["check", "--no-cache", "--evidence", "run.json", "."]) == 0
    out = capsys.readouterr().out
    assert "XFA502" not in out and "XFA4" not in out

    # back to the original; edits above keep the evidence matched
    for p, text in original.items():
        (proj / p).write_text("import os\nimport sys\n\n\n" + text)
    assert main(["check", "--no-cache", "--evidence", "run.json", "."]) == 1
    out = capsys.readouterr().out
    assert {(p, ln - 4) for p, ln, _ in _findings(out)} == {(u["path"], u["line"]) for u in first["unwrapped"]}
    assert "XFA502" not in out

    # an edit beside the crossing keeps it (found by its name: metrics.py:...:float(loss))
    (proj / "metrics.py").write_text(original["metrics.py"].replace("return float(loss)", "return float(loss) * 2"))
    assert main(["check", "--no-cache", "--evidence", "run.json", "--select", "XFA502", "."]) == 0
    capsys.readouterr()
    # an edit of the crossing itself is stale
    (proj / "metrics.py").write_text(original["metrics.py"].replace("return float(loss)", "return float(loss.mean())"))
    assert main(["check", "--no-cache", "--evidence", "run.json", "--select", "XFA502", "."]) == 1
    out = capsys.readouterr().out
    (stale,) = [ln for ln in out.splitlines() if "XFA502" in ln]
    assert stale.startswith("metrics.py:10:1: XFA502 stale evidence:") and "`return float(loss)`" in stale
    assert os.path.exists(proj / "run.json")


def test_the_gpu_benchs_wrapped_twin_is_what_wrap_from_writes(tmp_path):
    """bench/gpu_evidence.py runs bench/evidence_program/wrapped/ on a GPU, where
    there is no libcst: it must be what `wrap --from` writes from a run today."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import gpu_evidence
    finally:
        sys.path.remove(str(REPO / "bench"))
    gpu_evidence.regen(tmp_path)
    for f in gpu_evidence.FILES:
        assert (tmp_path / f).read_text() == (gpu_evidence.WRAPPED / f).read_text(), f
