"""Hostile inputs and odd trees: the cache folder, symbolic and hard links,
foreign owners, malformed reports, budgets and baselines, escaped output,
interrupted and killed runs."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from xferaudit.cli import main

STEP = "import torch\n\ndef step(model, x, dev):\n    return model(x.to(dev)).item()\n"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.xferaudit]\n")
    monkeypatch.chdir(root)
    return root


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def write(root: Path, rel: str, text: str = STEP) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def report_file(path: Path, rows=None, **extra) -> Path:
    rows = rows if rows is not None else [
        {"site": "a.py:f:x.to", "kind": "move", "direction": "up", "calls": 2, "crossings": 2,
         "bytes": 8, "by_direction": {"up": {"calls": 2, "bytes": 8}}},
        {"site": "a.py:f:l.item", "kind": "down", "direction": "down", "calls": 3, "crossings": 3,
         "bytes": 12, "by_direction": {"down": {"calls": 3, "bytes": 12}}},
        {"site": "a.py:f:h.cpu", "kind": "down", "direction": "down", "calls": 1, "crossings": 1,
         "bytes": 4, "by_direction": {"down": {"calls": 1, "bytes": 4}}},
    ]
    data = {"format": "xferaudit.report", "version": 1, "meta": {}, "rows": rows,
            "launches": [], "unwrapped": []}
    data.update(extra)
    path.write_text(json.dumps(data))
    return path


# --- the cache folder -----------------------------------------------------------------


def test_cache_dir_holding_other_files_is_refused_and_left_alone(proj, capsys):
    write(proj, "a.py")
    rc, _, err = run(capsys, "check", "--cache-dir", ".", "a.py")
    assert rc == 2 and "holds other files" in err and "Traceback" not in err
    assert not (proj / ".gitignore").exists() and not (proj / "CACHEDIR.TAG").exists()
    assert sorted(os.listdir(proj)) == ["a.py", "pyproject.toml"]


@pytest.mark.parametrize("value", ["../outside", "~/xfa-cache", "link/c"])
def test_config_cache_dir_outside_the_project_is_refused(proj, capsys, monkeypatch, value):
    home = proj.parent / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (proj / "link").symlink_to(proj.parent)
    (proj / "pyproject.toml").write_text(f'[tool.xferaudit]\ncache-dir = "{value}"\n')
    write(proj, "a.py")
    rc, _, err = run(capsys, "check", "a.py")
    assert rc == 2 and "outside the project" in err and "--cache-dir" in err
    assert sorted(os.listdir(proj.parent)) == ["home", "proj"] and os.listdir(home) == []


def test_cache_dir_on_the_command_line_may_be_anywhere_and_is_marked_when_created(proj, capsys):
    write(proj, "a.py")
    cache = proj.parent / "elsewhere" / "c"
    rc, _, err = run(capsys, "check", "-q", "--cache-dir", cache, "a.py")
    assert rc == 1, err
    assert (cache / ".gitignore").read_text().strip().endswith("*")
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert run(capsys, "check", "-q", "--cache-dir", cache, "a.py")[0] == 1  # its own folder: accepted


def test_an_existing_empty_folder_is_used_without_markers(proj, capsys):
    write(proj, "a.py")
    (proj / "c").mkdir()
    assert run(capsys, "check", "-q", "--cache-dir", "c", "a.py")[0] == 1
    names = sorted(p.name for p in (proj / "c").iterdir())  # the findings, and the project facts beside them
    assert any(n.startswith("findings-") for n in names)
    assert all(n.startswith(("findings-", "scripted-", "placed-", "compiled-", "clean-")) and n.endswith(".json") for n in names), names
    assert not (proj / "c" / ".gitignore").exists() and not (proj / "c" / "CACHEDIR.TAG").exists()


# --- folder and file symlinks -----------------------------------------------------------


def _finding_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ": XFA" in ln]


def test_links_to_the_root_and_up_are_not_followed(proj, capsys):
    write(proj, "pkg/a.py")
    write(proj, "b.py")
    plain = _finding_lines(run(capsys, "check", "--no-cache", ".")[1])
    (proj / "pkg" / "up").symlink_to("..")
    (proj / "loop").symlink_to(proj)
    rc, out, _ = run(capsys, "check", "--no-cache", ".")
    assert rc == 1 and _finding_lines(out) == plain and len(plain) == 4


def test_a_link_to_a_sibling_folder_is_visited_once_under_its_own_path(proj, capsys):
    write(proj, "b/x.py")
    (proj / "a").mkdir()
    (proj / "a" / "link").symlink_to("../b")
    rc, out, _ = run(capsys, "check", "--no-cache", ".")
    lines = _finding_lines(out)
    assert len(lines) == 2 and all(ln.startswith("b/x.py:") for ln in lines)
    rc, _, err = run(capsys, "wrap", ".")
    assert rc == 0, err
    text = (proj / "b" / "x.py").read_text()
    assert 'site=":step:' in text and "a/link" not in text and "changed on disk" not in err


def test_a_link_out_of_the_tree_is_not_followed(proj, capsys, tmp_path):
    write(tmp_path / "other", "o.py")
    (proj / "out").symlink_to(tmp_path / "other")
    (proj / "o.py").symlink_to(tmp_path / "other" / "o.py")
    write(proj, "a.py")
    rc, out, _ = run(capsys, "check", "--no-cache", ".")
    assert {ln.split(":")[0] for ln in _finding_lines(out)} == {"a.py"}


def test_a_file_link_named_explicitly_is_read_under_its_target_path(proj, capsys):
    write(proj, "real.py")
    (proj / "alias.py").symlink_to("real.py")
    rc, out, _ = run(capsys, "check", "--no-cache", "alias.py", "real.py")
    lines = _finding_lines(out)
    assert len(lines) == 2 and all(ln.startswith("real.py:") for ln in lines)


# --- report --top --------------------------------------------------------------------------


def test_report_top_keeps_the_runs_totals_and_says_what_is_hidden(proj, capsys):
    f = report_file(proj / "r.json")
    rc, out, _ = run(capsys, "report", f, "--top", "1")
    assert rc == 0
    down = next(ln for ln in out.splitlines() if ln.startswith("total down"))
    assert down.split()[2] == "4", out  # 3 + 1 down crossings, though one row is shown
    assert "2 more sites not shown" in out
    rc, out, _ = run(capsys, "report", f, "--top", "1", "--format", "json")
    d = json.loads(out)
    assert len(d["rows"]) == 1 and d["rows_hidden"] == 2 and d["totals"]["down"]["crossings"] == 4
    rc, out, _ = run(capsys, "report", f, "--top", "0")
    assert "nothing counted" not in out and "3 more sites not shown" in out
    assert next(ln for ln in out.splitlines() if ln.startswith("total all")).split()[3] == "6"


# --- owners, modes and hard links --------------------------------------------------------


needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root for chown")


@needs_root
def test_wrap_keeps_a_foreign_owner_group_and_mode(proj, capsys):
    f = write(proj, "a.py")
    os.chown(f, 1234, 2345)
    os.chmod(f, 0o640)
    rc, _, err = run(capsys, "wrap", "a.py")
    assert rc == 0, err
    st = os.stat(f)
    assert "_xfer.item(" in f.read_text()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1234, 2345, 0o640)


def test_wrap_refuses_a_hard_linked_file_and_says_so(proj, capsys):
    f = write(proj, "src/a.py")
    (proj / "backup").mkdir()
    twin = proj / "backup" / "a.py"
    os.link(f, twin)
    rc, _, err = run(capsys, "wrap", "src")
    assert rc == 2 and "hard link" in err and "src/a.py" in err
    assert f.read_text() == STEP == twin.read_text()
    assert os.stat(f).st_ino == os.stat(twin).st_ino


def test_atomic_write_keeps_owner_and_refuses_hard_links_when_asked(tmp_path):
    from xferaudit._atomic import HardLinkError, atomic_write

    f = tmp_path / "f"
    f.write_text("old")
    if os.geteuid() == 0:
        os.chown(f, 1234, 1234)
    atomic_write(f, "new")
    assert f.read_text() == "new"
    if os.geteuid() == 0:
        assert (os.stat(f).st_uid, os.stat(f).st_gid) == (1234, 1234)
    os.link(f, tmp_path / "g")
    with pytest.raises(HardLinkError):
        atomic_write(f, "newer", hard_links="refuse")
    assert (tmp_path / "g").read_text() == "new" == f.read_text()


# --- impossible counts -------------------------------------------------------------------------


@pytest.mark.parametrize("row,field", [
    ({"crossings": -7, "calls": 1}, "crossings"),
    ({"bytes": -1}, "bytes"),
    ({"calls": 1, "crossings": 5}, "crossings"),
    ({"calls": 1.5}, "calls"),
])
def test_negative_or_impossible_counts_exit_2_naming_file_and_field(proj, capsys, row, field):
    base = {"site": "a.py:f:x.to", "kind": "move", "direction": "up", "calls": 9, "crossings": 1,
            "bytes": 4}
    f = report_file(proj / "bad.json", rows=[dict(base, **row)])
    for cmd in (["report", f], ["budget", "--from", f], ["diff", f, f], ["merge", f]):
        rc, out, err = run(capsys, *cmd)
        assert rc == 2 and "bad.json" in err and field in err and "Traceback" not in err, (cmd, err)
        assert out == ""


# --- merge bounded by the input ------------------------------------------------------------------


def test_merge_of_a_huge_world_size_stays_small(proj, capsys):
    files = []
    for rk in (0, 5):
        files.append(report_file(proj / f"r{rk}.json", meta={"rank": rk, "world_size": 1_000_000_000}))
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30));"
            "from xferaudit.cli import main; sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-c", code, "merge", *map(str, files), "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    meta = json.loads(p.stdout)["meta"]
    assert meta["world_size"] == 1_000_000_000 and meta["missing_rank_count"] == 999_999_998
    assert len(meta["missing_ranks"]) <= 1000
    rc, out, _ = run(capsys, "merge", *files)
    assert "missing: 1-4, 6-999999999" in out


# --- bad values in valid JSON ----------------------------------------------------------------------

HUGE = "1" + "0" * 400
DIGITS = "7" * 5000
NESTED = "[" * 100_000 + "]" * 100_000
ROW = ('{"site": "a.py:f:x.to", "kind": "move", "direction": "up", "calls": %s, "crossings": 1,'
       ' "bytes": %s, "by_direction": %s}')
BAD_REPORTS = {
    "bytes_1e400": ('{"rows": [%s]}' % (ROW % ("2", HUGE, "{}")), "bytes"),
    "5000_digits": ('{"rows": [%s]}' % (ROW % (DIGITS, "1", "{}")), "digits"),
    "direction_x": ('{"rows": [%s]}' % (ROW % ("2", "1", '{"up": "x"}')), "by_direction"),
    "nested": ('{"rows": [], "meta": %s}' % NESTED, "nested"),
    "float_inf": ('{"rows": [%s]}' % (ROW % ("2", "1e400", "{}")), "bytes"),
}


@pytest.mark.parametrize("name", sorted(BAD_REPORTS))
def test_bad_values_in_valid_json_exit_2_naming_file_and_field(proj, capsys, name):
    text, field = BAD_REPORTS[name]
    f = proj / f"{name}.json"
    f.write_text(text)
    good = report_file(proj / "good.json")
    for cmd in (["report", f], ["diff", good, f], ["merge", good, f], ["budget", "--from", f]):
        rc, out, err = run(capsys, *cmd)
        assert rc == 2 and f.name in err and field in err and "Traceback" not in err, (cmd, err[-500:])


@pytest.mark.parametrize("count,field", [("1e400", "count"), ("-3", "count"), (DIGITS, "digits"),
                                         ('"x"', "count")])
def test_bad_baseline_counts_exit_2(proj, capsys, count, field):
    write(proj, "a.py")
    (proj / "b.json").write_text('{"xferaudit-baseline": 1, "entries": [{"file": "a.py", "code": '
                                 '"XFA202", "function": "step", "count": %s}]}' % count)
    rc, _, err = run(capsys, "check", "--no-cache", "--baseline", "b.json")
    assert rc == 2 and "b.json" in err and field in err, err


@pytest.mark.parametrize("text,field", [
    ('{"budget": {"a.py:f:x": %s}}' % HUGE, "a.py:f:x"),
    ('{"budget": {"a.py:f:x": %s}}' % DIGITS, "digits"),
    ('{"budget": %s}' % NESTED, "nested"),
])
def test_bad_budget_files_raise_budget_error(tmp_path, text, field):
    from xferaudit.runtime.runs.budget import BudgetError, load_budget

    f = tmp_path / "b.json"
    f.write_text(text)
    with pytest.raises(BudgetError, match=field) as e:
        load_budget(f)
    assert "b.json" in str(e.value)


# --- escaped output ------------------------------------------------------------------------------------

EVIL = "x.py:f:a\n::error file=ci.yml::pwned\x1b[2J\r"


def _clean(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text
    assert not any(ln.startswith(("::", "##[")) for ln in text.splitlines()), text


def test_report_diff_and_merge_escape_site_names(proj, capsys):
    rows = [{"site": EVIL, "kind": "move", "direction": "up", "calls": 1, "crossings": 1, "bytes": 1}]
    f = report_file(proj / "evil.json", rows=rows,
                    unwrapped=[{"path": "p\n::warning::x", "line": 1, "op": "a\x1b[0m", "direction": "up",
                                "count": 1, "bytes": 4}],
                    launches=[{"site": "\n::error::launch", "launches": 1}])
    g = report_file(proj / "good.json")
    for cmd in (["report", f], ["diff", g, f], ["diff", f, g], ["merge", f, g]):
        rc, out, err = run(capsys, *cmd)
        assert rc == 0, err
        _clean(out)
        assert "\\n::error" in out or "\\n::warning" in out


def test_check_and_sites_escape_paths(proj, capsys):
    write(proj, "::error file=a::b.py")
    write(proj, "n\nl.py", "import torch\nx = torch.ones(1)\ny = x.to('\x1b[31m')\n")
    for fmt in ("text", "github"):
        rc, out, _ = run(capsys, "check", "--no-cache", "--format", fmt, ".")
        assert rc == 1
        if fmt == "text":
            _clean(out)
        else:
            assert "\x1b" not in out and all(ln.startswith("::error ") for ln in out.splitlines())
    rc, out, _ = run(capsys, "sites", "--no-cache", ".")
    _clean(out)
    rc, _, err = run(capsys, "wrap", "--check", ".")
    _clean(err)


# --- interrupts and killed parents ------------------------------------------------------------------


def test_ctrl_c_during_wrap_says_which_files_were_rewritten(proj):
    from xferaudit.config import load_config
    from xferaudit.static.codemod.files import run_codemod

    files = [str(write(proj, f"m{i}.py")) for i in range(4)]
    seen = []

    def interrupt(outcome):
        seen.append(outcome)
        if len(seen) == 3:
            raise KeyboardInterrupt

    err = io.StringIO()
    rc = run_codemod(files, "wrap", load_config(start=proj), jobs=1, err=err, on_outcome=interrupt)
    text = err.getvalue()
    assert rc == 130
    assert "interrupted" in text and "2 files already rewritten" in text
    assert "m0.py" in text and "m1.py" in text and "m2.py" not in text
    assert "xfer" in Path(files[1]).read_text() and "xfer" not in Path(files[2]).read_text()


SIGINT_DRIVER = textwrap.dedent("""
    import os, signal, sys
    from xferaudit.static.codemod import files as codemod_files
    real, done = codemod_files._write, []
    def write(o, new):
        error = real(o, new)
        done.append(o.rel)
        if len(done) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, right after the second rewrite
        return error
    codemod_files._write = write
    from xferaudit.cli import main
    sys.exit(main(["wrap", "-j", "2", *sys.argv[1:]]))
