"""The simulated accelerator (xferaudit.testing): a device PyTorch's dispatcher
believes in, with host memory behind it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode

from xferaudit import testing
from xferaudit.testing import SimulatedDeviceError, is_simulated, simulated_device


class Ops(TorchDispatchMode):
    """Logs (op name, input devices, output devices) of every dispatched op."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        ins = [str(a.device) for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        outs = [str(o.device) for o in (out if isinstance(out, (tuple, list)) else [out])
                if isinstance(o, torch.Tensor)]
        self.seen.append((func.__name__.split(".")[0], ins, outs, dict(kwargs)))
        return out

    def names(self):
        return [s[0] for s in self.seen]


@pytest.fixture(scope="module")
def dev():
    return simulated_device()


def test_device_has_a_name_and_an_index_and_setup_is_idempotent(dev):
    assert dev == torch.device("fakegpu", 0)
    assert dev.type == "fakegpu" and dev.index == 0
    assert simulated_device() == dev  # a second call is fine
    assert torch._C._get_privateuse1_backend_name() == "fakegpu"
    assert torch.fakegpu.is_available() and torch.fakegpu.device_count() == 1
    with pytest.raises(SimulatedDeviceError, match="one index"):
        simulated_device(1)


def test_upload_is_a_to_copy_the_dispatcher_sees(dev):
    x = torch.arange(6, dtype=torch.float32)
    with Ops() as ops:
        y = x.to(torch.device("fakegpu", 0))
    assert is_simulated(y) and y.device == dev and not y.is_cpu
    assert ops.seen[0][0] == "_to_copy"
    assert ops.seen[0][1] == ["cpu"] and ops.seen[0][2] == ["fakegpu:0"]
    assert torch.equal(y._data, x)
    assert y._data.data_ptr() != x.data_ptr()  # a real copy, not an alias


def test_download_item_and_copy_into_host_are_crossings(dev):
    x = torch.tensor([1.5, -2.0, 4.0])
    y = x.to(dev)
    with Ops() as ops:
        back = y.cpu()
    assert not is_simulated(back) and back.device.type == "cpu"
    assert torch.equal(back, x)
    assert ops.seen[0][:3] == ("_to_copy", ["fakegpu:0"], ["cpu"])

    with Ops() as ops:
        v = y.sum().item()
    assert v == pytest.approx(3.5)
    assert "_local_scalar_dense" in ops.names()
    dense = next(s for s in ops.seen if s[0] == "_local_scalar_dense")
    assert dense[1] == ["fakegpu:0"]

    host = torch.zeros(3)
    with Ops() as ops:
        r = host.copy_(y)
    assert r is host and torch.equal(host, x)
    assert ops.seen[0][0] == "copy_" and ops.seen[0][1] == ["cpu", "fakegpu:0"]


def test_tensor_factory_with_device_lifts_onto_the_device(dev):
    with Ops() as ops:
        t = torch.tensor([1.0, 2.0], device=dev)
    assert is_simulated(t) and t.tolist() == [1.0, 2.0]
    assert "lift_fresh" in ops.names()


def test_factories_and_arithmetic_on_the_device(dev):
    assert torch.zeros(2, 3, device=dev)._data.tolist() == [[0.0] * 3] * 2
    assert torch.arange(1, 7, 2, device=dev).tolist() == [1, 3, 5]
    assert torch.eye(2, 3, device=dev).cpu().sum().item() == 2.0
    assert torch.full((2,), 7.0, device=dev).device == dev
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).to(dev)
    b = (a @ a.t() + 1).relu()
    assert is_simulated(b) and b.device == dev
    assert b.cpu().tolist() == [[6.0, 12.0], [12.0, 26.0]]
    c = a.clone()
    same = c.add_(1)
    assert same is c and c.cpu().tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert a.fakegpu().is_fakegpu  # generated Tensor methods


def test_a_training_step_matches_the_same_step_on_cpu(dev):
    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        model = model.to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(1)
        losses = []
        for _ in range(3):
            xb = torch.randn(8, 2, generator=g).to(device)
            loss = model(xb).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return model, losses

    ref, ref_losses = run("cpu")
    sim, sim_losses = run(dev)
    assert sim_losses == pytest.approx(ref_losses, rel=1e-5)
    for p_ref, p_sim in zip(ref.parameters(), sim.parameters()):
        assert p_sim.device == dev and is_simulated(p_sim)
        assert p_sim.grad is not None and p_sim.grad.device == dev
        assert torch.allclose(p_sim.cpu(), p_ref, atol=1e-6)


def test_linear_to_device(dev):
    m = torch.nn.Linear(2, 2).to(dev)
    assert {p.device for p in m.parameters()} == {dev}
    out = m(torch.ones(1, 2).to(dev))
    assert out.shape == (1, 2) and out.device == dev


def test_format_tolist_numpy_like_a_device_tensor(dev):
    y = torch.tensor([0.25, 0.5]).to(dev)
    assert f"{y.sum():.2f}" == "0.75"
    assert "fakegpu:0" in repr(y)
    assert y.tolist() == [0.25, 0.5]
    with pytest.raises(TypeError, match="cpu"):
        y.numpy()
    assert y.numpy(force=True).tolist() == [0.25, 0.5]


def test_what_it_cannot_do_raises_clearly(dev):
    y = torch.randn(2, 3).to(dev)
    with pytest.raises(SimulatedDeviceError, match="shape"):
        y.t_()
    with pytest.raises(SimulatedDeviceError, match="pickled"):
        import pickle

        pickle.dumps(y)


