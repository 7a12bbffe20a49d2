"""`xferaudit demo` and its bundled example."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import xferaudit
from xferaudit.cli import main

DEMO = Path(xferaudit.__file__).parent / "demo"


def wrapped_site_names(path: Path) -> list[str]:
    """site= names in the order the wrappers appear in the wrapped example."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            for k in node.keywords:
                if k.arg == "site" and isinstance(k.value, ast.Constant):
                    names.append((node.lineno, k.value.value))
    return [n for _, n in sorted(names)]


def test_wrapped_example_uses_the_names_wrap_gives_the_plain_one():
    from xferaudit.static.front.finder import find_in_source

    plain = DEMO / "train_plain.py"
    res = find_in_source(plain.read_text(), str(plain), relpath="train.py")
    assert [s.site for s in res.sites] == wrapped_site_names(DEMO / "train.py")
    assert all(not s.wrapped for s in res.sites)
    res2 = find_in_source((DEMO / "train.py").read_text(), "train.py", relpath="train.py")
    assert res2.sites and all(s.wrapped for s in res2.sites)


def test_demo_on_this_machine(tmp_path, capsys):
    pytest.importorskip("torch")
    out_json = tmp_path / "run.json"
    assert main(["demo", "--save", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "== 1/3 static check" in out and "7 unwrapped site(s)" in out
    # positions name the file checked; site names are those wrap gives it (its twin's)
    assert "\ntrain_plain.py:61:39: XFA202 `loss.item()`" in out and "xfer.item(loss, site=...)" in out
    assert "\ntrain.py:" not in out and "site name: train.py:Trainer.step:loss.item" in out
    rows = {r["site"]: r for r in json.loads(out_json.read_text())["rows"]}
    for site in ("x.to", "y.to", "weight.to"):
        r = rows[f"train.py:Trainer.step:{site}"]
        assert (r["calls"], r["crossings"], r["direction"]) == (1, 1, "up")
    assert rows["train.py:Trainer.step:x.to"]["bytes"] == 32 * 16 * 4
    assert rows["train.py:Trainer.step:y.to"]["bytes"] == 32 * 8
    if "no CUDA device" in out and "simulated device fakegpu" in out:
        assert rows["train.py:Trainer.step:loss.item"]["direction"] == "down"
        assert rows["train.py:Trainer.step:loss.item"]["bytes"] == 4


def test_demo_on_meta_counts_the_compiled_launches(capsys):
    pytest.importorskip("torch")
    assert main(["demo", "--device", "meta", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    launches = out.split("graph launches")[1].splitlines()
    count, nodes, site = launches[2].split()
    assert site == "train.py:Trainer.__init__:torch.compile" and count == "2" and int(nodes) >= 1
    assert "loss.item" not in out.split("== 3/3")[1].split("read it")[0]


def test_demo_rejects_bad_steps(capsys):
    assert main(["demo", "--steps", "0"]) == 2
    assert "--steps" in capsys.readouterr().err


def test_demo_hint_on_the_cpu_matches_its_table(capsys):
    """On the host every row is `none`: the closing hint says nothing crossed
    instead of pointing at uploads the table does not show."""
    pytest.importorskip("torch")
    assert main(["demo", "--device", "cpu", "--no-compile"]) == 0
    out = capsys.readouterr().out
    table = out.split("== 3/3")[1].split("read it")[0]
    assert "\nup " not in table and "\ndown " not in table and "\nnone " in table
    hint = out[out.index("read it"):]
    assert "nothing crossed" in hint
    assert "upload" not in hint.split("to see")[0] and ".item() reads sync" not in hint


def test_demo_hint_names_only_the_rows_that_crossed():
    from types import SimpleNamespace as NS

    from xferaudit.commands.demo import closing_hint

    def rep(**crossings):
        return NS(rows=[NS(site=f"train.py:Trainer.step:{k.replace('_', '.')}", crossings=v)
                        for k, v in crossings.items()])

    full = closing_hint(rep(x_to=1, y_to=1, weight_to=1, loss_item=1))
    assert "x.to and y.to are the normal uploads" in full and "weight.to uploads" in full
    assert ".item() read syncs every step" in full
    meta = closing_hint(rep(x_to=1, y_to=1, weight_to=1, loss_item=0))
    assert "item" not in meta
    none = closing_hint(rep(x_to=0, y_to=0, weight_to=0, loss_item=0))
    assert "nothing crossed" in none and "weight.to uploads" not in none
