"""False findings and misses met on libraries nobody here had read (issue 43),
each in the shape of the real code it came from (written anew here):

- a `.to(x)` whose `x` is shown to hold a dtype is a cast, no move;
- layers and tensors made on the host without a device, and moved only to the
  host, stay host values through `.parameters()`, `.state_dict()`, `.weight`
  and `zip`; in a class, only `__init__` and what it alone calls see them so;
- a local function's parameter that every call passes a device value;
- a project function annotated `-> torch.Tensor`, in its module and another;
- a comparison after `is not None` on a Lightning metric; `max`/`min` of tensors.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap

import pytest

from xferaudit.cli import main
from xferaudit.rules import table
from xferaudit.static.front.finder import find_in_source

MODES = ("proven", "gpu-first")
RULES = {m: dataclasses.replace(table(), implicit=m) for m in MODES}


def _sites(src: str, mode: str, rel: str = "lib/x.py"):
    res = find_in_source(textwrap.dedent(src), rel.rsplit("/", 1)[-1], RULES[mode], rel)
    assert res.error is None, res.error
    return res.sites


def sites(src: str, mode: str = "gpu-first", rel: str = "lib/x.py") -> list:
    """(line, code) of every site, explicit and implicit."""
    return sorted((s.line, s.rule) for s in _sites(src, mode, rel))


# --- a dtype is no device -------------------------------------------------------------------------

DTYPE_TEST = """\
import pytest
import torch

DTYPES = [torch.float16, pytest.param(torch.bfloat16, marks=pytest.mark.slow)]


