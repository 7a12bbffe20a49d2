"""A simulated accelerator for CPU-only machines: ``simulated_device()``.

Why: transfer budgets and the runtime guard are about crossings between the
host and a device, and CI machines rarely have a GPU. On CPU alone nothing ever
crosses, so a budget test would pass for the wrong reason. This module makes a
device that does not exist: PyTorch's PrivateUse1 backend, renamed
``fakegpu``, whose tensors keep their data in ordinary host memory. To
PyTorch's dispatcher a ``fakegpu`` tensor is a device tensor: ``x.to(dev)`` is
an ``aten._to_copy`` to another device, ``.cpu()`` one back, ``.item()`` an
``aten._local_scalar_dense`` of a device tensor, ``cpu.copy_(x)`` a
cross-device ``aten.copy_``. So the counting wrappers, the guard and budgets
see the same events they would see on CUDA::

    from xferaudit.testing import simulated_device

    dev = simulated_device()                 # torch.device("fakegpu", 0)
    model = torch.nn.Linear(2, 2).to(dev)
    loss = model(torch.randn(4, 2).to(dev)).pow(2).mean()
    loss.backward(); opt.step(); loss.item()

How: ``torch.utils.backend_registration._setup_privateuseone_for_python_backend``
(PyTorch's own, experimental, Python-only way to stand up PrivateUse1: device
guard, hooks, ``torch.fakegpu`` module, ``Tensor.fakegpu()``/``is_fakegpu``),
two PrivateUse1 kernels (``empty.memory_format`` and ``empty_strided``, which
every copy *to* the device and every factory call on it reaches), and a tensor
subclass :class:`SimulatedTensor` whose ``__torch_dispatch__`` runs each op on
the host tensor it wraps and wraps the results again. Calling
:func:`simulated_device` twice is fine; it sets up once per process.

A program written for CUDA runs on it unmodified under ``xferaudit run
--simulate`` (:mod:`xferaudit.simulate`: CUDA's names lead here, autocast and
pinned memory are simulated); Lightning gets it through
``xferaudit.testing_lightning.SimulatedAccelerator``.

What it cannot do (it is a test double, not a device):

* No speed, no asynchrony, no streams or events, no memory accounting:
  ``non_blocking=True`` copies are synchronous; ``torch.fakegpu.synchronize()``
  does nothing.
* One device only: ``fakegpu:0``. ``fakegpu:1`` is the same device.
* It is laxer than CUDA: an op mixing host and simulated tensors (``cpu_t +
  dev_t``) runs instead of raising "expected all tensors to be on the same
  device". The guard still flags such ops as crossings.
* No storage: ``data_ptr()``, ``untyped_storage()``, ``torch.save`` of a
  simulated tensor, ``pin_memory``, DLPack and ``__cuda_array_interface__``
  fail. Call ``.cpu()`` first.
* No ``torch.compile`` of code that computes on it (Inductor has no
  ``fakegpu`` code generator) and no autocast. Dynamo graph-breaks on its
  tensors or falls back to eager; the first time that happens in a process,
  a :class:`SimulatedDeviceWarning` says so, and the code runs eagerly.
  Compile on CPU tensors instead.
* ``torch.tensor([a, b])`` (and ``as_tensor``) of simulated tensors raises
  inside PyTorch (an internal assert of its Python dispatcher) where CUDA
  reads each element back: build such tensors on CUDA to test them.
* In-place ops that change a tensor's shape or strides (``resize_`` to a new
  size, ``set_``, ``t_``, ``squeeze_``, ``unsqueeze_``, ``transpose_``,
  ``as_strided_``) raise: the subclass's metadata is fixed when it is made.
* Autograd runs a device's backward on a worker thread by default. Such a
  thread that ran Python can abort the interpreter at exit (PyTorch's device
  threads outlive Python finalisation), so :func:`simulated_device` turns
  autograd multithreading off for the calling thread: backward then runs on
  the thread that calls it. Call :func:`simulated_device` in each thread that
  runs backward on simulated tensors.
* The PrivateUse1 slot is per process: it cannot coexist with another
  out-of-tree backend, and it cannot be undone.
* PyTorch takes a registered PrivateUse1 backend as *the* accelerator of the
  process (``torch.accelerator.current_accelerator()`` is ``fakegpu`` from
  then on), and a Python backend cannot give it a pinned-memory allocator. So
  ``Tensor.pin_memory()`` and ``Tensor.is_pinned()`` (which ask the
  accelerator) keep answering for the machine's real accelerator (CUDA, else
  XPU): the simulated device and CUDA's pinned memory live together in one
  process (a GPU suite that also runs simulated tests; a ``DataLoader(...,
  pin_memory=True)`` on a GPU machine). Factories with ``pin_memory=True``
  prefer CUDA by themselves. Without a real accelerator, ``pin_memory()``
  raises as it would without the simulated device (no pinned memory exists).
"""