""")


def test_a_real_ctrl_c_during_a_pooled_wrap_names_the_rewritten_files(proj):
    files = [write(proj, f"m{i:02}.py") for i in range(20)]
    p = subprocess.run([sys.executable, "-c", SIGINT_DRIVER, "."], capture_output=True, text=True,
                       timeout=120, cwd=proj)
    assert p.returncode == 130, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "2 files already rewritten" in p.stderr, p.stderr[-2000:]
    named = [ln.strip() for ln in p.stderr.splitlines() if ln.startswith("  ")]
    changed = sorted(f.name for f in files if f.read_text() != STEP)
    assert sorted(named) == changed and len(changed) == 2


# The same Ctrl-C, arriving while a finalizer runs (a garbage collection):
# its KeyboardInterrupt is raised inside the finalizer, where Python prints it
# as "Exception ignored" and goes on, so the run used to finish every file and
# exit 0. Under load that is how a real Ctrl-C of `wrap -j 2` got lost.
SIGINT_IN_A_FINALIZER = SIGINT_DRIVER.replace(
    "        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, right after the second rewrite\n",
    "        import gc\n"
    "        class Cycle:\n"
    "            def __del__(self):  # Ctrl-C while a finalizer runs\n"
    "                os.kill(os.getpid(), signal.SIGINT)\n"
    "        c = Cycle(); c.me = c; del c; gc.collect()\n",
)


def test_a_ctrl_c_raised_inside_a_finalizer_is_not_lost(proj):
    assert SIGINT_IN_A_FINALIZER != SIGINT_DRIVER
    files = [write(proj, f"m{i:02}.py") for i in range(20)]
    p = subprocess.run([sys.executable, "-c", SIGINT_IN_A_FINALIZER, "."], capture_output=True, text=True,
                       timeout=120, cwd=proj)
    changed = sorted(f.name for f in files if f.read_text() != STEP)
    assert p.returncode == 130, (p.returncode, len(changed), p.stderr[-2000:])
    assert "2 files already rewritten" in p.stderr, p.stderr[-2000:]
    after = p.stderr.split("already rewritten", 1)[1]  # (Python's "Exception ignored" lines come first)
    named = [ln.strip() for ln in after.splitlines() if ln.startswith("  ")]
    assert sorted(named) == changed and len(changed) == 2


DRIVER = textwrap.dedent("""
    import multiprocessing, os, sys, time
    from xferaudit.config import load_config
    from xferaudit.static.codemod import files as codemod_files
    paths = sys.argv[1:]
    pool = codemod_files.pool_of(2, ("wrap", load_config(start=paths[0]), (), False))
    pool.map_async(time.sleep, [600, 600], chunksize=1)  # both workers busy
    time.sleep(1)
    print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_workers_die_with_a_killed_parent(proj):
    files = [str(write(proj, f"m{i}.py")) for i in range(20)]
    p = subprocess.Popen([sys.executable, "-c", DRIVER, *files], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(x) for x in p.stdout.readline().split()]
        assert pids and all(_alive(x) for x in pids)
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.monotonic() + 20
        while any(_alive(x) for x in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(x) for x in pids)
    finally:
        if p.poll() is None:
            p.kill()


