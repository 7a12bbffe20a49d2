"""The machine formats of `xferaudit check`, each validated against its schema
(vendored in tests/schemas/, with their sources), and the `full` text format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xferaudit.cli import main

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"

STEP = """\
import torch

def step(model, batch, device):
    x = batch.to(device)
    loss = model(x)
    return loss.item()
"""


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\ndocs-url = "https://docs.example.org/xa/"\n')
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(STEP)
    (tmp_path / "src" / "bad.py").write_text("def f(:\n")
    (tmp_path / "src" / "ok.py").write_text(
        "import torch\nimport xferaudit.runtime as _xfer\n\ndef f(x):\n"
        "    return _xfer.cpu(x, site=\"old/ok.py:f:x.cpu\")  # noqa: XFA201\n")
    return tmp_path


def check(capsys, *args) -> tuple[int, str]:
    rc = main(["check", "--no-cache", *args])
    return rc, capsys.readouterr().out


def test_sarif_with_fixes_validates_against_the_sarif_2_1_0_schema(proj, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    rc, out = check(capsys, "--format", "sarif")
    log = json.loads(out)
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.Draft4Validator(schema).validate(log)
    (run_,) = log["runs"]
    assert run_["columnKind"] == "unicodeCodePoints"
    fixed = [r for r in run_["results"] if r.get("fixes")]
    assert {r["ruleId"] for r in fixed} >= {"XFA202", "XFA203", "XFA302"}
    first = next(r for r in fixed if r["ruleId"] == "XFA203")
    change = first["fixes"][0]["artifactChanges"][0]
    assert change["artifactLocation"] == {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}
    rep = change["replacements"]
    assert rep[0]["insertedContent"]["text"] == "import xferaudit.runtime as _xfer\n"
    assert rep[0]["deletedRegion"] == {"startLine": 2, "startColumn": 1, "endLine": 2, "endColumn": 1}
    assert first["fixes"][0]["description"]["text"] == "Wrap it: `_xfer.to(batch, device, site=...)`"


def test_the_schema_rejects_what_it_should(proj, capsys):
    """The validation is real: a result with a malformed fix fails it."""
    jsonschema = pytest.importorskip("jsonschema")
    rc, out = check(capsys, "--format", "sarif")
    log = json.loads(out)
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    bad = next(r for r in log["runs"][0]["results"] if r.get("fixes"))
    bad["fixes"][0]["artifactChanges"][0]["replacements"][0]["deletedRegion"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate(log)


# --- gitlab -----------------------------------------------------------------------------


def test_gitlab_code_quality_validates_and_keys_survive_moved_lines(proj, capsys, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SCHEMAS / "gitlab-code-quality.schema.json").read_text(encoding="utf-8"))
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    rc, out = check(capsys, "--format", "gitlab")
    issues = json.loads(out)
    jsonschema.Draft7Validator(schema).validate(issues)
    assert rc == 2  # bad.py
    by = {(i["check_name"], i["location"]["path"]): i for i in issues}
    item = by[("XFA202", "src/train.py")]
    assert item["severity"] == "major" and item["location"]["lines"] == {"begin": 6, "end": 6}
    assert item["description"].startswith("XFA202 `loss.item()` reads a device value")
    assert by[("XFA001", "src/bad.py")]["severity"] == "critical"
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    # two blank lines above: every line moves, no fingerprint does
    (proj / "src" / "train.py").write_text("\n\n" + STEP)
    again = json.loads(check(capsys, "--format", "gitlab")[1])
    assert {i["fingerprint"] for i in again} == {i["fingerprint"] for i in issues}
    moved = next(i for i in again if i["fingerprint"] == item["fingerprint"])
    assert moved["location"]["lines"]["begin"] == item["location"]["lines"]["begin"] + 2
    # the same call twice in one function: two findings, two fingerprints
    (proj / "src" / "train.py").write_text(STEP + "    loss.item()\n")
    twice = [i for i in json.loads(check(capsys, "--format", "gitlab")[1]) if i["check_name"] == "XFA202"]
    assert len(twice) == 2 and twice[0]["fingerprint"] != twice[1]["fingerprint"]


def test_gitlab_paths_are_relative_to_the_ci_project_dir(proj, capsys, monkeypatch):
    monkeypatch.setenv("CI_PROJECT_DIR", str(proj / "src"))
    issues = json.loads(check(capsys, "--format", "gitlab", "src/train.py")[1])
    assert {i["location"]["path"] for i in issues} == {"train.py"}


def test_gitlab_schema_is_strict_enough_to_fail(proj, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SCHEMAS / "gitlab-code-quality.schema.json").read_text(encoding="utf-8"))
    issues = json.loads(check(capsys, "--format", "gitlab")[1])
    issues[0]["location"]["path"] = "./" + issues[0]["location"]["path"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(issues)


# --- junit ------------------------------------------------------------------------------


def _junit_schema():
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(str(SCHEMAS / "junit.xsd"))


def test_junit_validates_one_suite_per_file_one_failing_case_per_finding(proj, capsys):
    import xml.etree.ElementTree as ET

    schema = _junit_schema()
    (proj / "src" / "weird.py").write_text("import torch\n\n\ndef f(x):\n    return x.cpu()  # <&>\n")
    rc, out = check(capsys, "--format", "junit")
    schema.validate(out)
    root = ET.fromstring(out)
    suites = {s.get("name"): s for s in root}
    assert set(suites) == {"src/bad.py", "src/train.py", "src/ok.py", "src/weird.py"}
    train = suites["src/train.py"]
    assert train.get("tests") == train.get("failures") == "2"
    case = train.findall("testcase")[1]
    assert case.get("classname") == "src.train" and case.get("name") == "XFA202 src/train.py:6:17"
    fail = case.find("failure")
    assert fail.get("type") == "XFA202" and fail.text.startswith("src/train.py:6:17: XFA202 `loss.item()`")
    assert int(root.get("tests")) == int(root.get("failures")) == sum(int(s.get("tests")) for s in root)


def test_junit_of_a_clean_run_is_one_passing_case(proj, capsys):
    schema = _junit_schema()
    rc, out = check(capsys, "--format", "junit", "src/ok.py", "--ignore", "XFA302,XFA101")
    schema.validate(out)
    assert rc == 0 and 'failures="0"' in out and "<failure" not in out


def test_junit_control_characters_stay_valid_xml(proj, capsys):
    schema = _junit_schema()
    (proj / "src" / "ctl.py").write_text('import torch\ndef f(batch, dev):\n    y = batch.to(dev, "\x1b[2J")\n')
    rc, out = check(capsys, "--format", "junit", "src/ctl.py")
    schema.validate(out)
    assert "\x1b" not in out and "\\x1b" in out


# --- full -------------------------------------------------------------------------------


def test_full_shows_the_line_with_a_caret_under_the_call(proj, capsys):
    (proj / "src" / "tab.py").write_text('import torch\n\ndef f(x):\n\treturn "é", x.cpu()\n')
    rc, out = check(capsys, "--format", "full", "src/tab.py")
    assert rc == 1
    assert out.splitlines()[:7] == [
        "src/tab.py:4:16: XFA202 `x.cpu()` reads a device value to the host (down); wrap it: "
        "`_xfer.cpu(x, site=...)` or run `xferaudit wrap`",
        "  |",
        "2 |",
        "3 | def f(x):",
        '4 |     return "é", x.cpu()',
        "  |                   ^^^^^ XFA202",
        "  |",
    ]
    assert "  = help: https://docs.example.org/xa/rules/XFA202/ explains unwrapped-down" in out
    assert out.rstrip().endswith("Found 1 finding.")


def test_full_reads_stdin_for_the_snippet(proj):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "xferaudit", "check", "--format", "full", "-",
                        "--stdin-filename", "src/nowhere.py"], cwd=proj, input=STEP.encode(),
                       capture_output=True, timeout=120)
    assert "6 |     return loss.item()\n  |                 ^^^^^^ XFA202" in r.stdout.decode()

