"""Fixtures for the runtime's tests and the packs' (tests/runtime, tests/packs):
a clean tally per test, and a fake device.

Nothing here imports libcst: the GPU machine runs these tests without it.
"""

from __future__ import annotations

import signal

import pytest

from xferaudit.runtime.counted import recorder


def pytest_configure(config):
    """Ctrl-C as a terminal sends it, whatever started the tests: a shell
    without job control starts a background job (``pytest &``, a CI script's
    ``&``) with SIGINT ignored, which its children inherit through exec, so
    the tests that send a program SIGINT would see it ignored (a program that
    ignores SIGINT is right to go on; that is not what they test)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_runtest_setup(item):
    """A test module that says ``DEV = None`` gets the simulated device there
    before its first test runs, not at import: collecting a module must not
    set it up, since torch then takes it for the process's accelerator and a
    backward over CUDA tensors fails inside torch (pytorch/pytorch#161129); a
    GPU suite (``pytest -m gpu tests``) collects every module in one process.
    A GPU test in such a module does not set it up either (it runs before the
    CUDA backward tests); one that needs it says ``simulated_beside_cuda``."""
    mod = getattr(item, "module", None)
    if item.get_closest_marker("gpu") is not None and item.get_closest_marker("simulated_beside_cuda") is None:
        return
    if mod is not None and "DEV" in vars(mod) and mod.DEV is None:
        from xferaudit.testing import simulated_device

        mod.DEV = simulated_device()


def pytest_collection_modifyitems(config, items):
    """GPU tests first, then the rest, and the tests that set up the simulated
    device beside CUDA last: on a CUDA machine a test that runs a CUDA backward
    must come before any test that sets up the simulated device (see
    :func:`pytest_runtest_setup`). Without CUDA the GPU tests skip either way."""
    def order(it):
        if it.get_closest_marker("simulated_beside_cuda") is not None:
            return 2
        return 0 if it.get_closest_marker("gpu") is not None else 1

    items.sort(key=order)


@pytest.fixture(autouse=True)
def _clean_tally(request):
    if "static" in request.node.path.parts:  # (the static half's tests count nothing)
        yield
        return
    on, guard = recorder.STATE.on, recorder.STATE.guard
    recorder.reset()
    recorder.STATE.on = False
    yield
    recorder.reset()
    recorder.STATE.on = on
    recorder.STATE.guard = guard


@pytest.fixture
def fake_cuda():
    """A factory of tensors that say they live on ``cuda:0`` on a CPU-only build.

    A wrapper subclass whose data stays on the host: ``.cpu()``, ``.item()``,
    ``.to()`` and ``copy_`` work and really return host tensors, so the
    device -> host direction can be tested without a GPU (``.tolist()`` and
    ``.numpy()`` refuse tensor subclasses).
    """
    torch = pytest.importorskip("torch")
    from torch.utils._pytree import tree_map

    class FakeCuda(torch.Tensor):
        @staticmethod
        def __new__(cls, inner, device="cuda:0"):
            return torch.Tensor._make_wrapper_subclass(
                cls, inner.shape, dtype=inner.dtype, device=device, strides=inner.stride()
            )

        def __init__(self, inner, device="cuda:0"):
            self.inner = inner

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            dev = next(a.device for a in list(args) + list(kwargs.values()) if isinstance(a, FakeCuda))

            def un(a):
                return a.inner if isinstance(a, FakeCuda) else a

            if func is torch.ops.aten._to_copy.default:
                target = torch.device(kwargs.get("device") or dev)
                kw = {k: v for k, v in kwargs.items() if k != "device"}
                out = func(un(args[0]), **kw)
                return out if target.type == "cpu" else FakeCuda(out, target)
            if func._schema.is_mutable:  # copy_ and friends: the result is the receiver
                func(*tree_map(un, args), **tree_map(un, kwargs))
                return args[0]
            out = func(*tree_map(un, args), **tree_map(un, kwargs))
            return tree_map(lambda o: FakeCuda(o, dev) if isinstance(o, torch.Tensor) else o, out)

    def make(data, device="cuda:0"):
        t = data if isinstance(data, torch.Tensor) else torch.tensor(data)
        return FakeCuda(t, device)

    return make


@pytest.fixture
def make_project(tmp_path, monkeypatch):
    """``make_project({"train.py": src, ...})``: a project folder (a
    ``[tool.xferaudit]`` pyproject.toml and the files given), made the working
    directory; returns its path."""
    def make(files: dict) -> "object":
        (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
        for name, text in files.items():
            (tmp_path / name).write_text(text)
        monkeypatch.chdir(tmp_path)
        return tmp_path

    return make