from __future__ import annotations

import sys
import threading
import warnings
from typing import Any

from .runtime.counted.recorder import new_lock_after_fork

NAME = "fakegpu"

__all__ = [
    "NAME", "SimulatedDeviceError", "SimulatedDeviceWarning", "SimulatedTensor", "is_simulated",
    "simulated_device",
]


class SimulatedDeviceError(RuntimeError):
    """The simulated device cannot be set up here, or an op it cannot simulate ran."""


_BESIDE_CUDA_MESSAGE = (
    "xferaudit: the simulated device is now torch's accelerator in this process, beside CUDA: "
    "a backward over CUDA tensors will fail inside torch's autograd engine "
    "('opt_ready_stream && opt_parent_stream', pytorch/pytorch#161129). Run CUDA training "
    "and the simulated device in separate processes, or set the simulated device up last."
)


class SimulatedDeviceWarning(UserWarning):
    """Issued once per process when ``torch.compile`` (Dynamo) meets a simulated
    tensor, and when the simulated device is set up on a machine with CUDA
    (a CUDA backward in the same process then fails inside torch).

    Dynamo cannot trace the simulated device's tensors: it graph-breaks on them
    or falls back to running the code eagerly. Results and counts are then
    those of eager mode, so a compiled step on the simulated device is not a
    test of the compiled step.
    """


_compile_warned = False
_COMPILE_MESSAGE = (
    "torch.compile met a tensor of the simulated device (fakegpu): Dynamo graph-breaks on "
    "it or falls back to eager, so this code runs eagerly (results and counts are eager "
    "mode's). Compile on CPU or CUDA tensors, or leave torch.compile out on fakegpu."
)


def _warn_compile() -> bool:
    global _compile_warned
    if not _compile_warned:
        _compile_warned = True
        import warnings

        warnings.warn(_COMPILE_MESSAGE, SimulatedDeviceWarning, stacklevel=2)
    return True


_lock = threading.Lock()
new_lock_after_fork(sys.modules[__name__], "_lock")
_ready = False
_keep: list = []  # the torch.library.Library holding our kernels must stay alive
SimulatedTensor: Any = None  # the class, made on first use (it needs torch)


class _BackendModule:
    """What ``torch.fakegpu`` answers: one device, always available."""

    def is_initialized(self) -> bool:
        return True

    def is_available(self) -> bool:
        return True

    def current_device(self) -> int:
        return 0

    def device_count(self) -> int:
        return 1

    def set_device(self, device: Any) -> None:
        pass

    def synchronize(self, device: Any = None) -> None:
        pass

    def _is_in_bad_fork(self) -> bool:
        return False

    def manual_seed(self, seed: int) -> None:
        pass

    def manual_seed_all(self, seed: int) -> None:
        pass

    def __repr__(self) -> str:
        return "<xferaudit simulated device module torch.fakegpu>"


