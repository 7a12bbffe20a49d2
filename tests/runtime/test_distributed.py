"""Multi-rank reports over a real torch.distributed process group (gloo, CPU).

Each rank is its own process (loopback only: a FileStore rendezvous and gloo
on ``lo``), forked from a multiprocessing forkserver that imported torch once
(so a rank starts in a fraction of a second, not a torch import), crosses to
the simulated device of ``xferaudit.testing`` a number of times that depends
on its rank (PLAN), then calls
``xfer.report(all_ranks=True)`` and saves its own report. The tests check the
gathered report on rank 0 against PLAN, exactly: per-rank counts, totals, the
outlier flag, what the other ranks print and get back, and that
``xferaudit merge`` of the saved per-rank files gives the same report.

One run per world size (2 and 4 processes), shared by the tests of that size.
Nothing here imports libcst.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

if not (hasattr(torch, "distributed") and torch.distributed.is_available()):
    pytest.skip("torch.distributed is not available", allow_module_level=True)

UP = "train.py:Trainer.step:batch.to"
DOWN = "train.py:Trainer.step:loss.item"
EVAL = "train.py:Trainer.evaluate:acc.cpu"
ROWS, COLS = 4, 8  # the uploaded batch: float32, 128 bytes


def plan(world: int) -> dict:
    """Per rank: uploads of the batch, scalar reads, and evaluation downloads.

    Every rank uploads 3 batches. The last rank reads the loss 5 times where the
    others read it twice; only rank 1 evaluates (when there is a rank 1).
    """
    return {
        r: {
            "up": 3,
            "down": 5 if r == world - 1 else 2,
            "eval": 1 if (r == 1 and world > 2) else 0,
        }
        for r in range(world)
    }


# Run in each rank's process by exec (a builtin, so it pickles by reference)
# with the globals rank, world, init, out, plan.
WORKER = textwrap.dedent(
    """
    import json, os
    import torch
    import torch.distributed as dist
    import xferaudit.runtime as xfer

    try:
        from xferaudit.testing import simulated_device
        dev, sim = simulated_device(), True
    except Exception:  # the simulated device is unavailable: uploads to meta only
        dev, sim = torch.device("meta"), False

    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world)
    xfer.count(True, timeline=True)
    batch = torch.ones(%(rows)d, %(cols)d)
    for _ in range(plan["up"]):
        x = xfer.to(batch, dev, site=%(up)r)
    if sim:
        loss = x.sum()
        for _ in range(plan["down"]):
            xfer.item(loss, site=%(down)r)
        for _ in range(plan["eval"]):
            xfer.cpu(x, site=%(eval)r)
    with open(os.path.join(out, "stdout%%d.txt" %% rank), "w") as fh:
        rep = xfer.report(fh, all_ranks=True)
    own = xfer.snapshot()
    own.save(os.path.join(out, "run.rank%%d.json" %% rank))
    if rank == 0:
        rep.save(os.path.join(out, "gathered.json"))
    with open(os.path.join(out, "ret%%d.json" %% rank), "w") as fh:
        json.dump({"type": type(rep).__name__, "meta": rep.meta, "sim": sim,
                   "rows": {r.site: r.crossings for r in rep.rows}}, fh)
    dist.barrier()
    dist.destroy_process_group()
    """
) % {"rows": ROWS, "cols": COLS, "up": UP, "down": DOWN, "eval": EVAL}

# The worker, with its failure written to err<rank>.txt for the test to show.
GUARDED = textwrap.dedent(
    """
    import os
    from traceback import format_exc
    try:
        exec(WORKER, dict(globals()))
    except BaseException:
        with open(os.path.join(out, "err%d.txt" % rank), "w") as fh:
            fh.write(format_exc())
        raise SystemExit(1)
    """
)


def _context():
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        # Taken only if no forkserver runs yet; either way the ranks are correct.
        # torch.distributed.tensor: the first op on the simulated device imports it.
        ctx.set_forkserver_preload(["torch", "torch.distributed", "torch.distributed.tensor",
                                    "xferaudit.runtime", "xferaudit.testing"])
        return ctx
    return multiprocessing.get_context("spawn")


def _run(world: int, tmp: Path) -> Path:
    if Path("/sys/class/net/lo").exists():
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    ctx = _context()
    init = str(tmp / "rendezvous")
    procs = []
    for r in range(world):
        env = {"rank": r, "world": world, "init": init, "out": str(tmp),
               "plan": plan(world)[r], "WORKER": WORKER}
        procs.append(ctx.Process(target=exec, args=(GUARDED, env), daemon=True))
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout=120)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    for r, p in enumerate(procs):
        err = tmp / f"err{r}.txt"
        assert p.exitcode == 0, f"rank {r} exit {p.exitcode}:\n" + (
            err.read_text() if err.exists() else "(no traceback)")
    return tmp


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"world{w}")
def run(request, tmp_path_factory):
    world = request.param
    return world, _run(world, tmp_path_factory.mktemp(f"dist{world}"))


def _expected(world: int, sim: bool) -> dict:
    """{site: {rank: crossings}} from PLAN (sites no rank reached left out)."""
    p = plan(world)
    out = {UP: {r: p[r]["up"] for r in p}}
    if sim:
        out[DOWN] = {r: p[r]["down"] for r in p}
        if any(p[r]["eval"] for r in p):
            out[EVAL] = {r: p[r]["eval"] for r in p}
    return out


def test_rank0_gets_every_rank_exactly(run):
    world, out = run
    data = json.loads((out / "gathered.json").read_text())
    sim = json.loads((out / "ret0.json").read_text())["sim"]
    want = _expected(world, sim)
    assert data["world_size"] == world
    assert [e["rank"] for e in data["ranks"]] == list(range(world))
    rows = {r["site"]: r for r in data["rows"]}
    assert set(rows) == set(want)
    for site, per in want.items():
        got = {int(k): v["crossings"] for k, v in rows[site]["per_rank"].items()}
        assert got == per, site
        assert rows[site]["crossings"] == sum(per.values())
        assert rows[site]["calls"] == sum(per.values())
    up_bytes = ROWS * COLS * 4
    assert {int(k): v["bytes"] for k, v in rows[UP]["per_rank"].items()} == {
        r: 3 * up_bytes for r in range(world)}
    assert data["totals"]["up"]["bytes"] == 3 * up_bytes * world


def test_outlier_flag_marks_the_rank_above_the_median(run):
    world, out = run
    data = json.loads((out / "gathered.json").read_text())
    sim = json.loads((out / "ret0.json").read_text())["sim"]
    want = _expected(world, sim)
    rows = {r["site"]: r for r in data["rows"]}
    assert rows[UP]["outlier_ranks"] == []  # every rank uploads alike
    flagged = {(o["site"], o["rank"]) for o in data["outliers"]}
    expect = set()
    for site, per in want.items():
        counts = sorted(per.values())
        mid = len(counts) // 2
        median = counts[mid] if len(counts) % 2 else (counts[mid - 1] + counts[mid]) / 2
        expect |= {(site, r) for r, c in per.items() if c > median}
    assert flagged == expect
    if sim:
        assert (DOWN, world - 1) in flagged
        assert rows[DOWN]["outlier_ranks"] == [world - 1]
        text = (out / "stdout0.txt").read_text()
        assert f"rank {world - 1}: 5 crossings at {DOWN}" in text


def test_other_ranks_print_nothing_and_get_their_own_report(run):
    world, out = run
    sim = json.loads((out / "ret0.json").read_text())["sim"]
    want = _expected(world, sim)
    head = json.loads((out / "ret0.json").read_text())
    assert head["type"] == "RankedReport"
    assert f"ranks: {world} of world size {world}" in (out / "stdout0.txt").read_text()
    for r in range(1, world):
        assert (out / f"stdout{r}.txt").read_text() == ""
        ret = json.loads((out / f"ret{r}.json").read_text())
        assert ret["type"] == "Report"
        assert ret["meta"]["rank"] == r and ret["meta"]["world_size"] == world
        assert ret["rows"] == {s: per[r] for s, per in want.items() if per[r]}


def test_saved_rank_reports_record_rank_and_merge_like_the_gather(run, capsys):
    from xferaudit.cli import main

    world, out = run
    files = [str(out / f"run.rank{r}.json") for r in range(world)]
    for r, f in enumerate(files):
        meta = json.loads(Path(f).read_text())["meta"]
        assert (meta["rank"], meta["world_size"]) == (r, world)
    merged = out / "merged.json"
    assert main(["merge", *reversed(files), "-o", str(merged)]) == 0
    a = json.loads((out / "gathered.json").read_text())
    b = json.loads(merged.read_text())
    for key in ("rows", "totals", "outliers", "world_size"):
        assert a[key] == b[key], key
    capsys.readouterr()


def test_timeline_travels_with_each_rank(run):
    world, out = run
    data = json.loads((out / "gathered.json").read_text())
    sim = json.loads((out / "ret0.json").read_text())["sim"]
    want = _expected(world, sim)
    pids = set()
    for entry in data["ranks"]:
        r = entry["rank"]
        events = entry["timeline"]["events"]
        sites = [e[2] for e in events if e[1] == "site"]
        assert {s: sites.count(s) for s in set(sites)} == {
            s: per[r] for s, per in want.items() if per[r]}
        pids.add(entry["timeline"]["pid"])
    assert len(pids) == world  # one process per rank


def test_not_initialized_is_a_one_rank_report_with_a_note(capsys):
    import xferaudit.runtime as xfer
    from xferaudit.runtime.ranks.distributed import NOT_INITIALIZED, RankedReport

    assert not torch.distributed.is_initialized()
    xfer.count(True)
    from xferaudit.testing import simulated_device

    xfer.to(torch.ones(3), simulated_device(), site=UP)
    rep = xfer.report(all_ranks=True)
    text = capsys.readouterr().out
    assert isinstance(rep, RankedReport)
    assert rep.world_size == 1 and rep.rank_ids() == [0]
    assert rep.meta["note"] == NOT_INITIALIZED
    assert "note: " + NOT_INITIALIZED in text
    assert rep.outliers() == []
    cell = rep.to_dict()["rows"][0]["per_rank"]["0"]
    assert cell == {"calls": 1, "crossings": 1, "bytes": 12, "seconds": rep.rows[0].seconds}
    assert cell["seconds"] > 0
    assert "rank" not in xfer.snapshot().meta  # nothing to record outside a process group
