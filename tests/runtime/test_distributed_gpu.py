"""Multi-rank reports over NCCL on real GPUs (skipped without CUDA).

One process per GPU (world size 1, and 2 where two GPUs are present), each
rank doing real host<->device crossings whose number depends on its rank;
``xfer.report(all_ranks=True)`` must gather them on rank 0 through NCCL
(``gather_object`` through each rank's current CUDA device) with exact
per-rank counts and bytes and the outlier flag. Nothing here imports libcst.

    python -m pytest -q -m gpu tests/runtime/test_distributed_gpu.py
"""

from __future__ import annotations

import json
import multiprocessing
import os
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not (torch.distributed.is_available()
                            and torch.distributed.is_nccl_available()),
                       reason="needs torch.distributed with NCCL"),
]

UP = "train.py:Trainer.step:batch.cuda"
DOWN = "train.py:Trainer.step:loss.item"
N = 256  # float32 elements per upload: 1024 bytes

WORKER = textwrap.dedent(
    """
    import json, os
    import torch
    import torch.distributed as dist
    import xferaudit.runtime as xfer

    torch.cuda.set_device(rank)  # NCCL's gather_object travels through this device
    dist.init_process_group("nccl", init_method="file://" + init, rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    xfer.count(True)
    x = torch.ones(%(n)d)
    for _ in range(2):
        y = xfer.cuda(x, site=%(up)r)
    loss = y.sum()
    for _ in range(2 + 3 * (rank == world - 1 and world > 1)):
        xfer.item(loss, site=%(down)r)
    with open(os.devnull, "w") as fh:
        rep = xfer.report(fh, all_ranks=True)
    if rank == 0:
        rep.save(os.path.join(out, "gathered.json"))
    dist.barrier()
    dist.destroy_process_group()
    """
) % {"n": N, "up": UP, "down": DOWN}

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


@pytest.mark.parametrize("world", [1, 2])
def test_nccl_gather_counts_every_rank(world, tmp_path):
    if torch.cuda.device_count() < world:
        pytest.skip(f"needs {world} GPUs")
    ctx = multiprocessing.get_context("spawn")  # CUDA must not be forked
    env = {"world": world, "init": str(tmp_path / "rendezvous"), "out": str(tmp_path),
           "WORKER": WORKER}
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    procs = [ctx.Process(target=exec, args=(GUARDED, dict(env, rank=r))) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        if p.is_alive():
            p.kill()
            p.join()
    for r, p in enumerate(procs):
        err = Path(tmp_path / f"err{r}.txt")
        assert p.exitcode == 0, f"rank {r}:\n" + (err.read_text() if err.exists() else "")
    data = json.loads((tmp_path / "gathered.json").read_text())
    rows = {r["site"]: r for r in data["rows"]}
    downs = {r: 2 + 3 * (r == world - 1 and world > 1) for r in range(world)}
    assert {int(k): {c: v[c] for c in ("calls", "crossings", "bytes")}
            for k, v in rows[UP]["per_rank"].items()} == {
        r: {"calls": 2, "crossings": 2, "bytes": 2 * N * 4} for r in range(world)}
    assert all(v["seconds"] > 0 for v in rows[UP]["per_rank"].values())
    assert {int(k): v["crossings"] for k, v in rows[DOWN]["per_rank"].items()} == downs
    assert rows[DOWN]["bytes"] == 4 * sum(downs.values())
    assert data["world_size"] == world
    want = [world - 1] if world > 1 else []
    assert rows[DOWN]["outlier_ranks"] == want
    assert rows[UP]["outlier_ranks"] == []