def test_is_simulated_is_false_for_host_tensors(dev):
    assert not is_simulated(torch.ones(1))
    assert testing.NAME == "fakegpu"


def test_backward_on_the_device_then_exit_is_clean():
    # Autograd's device threads that ran Python can abort the interpreter at
    # exit; simulated_device() keeps backward on the calling thread.
    code = textwrap.dedent(
        """
        import torch
        from xferaudit.testing import simulated_device
        dev = simulated_device()
        m = torch.nn.Linear(3, 1).to(dev)
        for _ in range(2):
            m(torch.randn(4, 3).to(dev)).sum().backward()
        print("ok", m.weight.grad.device)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "ok fakegpu:0"


def test_torch_compile_on_the_device_warns_once_and_still_computes():
    """Dynamo cannot compile simulated tensors: it graph-breaks or falls back to
    eager. That is said once (a SimulatedDeviceWarning), not left silent, and
    the results are eager mode's."""
    code = textwrap.dedent(
        """
        import warnings
        import torch
        from xferaudit.testing import SimulatedDeviceWarning, simulated_device

        dev = simulated_device()
        x = torch.arange(4.0).to(dev)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            f = torch.compile(lambda t: (t * 2).sum() + 1, backend="eager")
            a, b = f(x), f(x)
            m = torch.compile(torch.nn.Linear(4, 2).to(dev), backend="eager")
            m(x)
            (x * 3).sum().item()  # eager, outside torch.compile: no warning
        ours = [w for w in seen if issubclass(w.category, SimulatedDeviceWarning)]
        print(len(ours), float(a.cpu()), float(b.cpu()))
        print(str(ours[0].message) if ours else "")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    count, a, b = r.stdout.splitlines()[0].split()
    assert (count, a, b) == ("1", "13.0", "13.0")
    assert "torch.compile" in r.stdout and "fakegpu" in r.stdout
    assert "recompile_limit" not in r.stderr  # Dynamo stays out of the device's own code


def test_no_warning_without_torch_compile(dev):
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x = torch.ones(3).to(dev)
        (x + 1).sum().item()
    assert not [w for w in seen if issubclass(w.category, testing.SimulatedDeviceWarning)]


# --- the simulated device and the machine's pinned memory, in one process --------------

def test_pinning_asks_the_real_accelerator_not_the_simulated_device(dev):
    """PyTorch takes a registered PrivateUse1 backend as the accelerator, and a
    Python backend has no pinned-memory allocator: pin_memory() would fail with
    PrivateUse1's NotImplementedError even where CUDA is there to pin."""
    x = torch.randn(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation warning from the device handed on
        assert x.is_pinned() is False
    if torch.cuda.is_available():
        assert x.pin_memory().is_pinned()  # (tests/runtime/test_simulated_pinned_gpu.py: the rest)
        return
    with pytest.raises(RuntimeError) as ei:
        x.pin_memory()
    assert "PrivateUse1HooksInterface" not in str(ei.value)
    assert "needs a real accelerator" in str(ei.value) and "fakegpu" in str(ei.value)
    assert torch.Tensor.pin_memory.__doc__ and torch.Tensor.is_pinned.__doc__  # help() still reads


ROUTED_TO_CUDA = textwrap.dedent("""
    import warnings
    import torch
    torch.cuda.is_available = lambda: True  # as on a GPU machine (this build has no CUDA)
    from xferaudit.testing import simulated_device
    simulated_device()
    warnings.simplefilter("error")
    x = torch.randn(4)
    assert x.is_pinned() is False  # asked of CUDA, without torch's deprecation warning
    try:
        x.pin_memory()
    except Exception as e:  # this build cannot pin for CUDA: the error says so, not PrivateUse1's
        print(type(e).__name__, e)
""")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU tests pin for real")
def test_pinning_beside_the_simulated_device_goes_to_cuda_where_there_is_one():
    r = subprocess.run([sys.executable, "-c", ROUTED_TO_CUDA], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "CUDA" in r.stdout and "PrivateUse1" not in r.stdout, r.stdout


def test_setting_up_beside_cuda_warns_that_a_cuda_backward_will_fail():
    """On a machine with CUDA, registering the simulated device breaks CUDA's
    backward in that process (inside torch): the set-up says so, once."""
    import subprocess
    import sys

    code = (
        "import warnings, torch\n"
        "torch.cuda.is_available = lambda: True\n"
        "from xferaudit.testing import SimulatedDeviceWarning, simulated_device\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    simulated_device(); simulated_device()\n"
        "said = [str(x.message) for x in w if issubclass(x.category, SimulatedDeviceWarning)]\n"
        "assert len(said) == 1 and '161129' in said[0], said\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_no_test_module_sets_the_simulated_device_up_at_import():
    """A GPU suite collects every module in one process: a module-level
    ``simulated_device()`` would register it before the CUDA tests run and make
    every CUDA backward fail (pytorch#161129). Modules say ``DEV = None`` and
    tests/conftest.py sets it before their first test."""
    import ast
    from pathlib import Path

    found = []
    for path in Path(__file__).parent.rglob("test*.py"):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:  # (fixtures of old Python)
            continue
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) \
                        == "simulated_device":
                    found.append(f"{path}:{node.lineno}")
    assert found == []