@pytest.mark.parametrize("wtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("itype, otype", [(torch.float32, torch.float16), (torch.bfloat16, torch.float32)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_norm(wtype, itype, otype, dtype, device):
    x = torch.randn(8, 16, device=device, dtype=itype)
    w = torch.randn(16, device=device)
    x_pt = x.detach().clone().to(wtype)
    y = (x_pt * w.to(wtype)).to(otype)
    z = y.to(dtype)
    return z.to(device)


def cast(x, out, use_fp32):
    wtype = torch.float16
    a = x.to(wtype)
    b = x.to(out.dtype)
    c = x.to(x.dtype if use_fp32 else torch.float32)
    return a, b, c
"""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rel", ["tests/test_norm.py", "lib/x.py"])
def test_a_to_whose_argument_holds_a_dtype_is_no_move(mode, rel):
    # only `z.to(device)` moves (the device parameter: "cuda" or "cpu")
    assert sites(DTYPE_TEST, mode, rel) == [(17, "XFA203")]


def test_a_parameter_filled_with_devices_or_mixed_values_still_moves():
    src = """\
    import pytest
    import torch

    @pytest.mark.parametrize("target", [torch.float16, "cuda"])
    @pytest.mark.parametrize("dev", ["cuda", torch.device("cuda", 1)])
    def test_move(target, dev):
        x = torch.ones(3)
        return x.to(target), x.to(dev)

    def later(x):
        wtype = torch.float16
        wtype = pick()
        return x.to(wtype)
    """
    assert sites(src) == [(8, "XFA203"), (8, "XFA203"), (13, "XFA203")]


# --- made on the host, kept there -----------------------------------------------------------------

HOST_TEST = """\
import torch


def test_copy_weights():
    device = torch.device("cpu")
    ours = torch.nn.Linear(4, 4).to(device)
    theirs = torch.nn.Linear(4, 4)
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            q.copy_(p)
        theirs.weight.copy_(ours.weight)
    x = torch.randn(2, 4, device=device)
    y = ours(x)
    assert y.tolist() == theirs(x).tolist()
    for name, p in theirs.named_parameters():
        assert p.tolist(), name
    for k, v in ours.state_dict().items():
        assert v.cpu().tolist(), k
    state = theirs.cpu().state_dict()
    return state["weight"].tolist()
"""


@pytest.mark.parametrize("mode", MODES)
def test_layers_made_on_the_host_keep_host_parameters(mode):
    assert sites(HOST_TEST, mode, "tests/test_copy.py") == []


def test_a_host_layer_moved_or_handed_on_is_no_longer_on_the_host():
    src = """\
    import torch

    def test_moved(trainer, dev):
        model = torch.nn.Linear(4, 4)
        model.to("cuda")
        for p in model.parameters():
            print(p.tolist())
        other = torch.nn.Linear(4, 4)
        trainer.fit(other)
        w = other.weight.tolist()
        third = torch.nn.Linear(4, 4).to(dev)
        third.weight.tolist()
        made = torch.nn.Linear(4, 4, device="cuda")
        made.weight.cpu()
    """
    assert sites(src, "proven", "tests/test_m.py") == [
        (5, "XFA201"), (7, "XFA202"), (10, "XFA202"), (11, "XFA203"), (12, "XFA202"), (14, "XFA202")]


INIT_CLASS = """\
import numpy as np
import torch
from torch import nn


class PatchEmbed(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.pos_embed = nn.Parameter(torch.zeros(1, n, dim), requires_grad=False)
        self.proj = nn.Linear(dim, dim)
        self.initialize_weights()

    def initialize_weights(self):
        grid = np.ones((4, 8), dtype=np.float32)
        self.pos_embed.data.copy_(torch.from_numpy(grid).float().unsqueeze(0))
        w = self.proj.weight.data
        w.copy_(torch.from_numpy(grid))

    def reset(self, grid):
        self.pos_embed.data.copy_(torch.from_numpy(grid))

    def forward(self, x):
        if self.pos_embed.cpu().sum() > 0:
            x = x + 1
        return self.proj(x + self.pos_embed)


def refresh(m, grid):
    m.reset(grid)
"""


@pytest.mark.parametrize("mode", MODES)
def test_host_evidence_of_init_holds_only_in_what_init_alone_calls(mode):
    # initialize_weights runs only from __init__: its copies are host to host; reset() and
    # forward() may run after the module was moved: their copy and read stay
    assert sites(INIT_CLASS, mode) == [(20, "XFA203"), (23, "XFA202")]


def test_a_method_init_calls_that_is_called_elsewhere_too_is_not_init_only():
    src = INIT_CLASS.replace("def refresh(m, grid):\n    m.reset(grid)\n",
                             "def refresh(m):\n    m.initialize_weights()\n")
    assert sites(src) == [(15, "XFA203"), (17, "XFA203"), (20, "XFA203"), (23, "XFA202")]


# --- misses ----------------------------------------------------------------------------------------

GENERATE = """\
import torch


def generate(model, prompt, max_new_tokens, eos_id=None, device="cuda"):
    sequences = [prompt.to(device)]

    def should_stop(current_token, eos):
        if eos is not None and (current_token == eos).all():
            return True
        return False

    def log(token):
        print(token)

    for _ in range(max_new_tokens):
        logits = model(sequences[-1])
        sequences.append(torch.argmax(logits, dim=-1))
        if should_stop(sequences[-1], eos_id):
            break
    log("done")
    return torch.cat(sequences)
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_local_functions_parameter_takes_what_its_calls_pass(mode):
    # should_stop's only call passes the last generated token (on the device); log's a string
    assert [s for s in sites(GENERATE, mode) if s[1].startswith("XFA4")] == [(8, "XFA402")]


def test_a_local_function_handed_on_is_not_seeded_by_its_calls():
    src = GENERATE.replace('    log("done")\n', '    log("done")\n    hooks = [should_stop]\n')
    assert [s for s in sites(src) if s[1].startswith("XFA4")] == []


METRICS = """\
import torch


def on_validation_end(trainer, threshold):
    loss = trainer.callback_metrics.get("val_loss")
    if loss is not None and loss > 10:
        print("diverged")
    worst = max(loss, loss * 2)
    best = min(trainer.logged_metrics["train_loss"], threshold)
    n = max(len(trainer.callback_metrics), 2)
    return worst, best, n


def clip(x):
    x = x.cuda()
    top = max(x.sum(), 1.0)
    k = max(x.sum().item(), 1.0)
    return top, k
"""


def test_metrics_compared_after_is_not_none_and_max_min_of_tensors_are_reads():
    assert [s for s in sites(METRICS) if s[1].startswith("XFA4")] == [
        (6, "XFA402"), (8, "XFA404"), (9, "XFA404"), (16, "XFA404")]
    # the proven reading: only what the file places (x.cuda())
    assert [s for s in sites(METRICS, "proven") if s[1].startswith("XFA4")] == [(16, "XFA404")]


ANNOTATED = """\
import torch
from torch import Tensor


def validate(model, batch) -> torch.Tensor:
    out = model(batch)
    return out.mean()


def host_mean(xs) -> Tensor:
    losses = torch.zeros(len(xs))
    return losses.mean()


def maybe(x) -> "Optional[Tensor]":
    return pick(x)


def fit(model, batch, xs):
    v = validate(model, batch)
    print(f"val loss {v:.3f}")
    h = host_mean(xs)
    print(f"{h:.3f}")
    return float(maybe(batch))
"""


def test_a_function_annotated_to_return_a_tensor_returns_one():
    assert [s for s in sites(ANNOTATED) if s[1].startswith("XFA4")] == [(21, "XFA403")]
    assert [s for s in sites(ANNOTATED, "proven") if s[1].startswith("XFA4")] == []


FINETUNE = """\
from pkg.utils import host_mean, validate, maybe


def main(model, batch, xs):
    val_loss = validate(model, batch)
    print(f"val loss {val_loss:.3f}")
    ppl = float(val_loss)
    h = host_mean(xs)
    print(f"{h:.3f}")
    return float(maybe(batch)), ppl
"""


@pytest.mark.parametrize("cache", [True, False])
def test_a_function_annotated_to_return_a_tensor_returns_one_in_another_module(tmp_path, monkeypatch, capsys,
                                                                               cache):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg/utils.py").write_text(ANNOTATED, encoding="utf-8")
    (tmp_path / "pkg/finetune.py").write_text(FINETUNE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = [] if cache else ["--no-cache"]

    def found(mode):
        main(["sites", ".", "--format", "json", "--implicit", mode, *args])
        return sorted((r["line"], r["rule"]) for r in json.loads(capsys.readouterr().out or "[]")
                      if r.get("implicit") and r["path"].endswith("finetune.py"))

    assert found("gpu-first") == [(6, "XFA403"), (7, "XFA401")]
    assert found("proven") == []
    assert found("gpu-first") == [(6, "XFA403"), (7, "XFA401")]  # (read back from the cache, where kept)


def test_a_model_of_another_module_made_without_a_device_is_on_the_host():
    src = """\
    import torch
    from lib.model import GPT, Boxes

    def test_compare(config, fabric, t):
        device = torch.device("cpu")
        ours = GPT(config).to(device)
        theirs = GPT(config, device="cuda").to(device)
        boxes = Boxes(t).to(device)
        with fabric.init_module():
            inited = GPT(config)
        inited.to(device)
        for p in ours.parameters():
            p.tolist()
    """
    # made on the host and kept there: no crossing; made with device=, from a tensor, or in
    # Fabric's init_module (on its device): down to the host
    assert sites(src, "proven", "tests/test_c.py") == [(7, "XFA202"), (8, "XFA202"), (11, "XFA202")]


SYNC_TEST = """\
import pytest
import torch
from lib.model import Attention, HFModel


def sync_weights(ours, theirs):
    with torch.no_grad():
        theirs.q_proj.weight.copy_(ours.attn.q_proj.weight)
        theirs.layers[0].norm.weight.copy_(ours.norm_1.weight)


@pytest.mark.parametrize("device", [torch.device("cpu")])
def test_against_hf(device):
    config_ours = make_config()
    ours = Attention(config_ours, block_idx=0).to(device)
    theirs = HFModel(config_ours).to(device)
    sync_weights(ours, theirs)
    theirs.lm_head.weight.copy_(ours.lm_head.weight)
    x = torch.randn(2, 4, device=device)
    assert ours(x).sum().item() == theirs(x).sum().item()
"""


@pytest.mark.parametrize("mode", MODES)
def test_parts_of_models_made_on_the_host_and_a_parametrized_host_device_stay_on_the_host(mode):
    assert sites(SYNC_TEST, mode, "tests/test_sync.py") == []
    # the same with a device that may be an accelerator: every move and read is back, but the copy
    # between the two models moved to the same device (line 18: device to device)
    src = SYNC_TEST.replace('[torch.device("cpu")]', '[torch.device("cpu"), torch.device("cuda")]')
    assert sites(src, mode, "tests/test_sync.py") == [
        (8, "XFA203"), (9, "XFA203"), (15, "XFA203"), (16, "XFA203"), (20, "XFA202"), (20, "XFA202")]


def test_host_modules_handed_down_two_helpers_and_through_enumerate_zip_stay_on_the_host():
    src = """\
    import pytest
    import torch
    from lib.model import Block, HFModel


    def sync_attention(ours, theirs):
        theirs.q_proj.weight.copy_(ours.q_proj.weight)


    def sync_block(ours, theirs):
        with torch.no_grad():
            sync_attention(ours.attn, theirs.self_attn)
            for i, (mine, other) in enumerate(zip(ours.experts, theirs.experts)):
                other.up_proj.weight.copy_(mine.fc_2.weight)


    @pytest.mark.parametrize("device", [torch.device("cpu")])
    def test_block(device):
        config_ours = make_config()
        block = Block(config_ours, block_idx=0).to(device)
        hf_block = HFModel(config_ours).to(device).model.layers[0]
        sync_block(block, hf_block)
    """
    assert sites(src, "proven", "tests/test_block.py") == []
    moved = src.replace('[torch.device("cpu")]', '["cpu", "cuda"]')
    assert sites(moved, "proven", "tests/test_block.py") == [(7, "XFA203"), (14, "XFA203"), (20, "XFA203"),
                                                            (21, "XFA203")]


def test_a_copy_between_values_the_code_shows_on_one_device_is_no_move():
    src = """\
    import torch

    def step(conv_state, ssm_state, x, dA, dB, w, n):
        conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))
        ssm_state.copy_(ssm_state * dA + x * dB)
        stacked = w.new_zeros(2 * n, w.shape[1])
        stacked[:n].copy_(w[:n])
        conv_state.copy_(x)
        ssm_state.copy_(ssm_state.cpu() * 2)


    def test_layers(device, dtype, other):
        ours = Layer(4).to(device).to(dtype)
        ref = Ref(4).to(device).to(dtype)
        moved = Ref(4).to(other)
        with torch.no_grad():
            ours.q_proj.weight.copy_(ref.q_proj.weight)
            ours.k_proj.weight.copy_(moved.k_proj.weight)
    """
    # each copy computed from its destination, made like its source, or between two modules moved to
    # the same device is none; a copy from a value of its own (x) or through .cpu(), or between modules
    # moved to different devices, stays
    assert sites(src) == [(8, "XFA203"), (9, "XFA202"), (9, "XFA203"), (13, "XFA203"), (14, "XFA203"),
                          (15, "XFA203"), (18, "XFA203")]


def test_a_cute_dtype_is_no_device():
    src = """\
    import cutlass
    import cutlass.cute as cute

    def load(tXrX, tYrY, x):
        return tXrX.load().to(cute.Float32), tYrY.load().to(cutlass.BFloat16), x.to(cute.Tensor)
    """
    assert sites(src) == [(5, "XFA203")]  # (the last: cute.Tensor is no dtype)


def test_a_dtype_read_from_an_attribute_and_copies_between_factories_on_one_device():
    src = """\
    import torch

    def backward(ctx, grad, weight, shape):
        orig = ctx.compute_dtype
        wtype = weight.dtype
        static_a = torch.randn(*shape, device="cuda")
        fresh_a = torch.randn(*shape, device="cuda").contiguous()
        static_a.copy_(fresh_a)
        host = torch.randn(*shape)
        static_a.copy_(host)
        return grad.to(orig), weight.to(wtype), grad.to(ctx.device)
    """
    assert sites(src) == [(10, "XFA203"), (11, "XFA203")]


# --- a tensor's `is_*` methods and torch's `are_*` switches give Python bools -------------------------

IS_METHODS = """\
import torch


def assert_close(actual, expected):
    x = torch.ones(3, device="cuda") * actual
    if x.is_conj() != expected.is_conj():
        raise AssertionError("conj bits differ")
    if x.is_neg() or x.is_inference():
        return
    if torch.are_deterministic_algorithms_enabled():
        torch.use_deterministic_algorithms(False)
    if x.is_nonzero():
        return x
    if x.sum() > 0:
        return x
"""


@pytest.mark.parametrize("mode", MODES)
def test_is_methods_and_are_switches_are_no_reads(mode):
    """`t.is_conj()`, `t.is_neg()`, `t.is_inference()` (a tensor's flags) and
    `torch.are_deterministic_algorithms_enabled()` read nothing from the
    device; `t.is_nonzero()` reads the value, and `t.sum() > 0` is a read."""
    assert [(ln, code) for ln, code in sites(IS_METHODS, mode) if code.startswith("XFA4")] == \
        [(12, "XFA402"), (14, "XFA402")]