# --- one odd tree, end to end -------------------------------------------------------------------------


def test_wrap_over_an_odd_tree_leaves_content_owners_and_links_as_expected(proj, capsys, tmp_path):
    a = write(proj, "pkg/a.py")
    x = write(proj, "b/x.py")
    h = write(proj, "hard/h.py")
    os.link(h, proj / "backup.py")  # a hard-linked twin in the tree
    (proj / "pkg" / "up").symlink_to("..")  # a loop
    (proj / "loop").symlink_to(proj)  # a link to the root
    (proj / "a").mkdir()
    (proj / "a" / "link").symlink_to("../b")  # an alias of a folder
    (proj / "pkg" / "alias.py").symlink_to("a.py")  # an alias of a file
    outside = write(tmp_path, "outside/o.py")
    (proj / "out").symlink_to(outside.parent)  # a link out of the tree
    if os.geteuid() == 0:
        os.chown(a, 1234, 2345)
    os.chmod(a, 0o640)
    links = {p: os.readlink(p) for p in (proj / "pkg/up", proj / "loop", proj / "a/link",
                                         proj / "pkg/alias.py", proj / "out")}

    rc, _, err = run(capsys, "wrap", ".")
    assert rc == 2, err  # the hard-linked file is refused, said once
    assert err.count("skipped: hard link") == 1 and "changed on disk" not in err
    assert "3 files checked" in err  # pkg/a.py, b/x.py and the twins once
    assert 'site=":step:' in a.read_text() and a.read_text().count("_xfer.item(") == 1
    assert 'site=":step:' in x.read_text() and "a/link" not in x.read_text()
    assert x.read_text().count("import xferaudit.runtime as _xfer") == 1
    st = os.stat(a)
    assert st.st_mode & 0o777 == 0o640
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 2345)
    assert h.read_text() == STEP == (proj / "backup.py").read_text()
    assert os.stat(h).st_ino == os.stat(proj / "backup.py").st_ino
    assert outside.read_text() == STEP
    assert {p: os.readlink(p) for p in links} == links

    rc, _, err = run(capsys, "unwrap", ".")
    assert rc == 0, err
    assert a.read_text() == STEP == x.read_text()
    if os.geteuid() == 0:
        assert (os.stat(a).st_uid, os.stat(a).st_gid) == (1234, 2345)


