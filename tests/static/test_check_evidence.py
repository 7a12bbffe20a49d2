"""`xferaudit check --evidence RUN.json` (and `evidence = [...]` in the config):
every line a run saw crossing outside a wrapper is a finding, even where the
code shows no device; its message says so and names the run file; stale
evidence is reported; the findings cache never mixes the two."""

from __future__ import annotations

import json
import textwrap

import pytest
from evidence_util import TRAIN, entry, entry_at, line_of, project, write_run

from xferaudit.cli import main

def _line(text: str) -> int:
    return line_of(text)


@pytest.fixture
def proj(tmp_path, monkeypatch):
    project(tmp_path, monkeypatch)
    raw = [
        entry_at(tmp_path, "train.py", 'print(f"loss {loss}")', "Tensor.__format__", function="log"),
        entry_at(tmp_path, "train.py", "if loss > 10:", function="log"),
        entry_at(tmp_path, "train.py", "return float(loss)", function="log", count=3, nbytes=12),
        entry_at(tmp_path, "train.py", "y = x.cpu()", "aten._to_copy", function="other", nbytes=48),
        entry_at(tmp_path, "train.py", "n = x[mask]", "aten.index.Tensor", function="other"),
        entry_at(tmp_path, "train.py", "same = torch.equal(x, y)", "aten.equal", function="other"),
    ]
    write_run(tmp_path / "run.json", raw)
    return tmp_path


def _check(capsys, *argv):
    rc = main(["check", "--no-cache", *argv])
    return rc, capsys.readouterr().out


def _found(out: str) -> list:
    return [(int(ln.split(":")[1]), ln.split()[1]) for ln in out.splitlines() if ln.startswith("train.py:")]


def test_without_evidence_only_the_plain_site_is_found(proj, capsys):
    rc, out = _check(capsys, "train.py")
    assert _found(out) == [(_line("y = x.cpu()"), "XFA202")]


def test_every_line_the_run_saw_is_a_finding_and_nothing_else(proj, capsys):
    rc, out = _check(capsys, "--evidence", "run.json", "train.py")
    assert rc == 1
    assert _found(out) == [
        (_line('print(f"loss {loss}")'), "XFA403"), (_line("if loss > 10:"), "XFA402"),
        (_line("return float(loss)"), "XFA401"), (_line("y = x.cpu()"), "XFA202"), (_line("n = x[mask]"), "XFA501"),
        (_line("same = torch.equal(x, y)"), "XFA501"),
    ]
    conv = next(ln for ln in out.splitlines() if "XFA401" in ln)
    assert "seen crossing at run time (aten._local_scalar_dense, down, 3 times, 12 bytes; run.json)" in conv
    assert "wrap it: `_xfer.float(loss, site=...)` or run `xferaudit wrap --from run.json`" in conv
    mask = next(ln for ln in out.splitlines() if ln.startswith(f"train.py:{_line('n = x[mask]')}:"))
    assert "`n = x[mask]` was seen crossing at run time, outside every wrapper (aten.index.Tensor, down, once, " \
           "4 bytes; run.json); no call on this line makes it: name its statement (end it with `# xferaudit: " \
           "site=...`, or run `xferaudit wrap --from run.json`)" in mask
    assert mask.startswith(f"train.py:{_line('n = x[mask]')}:5: XFA501")  # at the code, not the indent


def test_after_wrap_from_every_line_the_run_saw_is_named(proj, capsys):
    assert main(["wrap", "-q", "--from", "run.json"]) == 0  # (the two with no call: their statements)
    capsys.readouterr()
    rc, out = _check(capsys, "--evidence", "run.json", "train.py")
    assert (rc, _found(out)) == (0, [])
    assert "XFA502" not in out and "XFA501" not in out  # the rewritten lines are found again, not stale


def test_an_edited_line_is_stale_evidence(proj, capsys):
    (proj / "train.py").write_text(TRAIN.replace("return float(loss)", "return float(loss.detach())"))
    rc, out = _check(capsys, "--evidence", "run.json", "--select", "XFA5", "train.py")
    stale = [ln for ln in out.splitlines() if "XFA502" in ln]
    assert len(stale) == 1
    assert stale[0].startswith(f"train.py:{_line('return float(loss)')}:1: XFA502 stale evidence: the run "
                               "(run.json) saw `return float(loss)` crossing")
    assert "record a new run" in stale[0]


def test_edits_above_keep_every_finding_on_its_line(proj, capsys):
    (proj / "train.py").write_text("import os\n\n\n" + TRAIN)
    rc, out = _check(capsys, "--evidence", "run.json", "train.py")
    got = _found(out)
    assert [ln - 3 for ln, _ in got] == [_line('print(f"loss {loss}")'), _line("if loss > 10:"),
                                         _line("return float(loss)"), _line("y = x.cpu()"), _line("n = x[mask]"),
                                         _line("same = torch.equal(x, y)")]
    assert "XFA502" not in out


def test_a_deleted_file_under_the_paths_is_stale(proj, capsys):
    write_run(proj / "run2.json", [entry("gone.py", 4, "y = x.cpu()", "aten._to_copy")])
    rc, out = _check(capsys, "--evidence", "run2.json", ".")
    assert rc == 1
    assert "gone.py:4:1: XFA502 stale evidence:" in out and "the file is gone" in out


def test_the_config_names_evidence_and_a_noqa_accepts_a_line(proj, capsys):
    (proj / "pyproject.toml").write_text("[project]\nname = 'p'\n\n[tool.xferaudit]\nevidence = [\"run.json\"]\n")
    src = TRAIN.replace("same = torch.equal(x, y)", "same = torch.equal(x, y)  # noqa: XFA501")
    (proj / "train.py").write_text(src)
    rc, out = _check(capsys, "train.py")
    codes = [code for _, code in _found(out)]
    assert codes == ["XFA403", "XFA402", "XFA401", "XFA202", "XFA501"]
    assert "XFA502" not in out  # a trailing comment keeps the key