def _make_class(torch: Any) -> Any:
    from torch.utils._pytree import tree_map

    Tensor = torch.Tensor
    DEV = torch.device(NAME, 0)
    CPU = torch.device("cpu")
    make = Tensor._make_wrapper_subclass
    # Set while code runs under torch.compile (Dynamo's frame hook); None or
    # False otherwise. Seen here, in eager code, it means Dynamo broke the
    # graph or fell back on a simulated tensor.
    compile_hook = torch._C._dynamo.eval_frame.get_eval_frame_callback

    class _SimulatedTensor(Tensor):
        """A tensor PyTorch sees on ``fakegpu:0`` whose data is a host tensor (``._data``)."""

        @staticmethod
        def __new__(cls, data: Any) -> Any:
            r = make(
                cls, data.size(), strides=data.stride(), storage_offset=data.storage_offset(),
                dtype=data.dtype, layout=data.layout, device=DEV, requires_grad=False,
            )
            r._data = data
            return r

        def __format__(self, spec: str) -> str:
            # torch.Tensor.__format__ reads 0-dim *plain* tensors with .item();
            # do the same here (a scalar read of a device tensor, as on CUDA).
            if self.dim() == 0:
                return self.item().__format__(spec)
            return Tensor.__format__(self, spec)

        def tolist(self) -> Any:
            # Tensor.tolist refuses subclasses; on CUDA it is a copy to the host.
            return self.cpu().tolist()

        def numpy(self, *, force: bool = False) -> Any:
            if not force:
                raise TypeError(
                    f"can't convert {DEV} device type tensor to numpy. "
                    "Use Tensor.cpu() to copy the tensor to host memory first."
                )
            return self.detach().cpu().resolve_conj().resolve_neg().numpy()

        def __reduce_ex__(self, proto: int) -> Any:  # pragma: no cover - documented limitation
            raise SimulatedDeviceError(
                "a simulated fakegpu tensor cannot be pickled or saved; call .cpu() first"
            )

        @classmethod
        def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if not _compile_warned and compile_hook() not in (None, False):
                _warn_compile()
            return _run(func, args, kwargs)

    def _run(func: Any, args: Any, kwargs: Any) -> Any:
        """One op on the host data of the simulated tensors in it, results wrapped."""
        kwargs = kwargs or {}
        inputs: dict = {}  # id(host data) -> its wrapper
        plain: set = set()  # ids of host tensors passed in

        def unwrap(x: Any) -> Any:
            if isinstance(x, _SimulatedTensor):
                inputs[id(x._data)] = x
                return x._data
            if isinstance(x, Tensor):
                plain.add(id(x))
                return x
            if isinstance(x, torch.device) and x.type == NAME:
                return CPU
            return x

        uargs = tree_map(unwrap, args)
        ukw = tree_map(unwrap, kwargs)
        to_host = False
        dev = kwargs.get("device")
        if dev is not None:
            # An explicit device: host output if it names the CPU.
            to_host = torch.device(dev).type == "cpu"
            ukw["device"] = CPU
        out = func(*uargs, **ukw)

        def wrap(x: Any) -> Any:
            if not isinstance(x, Tensor):
                return x
            same = inputs.get(id(x))
            if same is not None:
                # In-place and out= ops return their input: hand back its wrapper,
                # whose shape is fixed (resize_, t_, squeeze_, out= of a new size).
                if same.shape != x.shape or same.stride() != x.stride():
                    raise SimulatedDeviceError(
                        f"the simulated device cannot run {func}: it changes a tensor's "
                        "shape or strides in place; run it on a CPU tensor instead"
                    )
                return same
            if to_host or id(x) in plain or x.device.type != "cpu":
                # Asked for on the host, or a host input returned (cpu_dst.copy_(src)).
                return x
            return _SimulatedTensor(x)

        return tree_map(wrap, out)

    _SimulatedTensor.__name__ = _SimulatedTensor.__qualname__ = "SimulatedTensor"
    _SimulatedTensor.__module__ = __name__
    _dynamo_skip(torch, _SimulatedTensor.__torch_dispatch__.__func__, recursive=False)
    _dynamo_skip(torch, _run, _SimulatedTensor.__new__)
    return _SimulatedTensor


def _dynamo_skip(torch: Any, *functions: Any, recursive: bool = True) -> None:
    """Keep Dynamo out of the simulated device's own Python (and what it calls).

    Dynamo cannot compile it anyway; tracing it only adds graph breaks and
    recompilations (and their log lines) to a compiled region that falls back
    to eager on simulated tensors.
    """
    try:
        from torch._dynamo.types import FrameAction, FrameExecStrategy

        for fn in functions:
            torch._C._dynamo.eval_frame.set_code_exec_strategy(
                fn.__code__,
                FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP if recursive else FrameAction.DEFAULT),
            )
    except Exception:  # pragma: no cover - another torch: tracing it is only slower
        pass


# torch warns when a device is passed to is_pinned(); here it is passed on purpose.
_DEVICE_ARG_DEPRECATED = r"The argument 'device' of Tensor\.is_pinned\(\) is deprecated"


