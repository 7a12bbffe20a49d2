"""``xferaudit run``: an unmodified program counted in this process, on the
simulated device; the run file it writes, read back by report, diff, merge and
budget; launches and steps without wrap."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer
from xferaudit.cli import main
from xferaudit.runtime import Report
from xferaudit.runtime.counted import recorder
from xferaudit.runtime.runs import run_hooks
from xferaudit.runtime.runs.runner import RunError, output_path, run_module, run_path
from xferaudit.testing import simulated_device

# Every category of crossing, nothing wrapped. What each line moves, by hand:
EVERY = textwrap.dedent('''\
    import torch

    from xferaudit.testing import simulated_device


    def read_back(t):
        return float(t)


    def main():
        dev = simulated_device()
        net = torch.nn.Linear(4, 2)
        net.to(dev)
        x = torch.ones(8, 4)
        xd = x.to(dev, non_blocking=True)
        y = net(xd)
        loss = y.square().mean()
        read_back(loss)
        if loss > 0:
            print(loss)
        n = loss.item()
        idx = y[y > 0]
        nz = y.nonzero()
        u = torch.unique(y.round())
        picked = y[[0, 2, 5]]
        made = torch.tensor([1.0, 2.0, 3.0], device=dev)
        buf = torch.zeros(8, 2, device=dev)
        buf.copy_(y.detach())
        back = y.detach().cpu()
        mixed = xd + torch.ones(4)
        return n, idx, nz, u, picked, made, back, mixed


    if __name__ == "__main__":
        main()
''')
# line: (op, direction, calls, copies, bytes, pageable)
EVERY_EXPECTED = {
    7: ("aten._local_scalar_dense", "down", 1, 1, 4, 0),  # float(t): one float32
    13: ("aten._to_copy", "up", 2, 2, 40, 0),  # the module: weight 8 + bias 2 float32
    15: ("aten._to_copy", "up", 1, 1, 128, 1),  # 8x4 float32, non_blocking from pageable memory
    19: ("aten._local_scalar_dense", "down", 1, 1, 1, 0),  # `if loss > 0`: one bool
    20: ("Tensor.__repr__", "down", 1, 8, 17, 0),  # the printer's 8 reads of a 0-dim float32
    21: ("aten._local_scalar_dense", "down", 1, 1, 4, 0),  # .item()
    22: ("aten.index.Tensor", "down", 1, 1, 4, 0),  # a mask: an int32 count read back
    23: ("aten.nonzero", "down", 1, 1, 4, 0),  # an int32 count
    24: ("aten._unique2", "down", 1, 1, 8, 0),  # an int64 count
    25: ("aten.lift_fresh", "up", 1, 1, 24, 0),  # the index list: 3 int64
    26: ("aten.lift_fresh", "up", 1, 1, 12, 0),  # 3 float32 put on the device
    28: ("aten.copy_", "d2d", 1, 1, 64, 0),  # 8x2 float32 within the device
    29: ("aten._to_copy", "down", 1, 1, 64, 0),  # 8x2 float32 back
    30: ("aten.add.Tensor", "up", 1, 1, 16, 0),  # the host argument: 4 float32
}


@pytest.fixture(scope="module")
def dev():
    return simulated_device()


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder (pyproject.toml) as the working directory."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(folder, name, text):
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return p


def entries(path="xferaudit-run.json"):
    return json.loads(open(path).read())


def test_every_category_is_counted_at_its_line(project, dev, capsys):
    write(project, "every.py", EVERY)
    assert main(["run", "every.py"]) == 0
    out, err = capsys.readouterr()
    assert "device='fakegpu:0'" in out  # the program's print went to stdout; the report to stderr
    assert "unwrapped transfers" in err and "xferaudit-run.json" in err and "unwrapped" not in out
    d = entries()
    got = {u["line"]: (u["op"], u["direction"], u["count"], u["copies"], u["bytes"], u["pageable"])
           for u in d["unwrapped"]}
    assert got == EVERY_EXPECTED
    assert d["rows"] == [] and d["format"] == "xferaudit.report" and d["version"] == 1
    by_line = {u["line"]: u for u in d["unwrapped"]}
    sync = by_line[7]
    assert (sync["path"], sync["function"], sync["text"]) == ("every.py", "read_back", "return float(t)")
    # the sync inside a helper names its line, the line that called it, and main()'s caller
    assert [(f["line"], f["function"], f["text"]) for f in sync["frames"]] == [
        (7, "read_back", "return float(t)"), (18, "main", "read_back(loss)"),
        (35, "<module>", "main()")]
    assert by_line[15]["text"] == "xd = x.to(dev, non_blocking=True)"
    assert all(u["seconds"] > 0 for u in d["unwrapped"])
    meta = d["meta"]
    assert (meta["kind"], meta["root"], meta["argv"], meta["exit_code"]) == (
        "run", str(project), ["every.py"], 0)
    assert meta["python"] == sys.version.split()[0] and meta["torch"] == torch.__version__
    assert meta["guard_mode"] == "full"  # (the simulated device: every op through the dispatch mode)
    assert "steps" not in meta  # (no optimizer stepped)


WRAPPED_TOO = """\
    import torch
    import xferaudit.runtime as xfer
    from xferaudit.testing import simulated_device

    t = torch.tensor(2.0).to(simulated_device())
    for _ in range(3):
        xfer.item(t, site="w.py:item")
        float(t)
