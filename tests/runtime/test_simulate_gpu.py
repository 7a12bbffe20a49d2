"""``xferaudit run --simulate`` against the GPU itself (skipped without CUDA):
the same CUDA program counted on the GPU and, in a process that sees no GPU,
on the simulated device, gives the same table per line and direction (count,
copies, bytes, pageable copies).

Run on the GPU machine:
    python -m pytest tests/runtime/test_simulate_gpu.py -v -rs
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_simulate import table, xrun  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

#: A CUDA training loop with the usual crossings: the model's upload, pinned
#: and pageable non_blocking batches, autocast, a GradScaler, a mask read, a
#: logged scalar, a host copy of a prediction.
PROGRAM = """\
    import torch; torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    for step in range(4):
        x = torch.randn(8, 16).pin_memory().to("cuda", non_blocking=True)
        y = torch.randn(8, 4).to(torch.device("cuda"), non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(x)
            loss = torch.nn.functional.mse_loss(out.float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt); scaler.update(); opt.zero_grad(set_to_none=True)
        kept = out[out > 0]
        if step % 2 == 0:
            print(step, round(loss.item(), 3) >= 0, kept.numel() >= 0, out.half().cpu().shape)
    torch.cuda.synchronize()
"""


def test_the_simulated_run_counts_what_the_gpu_run_counts(tmp_path):
    gpu, on_gpu = xrun(tmp_path, PROGRAM, "--guard-mode", "full", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert gpu.returncode == 0, gpu.stderr
    sim, simulated = xrun(tmp_path, PROGRAM, "--simulate")
    assert sim.returncode == 0, sim.stderr
    assert on_gpu["meta"]["guard_mode"] == simulated["meta"]["guard_mode"] == "full"
    assert table(simulated) == table(on_gpu)
    assert on_gpu["meta"]["steps"] == simulated["meta"]["steps"] == 4
    assert {k: v for k, v in ((r["site"], r["crossings"]) for r in simulated["rows"])} == \
        {k: v for k, v in ((r["site"], r["crossings"]) for r in on_gpu["rows"])}