def _keep_host_pinning(torch: Any) -> None:
    """``Tensor.pin_memory()`` and ``Tensor.is_pinned()`` ask the process's
    accelerator, which is PrivateUse1 once it is registered; they are given the
    machine's real accelerator instead (found on first use), as before the
    simulated device was set up. A device named in the call is kept."""
    bare_pin, bare_is_pinned = torch.Tensor.pin_memory, torch.Tensor.is_pinned
    # The op pin_memory() calls, with a device and without a deprecation warning.
    pin_to = getattr(torch, "_pin_memory", None) or torch.ops.aten._pin_memory.default
    found: list = []

    def real_accelerator(device: Any) -> Any:
        if device is not None and torch.device(device).type != NAME:
            return None  # the caller's own choice
        if not found:
            xpu = getattr(torch, "xpu", None)
            found.append(torch.device("cuda") if torch.cuda.is_available() else
                         torch.device("xpu") if xpu is not None and xpu.is_available() else None)
        return found[0]

    def is_pinned(self: Any, device: Any = None) -> bool:
        acc = real_accelerator(device)
        if acc is None:
            return bare_is_pinned(self) if device is None else bare_is_pinned(self, device)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _DEVICE_ARG_DEPRECATED, DeprecationWarning)
            return bare_is_pinned(self, acc)

    def pin_memory(self: Any, device: Any = None) -> Any:
        acc = real_accelerator(device)
        if acc is None and device is not None:
            return bare_pin(self, device)
        if acc is None:
            raise RuntimeError(
                f"pin_memory() needs a real accelerator (CUDA, XPU); the simulated {NAME} device has "
                "no pinned memory: leave pin_memory out where only the simulated device runs")
        if is_pinned(self):
            return self
        return pin_to(self, acc)

    is_pinned.__doc__, pin_memory.__doc__ = bare_is_pinned.__doc__, bare_pin.__doc__
    torch.Tensor.is_pinned, torch.Tensor.pin_memory = is_pinned, pin_memory


def _keep_parameters_in_place(torch: Any) -> None:
    """``module.to(dev)`` keeps each parameter object, as on CUDA.

    On CUDA, ``Module._apply`` changes a parameter's data in place
    (``param.data = moved``): weights tied between two modules stay one
    object, moved once, and an optimizer made before the move still holds the
    module's parameters. A simulated tensor cannot be a host parameter's
    ``.data`` (another tensor type), so ``_apply`` would make a new
    ``Parameter`` per module instead: a tied weight untied and copied twice
    (nanoGPT's ``lm_head``/``wte``: one upload more than on a GPU). Where the
    tensor moved, or the one it was made from, is simulated, ``_apply`` is
    told to swap them in place (its path for tensor subclasses). Should a
    swap be refused (a parameter the autograd graph still holds), the move is
    made again as before."""
    import threading

    from torch.nn.modules import module as nn_module

    real_test = nn_module.is_traceable_wrapper_subclass
    real_apply = torch.nn.Module._apply
    state = threading.local()  # .last: the tensor _apply converted last; .off: swaps refused

    def is_traceable_wrapper_subclass(t: Any) -> bool:
        if real_test(t):
            return True
        if getattr(state, "off", False):
            return False
        last = getattr(state, "last", None)
        return SimulatedTensor is not None and (isinstance(t, SimulatedTensor) or isinstance(last, SimulatedTensor))

    def _apply(self: Any, fn: Any, recurse: bool = True) -> Any:
        if getattr(fn, "_xferaudit_seen", False):
            return real_apply(self, fn, recurse)

        def seen(t: Any) -> Any:
            state.last = t
            return fn(t)

        seen._xferaudit_seen = True  # type: ignore[attr-defined]
        try:
            return real_apply(self, seen, recurse)
        except RuntimeError as e:
            if "Couldn't swap" not in str(e) or getattr(state, "off", False):
                raise
            state.off = True
            try:
                return real_apply(self, fn, recurse)
            finally:
                state.off = False
        finally:
            state.last = None

    _apply.__wrapped__ = real_apply  # type: ignore[attr-defined]
    _apply.__doc__ = real_apply.__doc__
    nn_module.is_traceable_wrapper_subclass = is_traceable_wrapper_subclass
    torch.nn.Module._apply = _apply


