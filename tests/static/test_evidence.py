"""Run evidence read back and matched to today's source: keys that survive
edits above, comments and re-indentation; stale lines reported, not dropped;
lines `wrap` has rewritten found again through the unwrapped text."""

from __future__ import annotations

import json
import textwrap

import pytest
from evidence_util import entry, write_run

from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.front.evidence import (
    EvidenceError, code_key, load, match_file, read_run, static_function,
)

SRC = textwrap.dedent("""\
    import torch


    def log(loss, step):
        print(f"step {step}")
        value = float(loss)
        return value


    class Trainer:
        def step(self, batch):
            out = self.model(batch)
            if out.sum() > 0:
                return out.cpu()
            return float(out.mean())
""")


def _entries(src=SRC, path="t.py"):
    lines = src.splitlines()

    def at(text, function, op="aten._local_scalar_dense", direction="down"):
        n = next(i for i, ln in enumerate(lines, 1) if ln.strip() == text)
        return entry(path, n, text, op, direction, function)

    return at


def _load_entries(tmp_path, raw):
    run = write_run(tmp_path / "run.json", raw)
    return load([str(run)], tmp_path)


def _match(tmp_path, raw, text):
    ev = _load_entries(tmp_path, raw)
    return match_file(ev.for_file(str(tmp_path / "t.py")), text)


def test_each_line_is_found_where_it_is(tmp_path):
    at = _entries()
    fe = _match(tmp_path, [at("value = float(loss)", "log"), at("return out.cpu()", "Trainer.step", "aten._to_copy")],
                SRC)
    assert [(m.line, m.rewritten) for m in fe.matched] == [(6, False), (14, False)]
    assert not fe.stale


def test_lines_inserted_above_keep_the_evidence_matched(tmp_path):
    at = _entries()
    raw = [at("value = float(loss)", "log"), at("if out.sum() > 0:", "Trainer.step")]
    edited = SRC.replace("import torch\n", "import torch\nimport os\nimport sys\n\n\nX = 1\n")
    fe = _match(tmp_path, raw, edited)
    lines = edited.splitlines()
    assert [lines[m.line - 1].strip() for m in fe.matched] == ["value = float(loss)", "if out.sum() > 0:"]
    assert [m.line for m in fe.matched] == [11, 18]


def test_an_edited_line_is_stale_and_says_why(tmp_path):
    at = _entries()
    raw = [at("value = float(loss)", "log"), at("return out.cpu()", "Trainer.step", "aten._to_copy")]
    fe = _match(tmp_path, raw, SRC.replace("value = float(loss)", "value = float(loss.detach())"))
    assert [m.entry.text for m in fe.matched] == ["return out.cpu()"]
    assert len(fe.stale) == 1
    assert fe.stale[0].entry.text == "value = float(loss)"
    assert "no line of that text in log any more" in fe.stale[0].reason


def test_reindenting_and_a_trailing_comment_keep_the_key(tmp_path):
    at = _entries()
    raw = [at("value = float(loss)", "log")]
    edited = SRC.replace("        value = float(loss)", "        value  =  float(loss)  # noqa: XFA401")
    fe = _match(tmp_path, raw, edited)
    assert [m.line for m in fe.matched] == [6] and not fe.stale


def test_the_function_is_part_of_the_key(tmp_path):
    src = "def a(x):\n    y = float(x)\n\n\ndef b(x):\n    y = float(x)\n"
    raw = [entry("t.py", 2, "y = float(x)", function="b")]  # hint wrong: the function decides
    fe = _match(tmp_path, raw, src)
    assert [m.line for m in fe.matched] == [6]


def test_identical_lines_of_one_function_keep_their_order(tmp_path):
    src = "def f(a, b):\n    y = float(a)\n    y = float(a)\n"
    raw = [entry("t.py", 2, "y = float(a)", function="f"), entry("t.py", 3, "y = float(a)", function="f")]
    edited = "def f(a, b):\n    y = float(a)\n    z = 1\n    w = 2\n    y = float(a)\n"
    fe = _match(tmp_path, raw, edited)
    assert sorted(m.line for m in fe.matched) == [2, 5]


def test_nested_functions_and_comprehensions_use_the_finders_names():
    assert static_function("Trainer.fit.<locals>.step") == "Trainer.fit.step"
    assert static_function("f.<locals>.<listcomp>") == "f"
    assert static_function("<module>") == "<module>"
    assert static_function("<listcomp>") == "<module>"