def test_a_default_cache_folder_linked_out_of_the_project_is_refused(proj, capsys):
    write(proj, "a.py")
    elsewhere = proj.parent / "elsewhere"
    elsewhere.mkdir()
    (proj / ".xferaudit_cache").symlink_to(elsewhere)
    rc, _, err = run(capsys, "check", "a.py")
    assert rc == 2 and "outside the project" in err
    assert os.listdir(elsewhere) == []


def test_report_top_limits_the_unwrapped_lines_too(proj, capsys):
    unwrapped = [{"path": "a.py", "line": n, "op": "aten._local_scalar_dense", "direction": "down",
                  "count": 10 - n, "bytes": 4 * (10 - n)} for n in range(1, 6)]
    f = report_file(proj / "r.json", unwrapped=unwrapped)
    rc, out, _ = run(capsys, "report", f, "--top", "2")
    shown = [ln for ln in out.splitlines() if "aten._local_scalar_dense" in ln]
    assert rc == 0 and [ln.split()[-1] for ln in shown] == ["a.py:1", "a.py:2"]
    assert "(3 more unwrapped lines not shown)" in out
    rc, out, _ = run(capsys, "report", f, "--top", "2", "--format", "json")
    d = json.loads(out)
    assert [u["line"] for u in d["unwrapped"]] == [1, 2] and d["unwrapped_hidden"] == 3