def _setup() -> None:
    global _ready, SimulatedTensor
    import torch

    # Set up already in this process, by an earlier import of this module
    # (pytester and importlib.reload drop and re-import modules): reuse it, the
    # dispatcher's registrations cannot be made twice.
    done = getattr(getattr(torch, NAME, None), "_xferaudit_simulated", None)
    if done is not None:
        SimulatedTensor = done[0]
        _ready = True
        return
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", NAME):
        raise SimulatedDeviceError(
            f"PyTorch's PrivateUse1 backend is already taken by {current!r} in this process; "
            "the simulated device needs it"
        )
    try:
        from torch.utils.backend_registration import (
            _setup_privateuseone_for_python_backend,
        )
    except ImportError as e:  # pragma: no cover - older torch
        raise SimulatedDeviceError(
            f"torch {torch.__version__} has no Python PrivateUse1 backend support "
            "(torch.utils.backend_registration._setup_privateuseone_for_python_backend)"
        ) from e

    if current != NAME or not hasattr(torch, NAME):
        _setup_privateuseone_for_python_backend(NAME, backend_module=_BackendModule())
        _keep_host_pinning(torch)
        _keep_parameters_in_place(torch)
        if torch.cuda.is_available():  # (asks the driver; creates no CUDA context)
            import warnings

            warnings.warn(_BESIDE_CUDA_MESSAGE, SimulatedDeviceWarning, stacklevel=3)
    cls = _make_class(torch)

    def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        if dtype is None:
            dtype = torch.get_default_dtype()
        kw = {} if memory_format is None else {"memory_format": memory_format}
        return cls(torch.empty(size, dtype=dtype, **kw))

    def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
        if dtype is None:
            dtype = torch.get_default_dtype()
        return cls(torch.empty_strided(size, stride, dtype=dtype))

    def copy_from(src, dst, non_blocking=False):
        # Reached by copies made with the Python key excluded: torch.tensor(d, device=dev).
        d = dst._data if isinstance(dst, cls) else dst
        d.copy_(src._data if isinstance(src, cls) else src)
        return dst

    def factory(op):
        def kernel(*args, **kwargs):
            kwargs["device"] = cpu
            return cls(op(*args, **kwargs))

        return kernel

    def fallback(op, *args, **kwargs):
        if "device" in kwargs:  # a factory function without a kernel of its own
            kwargs["device"] = cpu
            return tree_map(lambda x: cls(x) if isinstance(x, torch.Tensor) else x, op(*args, **kwargs))
        raise SimulatedDeviceError(f"the simulated {NAME} device cannot run {op}")

    from torch.utils._pytree import tree_map

    cpu = torch.device("cpu")
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("empty.memory_format", empty, "PrivateUse1")
    lib.impl("empty_strided", empty_strided, "PrivateUse1")
    lib.impl("_copy_from", copy_from, "PrivateUse1")
    # Composite factories that fill an out= tensor they resize: they need their
    # own kernel, since a simulated tensor's shape is fixed when it is made.
    for name in ("arange", "arange.start", "arange.start_step", "eye", "eye.m",
                 "linspace", "logspace", "randperm", "tril_indices", "triu_indices"):
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, base, None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if op is not None:
            lib.impl(name, factory(op), "PrivateUse1")
    fb = torch.library.Library("_", "IMPL")
    fb.fallback(fallback, "PrivateUse1")
    _keep.extend((lib, fb))
    getattr(torch, NAME)._xferaudit_simulated = (cls, lib, fb)
    SimulatedTensor = cls
    _ready = True


def simulated_device(index: int = 0) -> Any:
    """The simulated accelerator, ``torch.device("fakegpu", 0)``, set up on first call.

    Idempotent: later calls return the same device. Also turns autograd's
    device worker threads off for the calling thread (see the module docstring).
    Raises :class:`SimulatedDeviceError` if PrivateUse1 is taken by another
    backend, or for an index other than 0.
    """
    import torch

    if index != 0:
        raise SimulatedDeviceError(f"the simulated device has one index, 0 (not {index})")
    if not _ready:
        with _lock:
            if not _ready:
                _setup()
    # Per thread: backward on simulated tensors runs on the calling thread.
    torch._C._set_multithreading_enabled(False)
    return torch.device(NAME, 0)


def is_simulated(t: Any) -> bool:
    """True for a tensor that lives on the simulated device."""
    return SimulatedTensor is not None and isinstance(t, SimulatedTensor)
