"""`wrap` over a tree leaves the code a `torch.jit.script` in another file reaches.

A library's tests script its functions and modules (``torch.jit.script(
kornia.color.rgb_to_hls)``); the code compiled lives in other files than the
call. A wrapper there breaks the scripting call (``NotSupportedError``), and
scripting the same module class again then fails with ``Can't redefine method:
forward``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xferaudit.cli import main
from xferaudit.static.project.scripted import scripted_in_project

PKG = {
    "pkg/__init__.py": "from .color import to_gray\nfrom . import nets\n",
    "pkg/checks.py": '''\
        import torch


        def check(x: torch.Tensor) -> torch.Tensor:
            return x.to("cpu")


        def unrelated(x):
            return x.cpu()
    ''',
    "pkg/color.py": '''\
        import torch

        from .checks import check


        def to_gray(x: torch.Tensor) -> torch.Tensor:
            w = torch.tensor([0.3, 0.6, 0.1], device=x.device)
            return check(x) * w.sum()


        def eager_only(x):
            return x.cpu()
    ''',
    "pkg/nets.py": '''\
        import torch

        from pkg.checks import check


        class Block(torch.nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x.to("cpu") + 1


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.part(self.block(x))

            def part(self, x: torch.Tensor) -> torch.Tensor:
                return check(x).cpu()

            def not_scripted(self, x):
                return x.cpu()

            @torch.jit.ignore
            def python_only(self, x):
                return x.cpu()
    ''',
    "tests/test_pkg.py": '''\
        import pytest
        import torch

        import pkg
        from pkg.nets import Net


        def test_gray():
            op = pkg.to_gray
            op_jit = torch.jit.script(op)
            x = torch.ones(3)
            assert torch.equal(op_jit(x), op(x))


        @pytest.mark.parametrize("i", [0, 1])
        def test_net(i):
            # twice: a second scripting of a class whose first one failed raises
            # "Can't redefine method: forward"
            net = torch.jit.script(Net().eval())
            assert torch.equal(net(torch.ones(2)), Net()(torch.ones(2)))


        @pytest.mark.skip(reason="never runs")
        def test_skipped():
            torch.jit.script(pkg.color.eager_only)
    ''',
}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    for rel, text in PKG.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def _files(root: Path) -> list:
    return sorted(str(p) for p in root.rglob("*.py"))


def test_the_pass_follows_imports_reexports_and_submodules(project):
    found = scripted_in_project(_files(project), lambda p: str(Path(p).relative_to(project)))
    by_file = {str(Path(p).relative_to(project)): sorted(q) for p, q in found.items()}
    assert by_file["pkg/color.py"] == ["to_gray"]  # through `pkg.to_gray`, a re-export
    assert by_file["pkg/checks.py"] == ["check"]  # imported by to_gray and by Net.part
    # forward, what it calls on self, the submodule __init__ makes; not the others
    assert by_file["pkg/nets.py"] == ["Block.forward", "Net.forward", "Net.part"]
    assert found[str(project / "pkg/color.py")]["to_gray"] == "tests/test_pkg.py:10"


def test_wrap_leaves_the_scripted_code_with_the_call_that_scripts_it(project, capsys):
    code = main(["wrap", str(project / "pkg")])
    err = capsys.readouterr().err
    assert code == 1  # sites left
    nets = (project / "pkg/nets.py").read_text()
    color = (project / "pkg/color.py").read_text()
    checks = (project / "pkg/checks.py").read_text()
    # left: what TorchScript compiles
    assert 'return x.to("cpu") + 1' in nets and "return check(x).cpu()" in nets
    assert "torch.tensor([0.3, 0.6, 0.1], device=x.device)" in color
    assert 'return x.to("cpu")\n' in checks
    # wrapped: eager code, an ignored method, what only a skipped test scripts
    assert 'xfer.cpu(x, site=":Net.not_scripted:x.cpu")' in nets
    assert 'xfer.cpu(x, site=":Net.python_only:x.cpu")' in nets
    assert 'xfer.cpu(x, site=":eager_only:x.cpu")' in color
    assert 'xfer.cpu(x, site=":unrelated:x.cpu")' in checks
    assert "`torch.jit.script` at tests/test_pkg.py:10 reaches it" in err
    assert "`torch.jit.script` at tests/test_pkg.py:19 reaches it" in err


def test_the_wrapped_package_still_scripts(project):
    pytest.importorskip("torch")
    assert main(["wrap", str(project / "pkg")]) == 1
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                       cwd=project, capture_output=True, text=True, timeout=300,
                       env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin"})
    assert "3 passed, 1 skipped" in p.stdout, p.stdout[-3000:]


def _check_json(root: Path, *args: str) -> dict:
    import json

    p = subprocess.run([sys.executable, "-m", "xferaudit", "check", "pkg", "--format", "json", *args],
                       cwd=root, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    return {(Path(f["filename"]).name, f["location"]["row"]): f for f in json.loads(p.stdout)}


def test_check_says_what_wrap_leaves_and_offers_no_fix_there(project):
    for args in ((), ("--no-cache",)):
        found = _check_json(project, *args)
        left = found[("nets.py", 8)]  # Block.forward, scripted through Net from the tests
        assert "`xferaudit wrap` leaves it" in left["message"]
        assert "`torch.jit.script` at tests/test_pkg.py:19 reaches it" in left["message"]
        assert left["fix"] is None
        assert found[("color.py", 7)]["fix"] is None
        eager = found[("nets.py", 23)]  # Net.not_scripted
        assert "wrap it" in eager["message"] and eager["fix"] is not None


def test_a_change_elsewhere_in_the_project_reaches_checks_cache(project):
    assert "leaves it" in _check_json(project)[("nets.py", 8)]["message"]
    assert "leaves it" in _check_json(project)[("nets.py", 8)]["message"]  # from the cache
    tests = project / "tests/test_pkg.py"
    tests.write_text(tests.read_text().replace("torch.jit.script(Net().eval())", "Net().eval()"))
    now = _check_json(project)  # nets.py itself unchanged
    assert "wrap it" in now[("nets.py", 8)]["message"] and now[("nets.py", 8)]["fix"] is not None
    assert "leaves it" in now[("color.py", 7)]["message"]  # still scripted by test_gray


def test_the_editor_and_flake8_engine_say_what_wrap_leaves(project, monkeypatch):
    from xferaudit.config import load_config
    from xferaudit.static.findings.lint import lint_source

    monkeypatch.chdir(project)
    cfg = load_config(project)
    nets = project / "pkg/nets.py"
    linted = lint_source(nets.read_text(), str(nets), cfg, fixes=True)
    by_line = {d.line: d for d in linted.diags}
    assert "`xferaudit wrap` leaves it" in by_line[8].message and by_line[8].fix is None
    assert by_line[23].fix is not None
    assert not (project / ".xferaudit_cache").exists()  # linting a text makes no cache folder


def test_a_scripted_function_with_a_statement_site_is_left_whole(tmp_path, capsys):
    # the statement form (a site comment for `x[x > 0]`) re-reads the file: the
    # second reading still knows what another file scripts
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("", encoding="utf-8")
    ops = tmp_path / "pkg/ops.py"
    ops.write_text(textwrap.dedent('''\
        import torch


        def positive(x: torch.Tensor) -> torch.Tensor:
            kept = x[x > 0]
            if torch.any(kept > 1):
                return kept.cpu()
            return kept


        def eager(x: torch.Tensor):
            kept = x[x > 0]
            return kept.cpu()
    '''), encoding="utf-8")
    (tmp_path / "test_ops.py").write_text(
        "import torch\nfrom pkg.ops import positive\n\n\ndef test_it():\n    torch.jit.script(positive)\n",
        encoding="utf-8")
    assert main(["wrap", str(tmp_path / "pkg")]) == 1
    out = ops.read_text()
    scripted = out.split("def positive")[1].split("def eager")[0]
    assert "_xfer" not in scripted and "xferaudit:" not in scripted, scripted
    assert '_xfer.cpu(kept, site=":eager:kept.cpu")' in out
    assert "# xferaudit: site=" in out.split("def eager")[1]  # (the statement form, which re-reads the file)
    assert "`torch.jit.script` at test_ops.py:6 reaches it" in capsys.readouterr().err


# The walk that looks for `torch.jit.script(X)` calls skips expressions on no
# line naming `script` or an import alias of it; it must find what the whole walk finds.
_SCRIPTING_FORMS = {
    "attribute": "import torch\ndef f(x):\n    return x\ng = torch.jit.script(f)\n",
    "from torch import jit": "from torch import jit\ndef f(x):\n    return x\nh = [jit.script(\n    f)]\n",
    "split over lines": "import torch\ndef f(x):\n    return x\ng = (torch.jit\n     .script)(f)\n",
    "an alias": "from torch.jit import script as S\ndef f(x):\n    return x\n\n\ndef run():\n    return {1: S(f)}\n",
    "the bare name": "from torch.jit import script\ndef f(x):\n    return x\nk = lambda: script(f)\n",
    "a made module": ("import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                      "model = Net()\nm = torch.jit.script(model)\n"),
    "a default": "import torch\ndef f(x):\n    return x\ndef use(s=torch.jit.script(f)):\n    return s\n",
    "lone carriage returns": "import torch\rdef f(x):\r    return x\r\r\rdef run():\r    return [torch.jit.script(f)]\r",
}


@pytest.mark.parametrize("form", sorted(_SCRIPTING_FORMS))
def test_the_pruned_walk_finds_what_the_whole_walk_finds(form):
    import ast

    from xferaudit.static.front.unwrappable import script_call_lines, scripted_defs
    from xferaudit.static.project.scripted import _Module

    text = _SCRIPTING_FORMS[form]
    tree = ast.parse(text)
    qualname = _Module("m.py", "m.py", tree, frozenset()).qualname
    whole = [n.name for n in scripted_defs(tree, qualname)]
    assert whole, "the form scripts a def"
    assert [n.name for n in scripted_defs(tree, qualname, script_call_lines(text))] == whole
