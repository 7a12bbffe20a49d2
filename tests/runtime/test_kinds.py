"""The kind a wrapped call records is its row's, read from the rule table:
for every row of every pack, and for a user's own row in pyproject.toml."""

from __future__ import annotations

import pytest

import xferaudit.runtime as xfer
from xferaudit.rules import available_packs, load_pack
from xferaudit.runtime import kinds, recorder


def _runtime_kind(rule):
    return "move" if rule.kind == "device" else rule.kind


@pytest.fixture(autouse=True)
def _fresh_kinds():
    kinds.reload()
    yield
    kinds.reload()


@pytest.mark.parametrize("pack", available_packs())
def test_every_row_records_its_own_kind(pack):
    # Every pack's rows, cupy's included (recorded here without running cupy):
    # what a wrapper records under its key is the row's kind, by the same
    # path a wrapped call takes (recorder.record -> kinds.KINDS).
    for rule in load_pack(pack).rules:
        site = f"k:{pack}:{rule.id}"
        recorder.STATE.on = True
        try:
            recorder.record(site, rule.wrapper, "none", 0)
        finally:
            recorder.STATE.on = False
        row = {r.site: r for r in xfer.snapshot().rows}[site]
        assert row.kind == _runtime_kind(rule), rule.id


@pytest.mark.parametrize("pack", available_packs())
def test_every_row_wrapper_exists_at_run_time(pack):
    for rule in load_pack(pack).rules:
        assert callable(getattr(xfer, rule.wrapper)), rule.wrapper


def test_a_device_row_without_its_device_records_its_no_device_kind():
    rule = next(r for r in load_pack("jax").rules if r.id == "jax.device_put")
    assert kinds.kind_of(rule.wrapper) == "move"
    assert kinds.kind_of(rule.wrapper + ":") == rule.no_device == "up"


def test_a_kind_is_written_once_in_the_packs():
    # No pack runtime keeps a table of kinds of its own.
    from xferaudit import packs

    for name in packs.names():
        mod = packs.runtime_module(name)
        assert not hasattr(mod, "WRAPPER_KINDS"), name


def test_a_user_row_keeps_its_kind_at_run_time(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        "[[tool.xferaudit.rule]]\n"
        'call = "method"\ntarget = "fetch"\nkind = "down"\n\n'
        "[[tool.xferaudit.rule]]\n"
        'call = "function"\ntarget = "mylib.io.push"\nkind = "up"\n'
    )
    monkeypatch.chdir(tmp_path)
    kinds.reload()

    class Queue:
        def fetch(self):
            return 1

    def push(x):
        return x

    push.__module__, push.__qualname__ = "mylib.io", "push"
    with xfer.counting():
        assert xfer.method(Queue(), "fetch", site="q.fetch") == 1
        assert xfer.call(push, 3, site="push") == 3
        xfer.method(Queue(), "fetch", site="other")  # (same row, another site)
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert rows["q.fetch"].kind == "down" and rows["other"].kind == "down"
    assert rows["push"].kind == "up"


def test_an_unknown_generic_row_is_a_move(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kinds.reload()
    assert kinds.kind_of("method:nosuchmethod") == "move"
    assert kinds.kind_of("call:x.y") == "move"


def test_a_broken_pyproject_falls_back_to_the_packs(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\nbogus = 1\n")
    monkeypatch.chdir(tmp_path)
    kinds.reload()
    assert kinds.kind_of("cpu") == "down"