@pytest.mark.parametrize("where", ["pyproject.toml", "--config"])
def test_a_config_select_that_matches_no_code_is_an_error(proj, capsys, where):
    write(proj, "a.py")
    text = '[tool.xferaudit]\nselect = ["XFA9"]\n'
    argv = ["check", "--no-cache", "a.py"]
    if where == "--config":
        (proj / "other.toml").write_text(text)
        argv[1:1] = ["--config", "other.toml"]
    else:
        (proj / "pyproject.toml").write_text(text)
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and "'XFA9' matches no xferaudit code" in err and "All checks passed" not in out


def test_the_cache_dir_error_names_the_folder_and_the_project_root_apart(proj, capsys):
    (proj / "pyproject.toml").write_text('[tool.xferaudit]\ncache-dir = "../c"\n')
    write(proj, "a.py")
    rc, _, err = run(capsys, "check", "a.py")
    assert rc == 2
    assert f"is {proj.parent / 'c'}, outside the project ({proj})" in err


def test_wrap_takes_no_cache_as_check_and_sites_do(proj, capsys):
    write(proj, "a.py")
    rc, _, err = run(capsys, "wrap", "--no-cache", "--diff", "a.py")
    assert rc == 1 and "unrecognized" not in err


def test_a_direction_cell_without_its_counts_reads_as_zero_everywhere(proj, capsys):
    row = {"site": "", "kind": "", "direction": "up", "calls": 0, "crossings": 0, "bytes": 0,
           "by_direction": {"up": {}}}  # (a fuzzer's find: every reader raised KeyError)
    f = report_file(proj / "r.json", rows=[row])
    g = report_file(proj / "g.json")
    for argv in (["report", f], ["report", f, "--format", "json"], ["diff", g, f], ["merge", f, g]):
        rc, _, err = run(capsys, *argv)
        assert rc == 0 and "Traceback" not in err, (argv, err)