def test_a_missing_configured_run_file_is_an_error(proj, capsys):
    (proj / "pyproject.toml").write_text("[tool.xferaudit]\nevidence = [\"nope.json\"]\n")
    assert main(["check", "train.py"]) == 2
    err = capsys.readouterr().err
    assert "nope.json: no such run file" in err and err.count("\n") == 1


def test_json_output_carries_the_evidence_findings(proj, capsys):
    rc, out = _check(capsys, "--evidence", "run.json", "--format", "json", "train.py")
    recs = json.loads(out)
    assert [r["code"] for r in recs].count("XFA501") == 2
    assert any("seen crossing at run time" in r["message"] and "run.json" in r["message"] for r in recs)


def test_the_cache_never_mixes_findings_with_and_without_evidence(proj, capsys):
    assert main(["check", "train.py"]) == 1
    assert "seen crossing" not in capsys.readouterr().out
    assert main(["check", "--evidence", "run.json", "train.py"]) == 1
    assert "XFA501" in capsys.readouterr().out
    assert main(["check", "train.py"]) == 1
    out = capsys.readouterr().out
    assert "XFA501" not in out and "seen crossing" not in out and "Found 1 finding." in out


def test_the_rule_pages_document_the_new_codes(capsys):
    assert main(["rule", "XFA501"]) == 0
    out = capsys.readouterr().out
    assert "seen-crossing-at-run-time" in out and "--evidence" in out
    assert main(["rule", "XFA502"]) == 0
    assert "stale-evidence" in capsys.readouterr().out


def test_check_with_evidence_needs_neither_torch_nor_libcst(proj):
    """The pre-commit hook's path: the run file is plain JSON; libcst only when a
    line was rewritten by wrap (not here)."""
    import subprocess
    import sys

    code = textwrap.dedent("""
        import sys, importlib.abc

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "libcst"):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, Block())
        from xferaudit.cli import main
        rc = main(["check", "--no-cache", "--evidence", "run.json", "train.py"])
        print(rc, "torch" in sys.modules, "libcst" in sys.modules)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=proj)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "1 False False"
    assert "XFA501" in p.stdout


def test_a_line_wrap_broke_over_several_lines_keeps_its_evidence(tmp_path, monkeypatch, capsys):
    src = ("def step(model, batch, device_for_batch):\n"
           "    loss = model(batch.to(device_for_batch, non_blocking=True)).mean().sum()\n"
           "    return loss\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "train.py").write_text(src)
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / "run.json", [entry("train.py", 2, src.splitlines()[1], "aten._to_copy", "up", "step")])
    assert main(["wrap", "-q", "--from", "run.json"]) == 0
    wrapped = (tmp_path / "train.py").read_text()
    assert len(wrapped.splitlines()) > len(src.splitlines()) + 2  # broken as black breaks it
    rc, out = _check(capsys, "--evidence", "run.json", "train.py")
    assert rc == 0 and "All checks passed!" in out
    (tmp_path / "train.py").write_text("import os\n\n" + wrapped)  # and an edit above, after the wrap
    rc, out = _check(capsys, "--evidence", "run.json", "train.py")
    assert rc == 0, out


def test_add_noqa_with_evidence_makes_the_next_check_pass(proj, capsys):
    stale = entry("train.py", 2, "import numpy", function="<module>")  # a line gone since the run
    data = json.loads((proj / "run.json").read_text())
    write_run(proj / "run.json", data["unwrapped"] + [stale])
    rc, out = _check(capsys, "--evidence", "run.json", "train.py")
    codes = {f.split()[1] for f in out.splitlines() if f.startswith("train.py:")}
    assert rc == 1 and {"XFA401", "XFA402", "XFA403", "XFA501", "XFA502"} <= codes
    assert main(["check", "--no-cache", "--evidence", "run.json", "--add-noqa", "train.py"]) == 0
    assert "# noqa: XFA501" in (proj / "train.py").read_text()
    rc, out = _check(capsys, "--evidence", "run.json", "train.py")
    assert rc == 0 and "All checks passed!" in out, out


CLASS_BODY = textwrap.dedent("""\
    import torch

    t = torch.ones(2).cuda()


    class Config:
        scale = float(t)
        if t > 0:
            flag = True
        size = settings.loss.item()
""")


def test_implicit_reads_in_a_class_body_are_sites_and_evidence_finds_their_wrapped_form(tmp_path, monkeypatch,
                                                                                           capsys):
    project(tmp_path, monkeypatch)
    (tmp_path / "cfg.py").write_text(CLASS_BODY)
    rc, out = _check(capsys, "cfg.py")
    found = {(int(f.split(":")[1]), f.split()[1]) for f in out.splitlines() if f.startswith("cfg.py:")}
    assert {(7, "XFA401"), (8, "XFA402")} <= found  # proven: t is on the device
    # a run saw `float(loss)`-like reads of a value the file does not place: wrapped forms, not XFA501
    raw = [entry("cfg.py", 7, "scale = float(t)", function="Config"),
           entry("cfg.py", 10, "size = settings.loss.item()", function="Config")]
    write_run(tmp_path / "run.json", raw)
    rc, out = _check(capsys, "--evidence", "run.json", "cfg.py")
    assert "XFA501" not in out, out
    assert {(7, "XFA401"), (10, "XFA202")} <= {(int(f.split(":")[1]), f.split()[1]) for f in out.splitlines()
                                                if f.startswith("cfg.py:")}
