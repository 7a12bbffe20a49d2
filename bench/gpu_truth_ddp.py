"""The multi-rank report against each rank's profiler (needs CUDA; 2 GPUs for the real test).

Runs the wrapped GPT example (examples/wrapped/gpt_train.py) under
DistributedDataParallel, one process per GPU over NCCL, with counting and the
guard on and torch.profiler (CUDA activity) on every rank. Each rank compares
its own crossings per direction (wrapped sites + unwrapped events) with its
own ``Memcpy HtoD`` / ``Memcpy DtoH`` events, counts and bytes; then
``xfer.report(all_ranks=True)`` gathers every rank's counts on rank 0, and the
script checks that the gathered per-rank columns equal what each rank counted.

    python bench/gpu_truth_ddp.py --nproc 2 --steps 20 [--out bench/results/gpu_truth_ddp.json]

Device-to-device memcpys (DDP's gradient buckets) are listed, not compared:
they never cross the host boundary. NVLink multicast stays off
(NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
for var in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ[var] = "0" if var == "NCCL_NVLS_ENABLE" else "1"


def _rank_main(rank: int, world: int, init: str, steps: int, warmup: int, tmp: str) -> None:
    sys.path.insert(0, str(HERE.parent / "examples" / "wrapped"))
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(HERE))
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import gpt_train as W
    import xferaudit.runtime as xfer
    from trace_counts import chrome_trace, memcpy_events, xfer_directions

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method="file://" + init, rank=rank, world_size=world, device_id=dev)
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        t = W.Trainer(W.Config(), dev, compile=True)
        t.model = DDP(t.model, device_ids=[rank])
        for _ in range(warmup):
            t.step()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    xfer.count(True)
    with xfer.guard("count"), contextlib.redirect_stdout(quiet):
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(steps):
                t.step()
            torch.cuda.synchronize()
    xfer.count(False)
    local = xfer.report(file=io.StringIO()).to_dict()
    prof_dirs = memcpy_events(chrome_trace(prof))
    ours = xfer_directions(local)
    rows = [{"direction": d, "profiler": prof_dirs.get(d, [0, 0]), "xferaudit": ours.get(d, [0, 0])}
            for d in ("up", "down")]
    gathered = xfer.report(file=io.StringIO(), all_ranks=True)
    result = {"rank": rank, "directions": rows, "d2d_memcpys": prof_dirs.get("d2d", [0, 0]),
              "agree": all(r["profiler"] == r["xferaudit"] for r in rows), "local": local}
    with open(os.path.join(tmp, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    if rank == 0:
        with open(os.path.join(tmp, "gathered.json"), "w") as f:
            json.dump(gathered.to_dict(), f)
        with open(os.path.join(tmp, "gathered.txt"), "w") as f:
            f.write(gathered.format())
    dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--out", default=str(HERE / "results" / "gpu_truth_ddp.json"))
    a = p.parse_args()
    import torch
    import torch.multiprocessing as mp

    have = torch.cuda.device_count()
    if have < 1:
        print("gpu_truth_ddp: needs CUDA; nothing to compare on this machine")
        return 0
    if a.nproc > have:
        print(f"gpu_truth_ddp: {a.nproc} ranks asked for, {have} GPU(s) here; NCCL needs one GPU per rank")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init")
        mp.spawn(_rank_main, args=(a.nproc, init, a.steps, a.warmup, tmp), nprocs=a.nproc, join=True)
        ranks = [json.load(open(os.path.join(tmp, f"rank{r}.json"))) for r in range(a.nproc)]
        gathered = json.load(open(os.path.join(tmp, "gathered.json")))
        gathered_text = open(os.path.join(tmp, "gathered.txt")).read()

    print(gathered_text)
    print("rank  direction  profiler(memcpys, bytes)  xferaudit(crossings, bytes)")
    for r in ranks:
        for d in r["directions"]:
            print(f"{r['rank']:>4}  {d['direction']:<9}  {d['profiler'][0]:>8} {d['profiler'][1]:>12}"
                  f"    {d['xferaudit'][0]:>8} {d['xferaudit'][1]:>12}")
        print(f"{r['rank']:>4}  d2d (DDP buckets, not a crossing): {r['d2d_memcpys'][0]} memcpys")
    # The gathered report's per-rank columns must be each rank's own counts.
    gathered_ok = True
    for row in gathered["rows"]:
        for r in ranks:
            mine = next((x for x in r["local"]["rows"] if x["site"] == row["site"]), None)
            theirs = row.get("per_rank", {}).get(str(r["rank"])) or row.get("per_rank", {}).get(r["rank"])
            want = (mine["crossings"], mine["bytes"]) if mine else (0, 0)
            got = (theirs["crossings"], theirs["bytes"]) if theirs else (0, 0)
            if want != got:
                gathered_ok = False
                print(f"gathered mismatch at {row['site']} rank {r['rank']}: {got} != {want}")
    ok = gathered_ok and all(r["agree"] for r in ranks)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "nproc": a.nproc,
              "steps": a.steps, "ranks": [{k: v for k, v in r.items() if k != "local"} for r in ranks],
              "gathered_matches_ranks": gathered_ok, "agree": ok, "gathered": gathered}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))
    print("AGREE" if ok else "DISAGREE", "->", a.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
