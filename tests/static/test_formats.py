"""The machine formats of `xferaudit check`, each validated against its schema
(vendored in tests/schemas/, with their sources), and the `full` text format."""

from __future__ import annotations

import json
import textwrap
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
        "import torch\nimport xferaudit.runtime as xfer\n\ndef f(x):\n"
        "    return xfer.cpu(x, site=\"old/ok.py:f:x.cpu\")  # noqa: XFA201\n")
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
    assert rep[0]["insertedContent"]["text"] == "import xferaudit.runtime as xfer\n"
    assert rep[0]["deletedRegion"] == {"startLine": 2, "startColumn": 1, "endLine": 2, "endColumn": 1}
    assert first["fixes"][0]["description"]["text"] == "Wrap it: `xfer.to(batch, device, site=...)`"


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
