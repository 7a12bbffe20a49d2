"""Issue 44, the new user's pass: the simulated device has one name, the one it
shows (``fakegpu``, as in ``fakegpu:0``): the demo's ``--device`` takes it, as
the benches' do; ``sim``, the demo's old name for it, is still read."""

from __future__ import annotations

import pytest

from xferaudit.cli import main

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["fakegpu", "sim"])
def test_the_demo_runs_on_the_simulated_device_by_the_name_it_shows(capsys, name):
    assert main(["demo", "--device", name, "--no-compile"]) == 0
    out = capsys.readouterr().out
    assert "running on the simulated device fakegpu:0" in out
    assert "\nup " in out.split("== 3/3")[1]  # (crossings real to it)


def test_the_hint_on_the_host_names_it_so():
    from types import SimpleNamespace as NS

    from xferaudit.commands.demo import closing_hint

    assert "--device fakegpu" in closing_hint(NS(rows=[]))
