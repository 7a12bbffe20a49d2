"""Fuzzing the loaders: saved reports, baselines, budgets and the config, each
valid JSON or TOML holding hostile values (huge, negative, fractional or
missing counts, NaN, 5,000 digits, strings where numbers go, deep nesting,
control characters). Every command must answer 0 or 2 with one line naming
the file: never a traceback, never exit 1 (which CI reads as findings).

The commands run in-process, so the examples stay cheap; max_examples is tuned
to keep the file's run short."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xferaudit.cli import main
from xferaudit.runtime.runs.budget import BudgetError, load_budget


class Raw(str):
    """A token written into the JSON text as it is (1e400, 5,000 digits, NaN)."""


RAW = [Raw("1e400"), Raw("-1e400"), Raw("7" * 5000), Raw("1" + "0" * 400), Raw("NaN"), Raw("Infinity"),
       Raw("[" * 3000 + "]" * 3000), Raw("-0"), Raw("1.5e3")]
HOSTILE_INTS = [-7, -1, 0, 1, 2**63 - 1, 2**63, 2**64, 10**400]

scalars = st.one_of(
    st.integers(-10**6, 10**6), st.sampled_from(HOSTILE_INTS), st.floats(), st.booleans(), st.none(),
    st.text(max_size=12), st.sampled_from(["\n::error::x", "\x1b[2J", "a\rb"]), st.sampled_from(RAW),
)
values = st.recursive(scalars, lambda ch: st.lists(ch, max_size=3)
                      | st.dictionaries(st.text(max_size=6), ch, max_size=3), max_leaves=6)
counts = st.one_of(st.integers(0, 50), st.integers(0, 50), values)
names = st.one_of(st.text(max_size=20), st.sampled_from(["a.py:f:x.to", "\n::error::pwn", "\x1b[31m"]), values)


def row():
    return st.fixed_dictionaries(
        {"site": names, "kind": names, "direction": st.sampled_from(["up", "down", "none", "d2d"]) | names,
         "calls": counts, "crossings": counts, "bytes": counts},
        optional={"by_direction": st.one_of(values, st.dictionaries(
            st.sampled_from(["up", "down", "d2d", "none", "x"]),
            st.one_of(values, st.fixed_dictionaries({"calls": counts, "bytes": counts})), max_size=3))},
    )


def one_report(depth: int):
    optional = {
        "meta": st.one_of(values, st.fixed_dictionaries({}, optional={
            "rank": counts, "world_size": counts, "steps": counts, "note": names, "counting": values})),
        "launches": st.one_of(values, st.lists(st.fixed_dictionaries(
            {"site": names, "launches": counts}, optional={"nodes": counts}), max_size=2)),
        "unwrapped": st.one_of(values, st.lists(st.fixed_dictionaries(
            {"path": names, "line": counts, "op": names, "direction": names, "count": counts,
             "bytes": counts}), max_size=2)),
        "timeline": values, "steps": counts, "format": st.sampled_from(["xferaudit.report"]) | values,
    }
    if depth:
        optional["ranks"] = st.lists(one_report(depth - 1), max_size=3)
        optional["world_size"] = counts
    return st.fixed_dictionaries({"rows": st.one_of(st.lists(row(), max_size=3), values)}, optional=optional)


def dump(v) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {dump(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(dump(x) for x in v) + "]"
    return json.dumps(v)


def toml_value(v) -> str:
    if isinstance(v, Raw):
        return {"NaN": "nan", "Infinity": "inf", "-1e400": "-inf", "1e400": "inf"}.get(v, "1" if "[" in v else v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return '"none"'
    if isinstance(v, float):
        return "nan" if v != v else "inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"


def call(*argv) -> int:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    assert rc in (0, 2), (argv, rc, err.getvalue()[-500:])
    assert "Traceback" not in err.getvalue()
    if rc == 2:
        assert err.getvalue().startswith("xferaudit: error: "), err.getvalue()[-500:]
    text = out.getvalue()
    if "--format" not in argv:  # text output: no raw control characters from the file
        assert "\x1b" not in text and "\r" not in text
    return rc


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
GOOD = {"rows": [{"site": "a.py:f:x.to", "kind": "move", "direction": "up", "calls": 2, "crossings": 2,
                  "bytes": 8, "by_direction": {"up": {"calls": 2, "bytes": 8}}}], "meta": {"rank": 1}}


@FUZZ
@given(data=one_report(1))
def test_report_diff_merge_budget_never_crash(data):
    with tempfile.TemporaryDirectory() as d:
        f, good = Path(d) / "run.json", Path(d) / "good.json"
        f.write_text(dump(data))
        good.write_text(json.dumps(GOOD))
        rc = call("report", f)
        call("report", f, "--top", "1")
        call("report", f, "--format", "json")
        call("diff", good, f)
        call("merge", f, good)
        call("budget", "--from", f, "--slack", "10%")
        if rc == 0:  # a report that loads is complete: every command takes it
            assert call("diff", f, f) == 0


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(entries=st.one_of(values, st.lists(st.fixed_dictionaries(
    {"file": names, "code": names, "function": names, "count": counts}), max_size=3)),
    fmt=st.sampled_from([1, Raw("1e400"), "1"]))
def test_baseline_never_crashes(entries, fmt):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "pyproject.toml").write_text("[tool.xferaudit]\n")
        (root / "clean.py").write_text("x = 1\n")
        (root / "b.json").write_text(dump({"xferaudit-baseline": fmt, "entries": entries}))
        call("check", "--no-cache", "--baseline", root / "b.json", root / "clean.py")


budget_values = st.one_of(counts, st.fixed_dictionaries({}, optional={"launches": counts, "crossings": counts}),
                          st.dictionaries(st.text(max_size=5), counts, max_size=2))


@FUZZ
@given(table=st.dictionaries(names.filter(lambda s: isinstance(s, str)), budget_values, max_size=4),
       as_json=st.booleans())
def test_budget_files_never_crash(table, as_json):
    with tempfile.TemporaryDirectory() as d:
        if as_json:
            f = Path(d) / "b.json"
            f.write_text(dump({"budget": table}))
        else:
            f = Path(d) / "b.toml"
            f.write_text("[budget]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in table.items()))
        try:
            b = load_budget(f)
        except BudgetError as e:
            assert str(f) in str(e) or "budget" in str(e)
        else:
            assert all(0 <= v <= 2**63 for v in list(b.crossings.values()) + list(b.launches.values()))


config_values = st.one_of(values, st.lists(st.text(max_size=8), max_size=3),
                          st.dictionaries(st.text(max_size=8), st.lists(st.text(max_size=6), max_size=2)
                                          | values, max_size=2),
                          st.sampled_from(["../x", "~/x", "/etc", "", ".", "a\x00b", "XFA2", "ALL", "torch"]))
KEYS = ["packs", "select", "ignore", "exclude", "extend-exclude", "per-file-ignores", "cache-dir", "budget",
        "rule", "bogus"]


rule_rows = st.lists(st.fixed_dictionaries({}, optional={
    k: st.one_of(values, st.sampled_from(["torch.Tensor.cpu", "method", "function", "move", "up", "cpu", ""]))
    for k in ("call", "target", "kind", "name", "receiver", "direction", "example", "bogus")}), max_size=2)
per_key = {
    "cache-dir": st.one_of(config_values, st.sampled_from(["../x", "~/x", "/tmp", ".", "c", "clean.py",
                                                            "a/../../x", "\x00"])),
    "rule": st.one_of(config_values, rule_rows),
    "budget": st.one_of(config_values, st.dictionaries(st.text(max_size=5), budget_values, max_size=2)),
}
configs = st.fixed_dictionaries({}, optional={k: per_key.get(k, config_values) for k in KEYS})


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(cfg=configs, cache=st.booleans())
def test_config_never_crashes(cfg, cache):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "p"
        root.mkdir()
        body = "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in cfg.items())
        (root / "pyproject.toml").write_text("[tool.xferaudit]\n" + body)
        (root / "clean.py").write_text("x = 1\n")
        cwd = os.getcwd()
        os.chdir(root)
        try:
            call("check", *([] if cache else ["--no-cache"]), "clean.py")
            call("sites", "--no-cache", "clean.py")
        finally:
            os.chdir(cwd)
        assert sorted(os.listdir(Path(d))) == ["p"]  # nothing written outside the project