"""


def test_the_run_file_is_read_by_report_diff_merge_and_budget(project, dev, capsys):
    write(project, "every.py", EVERY)
    assert main(["run", "-q", "-o", "a.json", "every.py"]) == 0
    assert main(["run", "-q", "-o", "b.json", "every.py"]) == 0
    capsys.readouterr()
    rep = Report.load("a.json")
    assert len(rep.unwrapped) == len(EVERY_EXPECTED)
    assert main(["report", "a.json"]) == 0
    assert "every.py:7" in capsys.readouterr().out
    assert main(["diff", "a.json", "b.json"]) == 0
    assert main(["merge", "a.json", "b.json", "-o", "m.json"]) == 0
    capsys.readouterr()
    m = entries("m.json")
    assert m["meta"]["kind"] == "run" and m["meta"]["root"] == str(project)
    (u,) = [u for u in m["unwrapped"] if u["line"] == 7]
    assert u["count"] == 2 and u["function"] == "read_back" and u["frames"][0]["line"] == 7
    write(project, "w.py", WRAPPED_TOO)  # a budget is of wrapped sites
    assert main(["run", "-q", "-o", "w.json", "w.py"]) == 0
    assert main(["budget", "--from", "w.json", "--steps", "3", "-o", "budget.toml"]) == 0
    assert '"w.py:item" = 1' in (project / "budget.toml").read_text()


def test_a_wrapped_crossing_goes_to_its_site(project, dev):
    write(project, "w.py", WRAPPED_TOO)
    assert main(["run", "-q", "w.py"]) == 0
    d = entries()
    assert [(r["site"], r["calls"], r["copies"], r["bytes"]) for r in d["rows"]] == [("w.py:item", 3, 3, 12)]
    assert sorted((u["line"], u["count"]) for u in d["unwrapped"]) == [(5, 1), (8, 3)]


def test_steps_are_optimizer_steps_unless_the_program_marks_them(project, dev):
    write(project, "train.py", """\
        import torch
        import sys
        a, b = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
        oa = torch.optim.SGD(a.parameters(), lr=0.1)
        ob = torch.optim.SGD(b.parameters(), lr=0.1)
        for i in range(4):
            (a(torch.ones(2)) + b(torch.ones(2))).sum().backward()
            oa.step()
            if i % 2:
                ob.step()
            if sys.argv[1:] == ["--mark"]:
                import xferaudit.runtime as xfer
                xfer.step()
                xfer.step()
    """)
    assert main(["run", "-q", "train.py"]) == 0
    assert entries()["meta"]["steps"] == 4  # the optimizer stepped most
    assert main(["run", "-q", "train.py", "--mark"]) == 0
    assert entries()["meta"]["steps"] == 8


def test_compiled_functions_are_counted_at_the_line_that_compiled_them(project):
    write(project, "c.py", """\
        import torch
        import xferaudit.runtime as xfer

        f = torch.compile(lambda x: x + 1, backend="eager")


        @torch.compile(backend="eager")
        def g(x):
            return x * 2


        m = torch.compile(torch.nn.Linear(2, 2), backend="eager")
        h = xfer.graph(torch.compile(lambda x: x - 1, backend="eager"), site="mine")
        for _ in range(3):
            f(torch.ones(2))
            g(torch.ones(2))
            m(torch.ones(2))
            h(torch.ones(2))
    """)
    compile_before = torch.compile
    assert main(["run", "-q", "c.py"]) == 0
    got = {x["site"]: x["launches"] for x in entries()["launches"]}
    # named by the call, as wrap names them (no line number; #n: the same call again in the module)
    assert got == {"c.py:<module>:torch.compile": 3, "c.py:<module>:torch.compile#2": 3,
                   "c.py:<module>:torch.compile#3": 3, "mine": 3}
    lines = entries()["meta"]["lines"]
    assert lines["c.py:<module>:torch.compile#2"] == [["c.py", 7, "c.py:7:torch.compile"]]
    assert torch.compile is compile_before  # the hook is off again


class _Graph:
    """Stands in for torch.cuda.CUDAGraph on a machine without CUDA."""

    def replay(self):
        return "replayed"


def test_graph_replays_are_counted_at_the_calling_line(monkeypatch):
    monkeypatch.setattr(_Graph, "replay", run_hooks._replay(_Graph.replay))
    g = _Graph()
    for _ in range(2):
        assert g.replay() == "replayed"
    assert xfer.replay(g, site="wrapped") == "replayed"  # counted at its own site only
    site = "tests/runtime/test_runner.py:test_graph_replays_are_counted_at_the_calling_line:g.replay"
    assert xfer.launches() == {site: 2, "wrapped": 1}  # named by the call, no line number


def test_make_graphed_callables_results_get_a_site_per_item():
    mod = torch.nn.Linear(2, 2)
    orig = lambda callables, sample_args: (lambda x: x + 1, mod)  # noqa: E731
    graphed = run_hooks._graphed(orig)
    fn, m = graphed((None, None), ())
    fn(torch.ones(2))
    m(torch.ones(2))
    m(torch.ones(2))
    site = "tests/runtime/test_runner.py:test_make_graphed_callables_results_get_a_site_per_item:graphed((None,_None),())"
    assert m is mod and xfer.launches() == {f"{site}[0]": 1, f"{site}[1]": 2}
    own = xfer.graph(fn, site="own")  # the program's own wrap replaces the run's
    own(torch.ones(2))
    assert xfer.launches()["own"] == 1 and xfer.launches()[f"{site}[0]"] == 1  # not counted twice


def test_the_program_sees_what_python_gives_a_script(project):
    write(project, "sub/show.py", """\
        import json, os, sys
        json.dump({"argv": sys.argv, "path0": sys.path[0], "name": __name__, "file": __file__,
                   "spec": __spec__ is None, "main": sys.modules["__main__"].__dict__ is globals()},
                  open(os.environ["SHOW_OUT"], "w"))
    """)
    os.environ["SHOW_OUT"] = str(project / "show.json")
    try:
        res = run_path("sub/show.py", ["a", "-o", "b"], output="r.json", quiet=True)
    finally:
        del os.environ["SHOW_OUT"]
    assert res.exit_code == 0 and res.output == project / "r.json"
    got = json.loads((project / "show.json").read_text())
    assert got == {"argv": ["sub/show.py", "a", "-o", "b"], "path0": str(project / "sub"),
                   "name": "__main__", "file": str(project / "sub" / "show.py"), "spec": True,
                   "main": True}
    assert sys.modules["__main__"].__dict__ is not None and sys.argv[0] != "sub/show.py"


def test_a_module_runs_as_python_m_runs_it(project, monkeypatch):
    write(project, "pkg/__init__.py", "")
    write(project, "pkg/__main__.py", """\
        import sys
        RESULT = (__name__, __spec__.name, __package__, sys.argv, sys.path[0])
        sys.modules["pkg"].RESULT = RESULT
    """)
    write(project, "pkg/tool.py", """\
        import sys
        sys.modules["pkg"].TOOL = (__name__, __spec__.name, __package__, sys.argv)
    """)
    monkeypatch.syspath_prepend(str(project))
    res = run_module("pkg", ["x"], output="r.json", quiet=True)
    import pkg

    assert res.exit_code == 0
    assert pkg.RESULT == ("__main__", "pkg.__main__", "pkg", [str(project / "pkg" / "__main__.py"), "x"],
                          str(project))
    run_module("pkg.tool", ["y"], output="r.json", quiet=True)
    assert pkg.TOOL == ("__main__", "pkg.tool", "pkg", [str(project / "pkg" / "tool.py"), "y"])
    assert entries("r.json")["meta"]["argv"] == ["-m", "pkg.tool", "y"]


def test_a_folder_with_a_main_runs(project):
    write(project, "app/__main__.py", "import sys\nsys.exit(5)\n")
    assert run_path("app", [], output="r.json", quiet=True).exit_code == 5
    assert entries("r.json")["meta"]["exit_code"] == 5


@pytest.mark.parametrize("body, code, message", [
    ("import sys\nsys.exit(3)\n", 3, ""),
    ("import sys\nsys.exit()\n", 0, ""),
    ("import sys\nsys.exit('bye')\n", 1, "bye"),
    ("def f():\n    raise ValueError('boom')\nf()\n", 1, "ValueError: boom"),
])
def test_exit_codes_and_errors_are_the_programs(project, capsys, body, code, message):
    write(project, "p.py", body)
    assert main(["run", "-q", "p.py"]) == code
    err = capsys.readouterr().err
    assert message in err
    if "raise" in body:  # the traceback starts at the program, not in xferaudit
        assert 'File "' + str(project / "p.py") in err and "runner.py" not in err
    assert entries()["meta"]["exit_code"] == code


def test_the_run_file_stays_where_it_was_named_when_the_program_moves(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    write(project, "cd.py", f"import os\nos.chdir({str(elsewhere)!r})\n")
    assert main(["run", "-q", "-o", "out/run.json", "cd.py"]) == 2  # (no folder "out": refused first)
    (project / "out").mkdir()
    assert main(["run", "-q", "-o", "out/run.json", "cd.py"]) == 0
    assert (project / "out" / "run.json").is_file() and not (elsewhere / "out").exists()
    assert os.getcwd() == str(project)  # the working directory is put back


@pytest.mark.parametrize("argv, message", [
    (["run"], "name the program to run"),
    (["run", "nope.py"], "nope.py: no such file"),
    (["run", "-m", "no_such_module_here"], "No module named no_such_module_here"),
    (["run", "-m"], "-m needs a MODULE"),
    (["run", "-o", "missing/r.json", "p.py"], "does not exist"),
])
def test_a_program_that_cannot_start_is_one_line_and_exit_2(project, capsys, argv, message):
    write(project, "p.py", "open('ran', 'w')\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (project / "ran").exists()


def test_paths_are_relative_to_the_project_root(tmp_path, dev, monkeypatch):
    root = tmp_path / "proj"
    write(root, "pyproject.toml", "")
    write(root, "pkg/train.py", """\
        import torch
        from xferaudit.testing import simulated_device
        float(torch.ones(1).to(simulated_device()))
    """)
    monkeypatch.chdir(tmp_path)  # (the root is found from the script, not the working directory)
    assert main(["run", "-q", "proj/pkg/train.py"]) == 0
    d = entries()
    assert d["meta"]["root"] == str(root)
    assert {u["path"] for u in d["unwrapped"]} == {"pkg/train.py"}


def test_output_names_carry_the_rank_and_the_pid(tmp_path):
    assert output_path(str(tmp_path / "r.json"), rank=3) == tmp_path / "r.rank3.json"
    assert output_path(str(tmp_path / "r.json"), pid=77) == tmp_path / "r.pid77.json"
    assert output_path(str(tmp_path / "run"), rank=0) == tmp_path / "run.rank0"


def test_each_rank_writes_its_own_file_and_merge_combines_them(project, dev, monkeypatch, capsys):
    write(project, "r.py", """\
        import os, torch
        from xferaudit.testing import simulated_device
        t = torch.ones(2).to(simulated_device())
        for _ in range(1 + int(os.environ["RANK"])):
            float(t.sum())
    """)
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        assert main(["run", "-q", "r.py"]) == 0
    assert main(["merge", "xferaudit-run.rank0.json", "xferaudit-run.rank1.json", "-o", "m.json"]) == 0
    out = capsys.readouterr().out
    assert "rank 1: 2 unwrapped crossings at r.py:5" in out
    assert [u["count"] for u in entries("m.json")["unwrapped"] if u["line"] == 5] == [3]


def test_run_errors_name_the_problem():
    with pytest.raises(RunError, match="a folder without __main__.py"):
        run_path(".", [])
    with pytest.raises(RunError, match="guard mode"):
        run_path(__file__, [], guard_mode="fast")


def test_the_state_is_put_back_after_a_run(project, dev):
    write(project, "p.py", "x = 1\n")
    on, root = recorder.STATE.on, recorder.STATE.root
    run_path("p.py", [], output="r.json", quiet=True)
    assert (recorder.STATE.on, recorder.STATE.root, recorder.STATE.guard) == (on, root, False)


def test_counted_puts_the_run_on_around_a_block(project, dev):
    from xferaudit.runtime.runs.runner import counted

    t = torch.ones(2).to(dev)
    net = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with counted() as run:
        f = torch.compile(lambda x: x + 1, backend="eager")
        for _ in range(2):
            f(t.cpu())
            net(torch.ones(2)).sum().backward()
            opt.step()
        assert recorder.STATE.on and recorder.STATE.guard
    rep = run.result.report
    assert rep.meta["steps"] == 2 and rep.meta["kind"] == "run" and rep.meta["root"] == str(project)
    here = os.path.abspath(__file__)  # (outside the run's root: absolute)
    fn = "test_counted_puts_the_run_on_around_a_block"
    assert {x.site: x.launches for x in rep.launches} == {f"{here}:{fn}:torch.compile": 2}
    assert [(u.op, u.count) for u in rep.unwrapped] == [("aten._to_copy", 2)]
    assert not recorder.STATE.guard and not (project / "xferaudit-run.json").exists()


def test_a_run_file_that_cannot_be_written_is_said_and_exits_2(project, capsys):
    (project / "out").mkdir()
    write(project, "rm.py", "import os\nos.rmdir('out')\n")  # the program takes the folder away
    assert main(["run", "-q", "-o", "out/r.json", "rm.py"]) == 2
    err = capsys.readouterr().err
    assert "xferaudit run: cannot write" in err and "out/r.json" in err
    write(project, "rm3.py", "import os, sys\nos.rmdir('out')\nsys.exit(3)\n")
    (project / "out").mkdir()
    assert main(["run", "-q", "-o", "out/r.json", "rm3.py"]) == 3  # (the program's own code wins)