def test_a_recorded_code_name_without_qualname_still_matches(tmp_path):
    raw = [entry("t.py", 14, "return out.cpu()", "aten._to_copy", function="step")]
    fe = _match(tmp_path, raw, SRC)
    assert [m.line for m in fe.matched] == [14]


def test_a_statement_over_several_lines_is_hot_as_a_whole(tmp_path):
    src = "def f(loss, n):\n    total = (n +\n             float(loss))\n    if loss:\n        pass\n"
    raw = [entry("t.py", 3, "float(loss))", function="f"), entry("t.py", 4, "if loss:", function="f")]
    fe = _match(tmp_path, raw, src)
    assert sorted(fe.hot) == [2, 3, 4]  # the if's header only, not its body
    assert "conversion" in fe.hot[2] and "truth" in fe.hot[4] and "count" not in fe.hot[2]


def test_a_line_wrap_rewrote_is_found_through_the_unwrapped_text(tmp_path):
    at = _entries()
    raw = [at("return out.cpu()", "Trainer.step", "aten._to_copy")]
    wrapped = wrap_source(SRC.encode(), "t.py").new
    assert wrapped is not None and b"xfer.cpu(" in wrapped
    text = wrapped.decode()
    fe = _match(tmp_path, raw, text)
    assert not fe.matched and len(fe.stale) == 1  # without the unwrapped text: stale
    ev = _load_entries(tmp_path, raw)

    def bare():
        return unwrap_source(wrapped, "t.py").new.decode()

    fe = match_file(ev.for_file(str(tmp_path / "t.py")), text, bare=bare)
    assert not fe.stale
    (m,) = fe.matched
    assert m.rewritten and "xfer.cpu(out" in text.splitlines()[m.line - 1]


def test_code_key_leaves_out_a_comment_but_not_a_hash_in_a_string():
    assert code_key("  x = f(a)   # noqa: XFA202") == "x = f(a)"
    assert code_key('x = "#" + y  # real') == 'x = "#" + y'
    assert code_key("foo(a,  # note") == "foo(a,"


# --- reading ---------------------------------------------------------------------------

def test_pageable_flags_and_lines_without_a_user_frame_are_no_evidence(tmp_path):
    raw = [entry("t.py", 6, "value = float(loss)", "pageable aten._to_copy", "up", "log"),
           entry("<unknown>", 0, "", "aten._to_copy", "down")]
    assert not _load_entries(tmp_path, raw).entries


def test_relative_paths_are_the_project_roots_when_the_run_was_made_elsewhere(tmp_path):
    run = write_run(tmp_path / "run.json", [entry("pkg/t.py", 1, "x")], root=tmp_path / "elsewhere")
    (e,) = read_run(str(run), tmp_path)
    assert e.file == str(tmp_path / "pkg" / "t.py")


def test_a_run_made_in_a_subfolder_of_the_project_is_relative_to_it(tmp_path):
    (tmp_path / "sub").mkdir()
    run = write_run(tmp_path / "run.json", [entry("t.py", 1, "x")], root=tmp_path / "sub")
    (e,) = read_run(str(run), tmp_path)
    assert e.file == str(tmp_path / "sub" / "t.py")


@pytest.mark.parametrize("content,says", [
    ("{", "not JSON"),
    (json.dumps({"rows": [], "meta": {}, "unwrapped": []}), "not a run file"),
    (json.dumps({"rows": [], "meta": {"kind": "run"}, "unwrapped": [{"line": 3, "op": "x"}]}), "missing key 'path'"),
    (json.dumps({"rows": [], "meta": {"kind": "run"}, "unwrapped": [{"path": "a.py", "line": -1, "op": "x"}]}),
     "'line'"),
    (json.dumps({"rows": [], "meta": {"kind": "run"}, "unwrapped": [{"path": "a.py", "line": 1, "op": 7}]}),
     "'op' must be a string"),
    (json.dumps({"rows": [], "meta": {"kind": "run"}, "unwrapped": {"a": 1}}), "must be a list"),
])
def test_a_bad_run_file_is_one_line_naming_it(tmp_path, content, says):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(EvidenceError) as ei:
        read_run(str(p), tmp_path)
    msg = str(ei.value)
    assert str(p) in msg and says in msg and "\n" not in msg


def test_a_missing_run_file_says_how_to_make_one(tmp_path):
    with pytest.raises(EvidenceError, match="no such run file.*xferaudit run"):
        read_run(str(tmp_path / "none.json"), tmp_path)
