"""``torch.cuda`` as a training script sees it under the simulation.

One device, always available, an Ampere-class card by its capability (so
code that picks bfloat16 or TF32 by capability takes the GPU's path); memory
figures are zeros (the simulated device keeps no account); seeding and
synchronising do nothing (the simulated device draws from the host's
generator and is never behind). Streams and events are stand-ins: work on
them runs in order, and an event's ``elapsed_time`` is the host's time
between two ``record()`` calls. CUDA graphs cannot be captured (a graph
replays kernels, and there are none): ``CUDAGraph`` raises, saying so;
``make_graphed_callables`` returns the callables as they are (they run
eagerly). Each of these is noted when the program first reaches it
(:func:`xferaudit.simulate.note`).
"""

from __future__ import annotations

import collections
import contextlib
import time
from types import SimpleNamespace
from typing import Any

NAME_OF_DEVICE = "xferaudit simulated GPU (fakegpu)"
TOTAL_MEMORY = 80 * 1024**3


def _note(key: str, text: str) -> None:
    from .notes import note

    note(key, text)


def _index(device: Any = None) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        i = device
    else:
        i = getattr(device, "index", None)
        if i is None and isinstance(device, str):
            i = int(device.split(":", 1)[1]) if ":" in device else 0
        i = i or 0
    if i not in (0, -1):
        raise RuntimeError(f"CUDA error: invalid device ordinal {i} (the simulation has one device, cuda:0)")
    return 0


class _Stream:
    """A stand-in for ``torch.cuda.Stream``: work runs in program order."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        _note("streams", "CUDA streams: work on every stream runs in program order on the simulated "
              "device; overlap between streams is not simulated")
        import torch

        self.device = torch.device("cuda", _index(device))
        self.priority = priority
        self.cuda_stream = 0

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> Any:
        event = event if event is not None else _Event()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Stream)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "<torch.cuda.Stream device=cuda:0 (simulated)>"


class _Event:
    """A stand-in for ``torch.cuda.Event``: ``elapsed_time`` is host time."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 **kwargs: Any) -> None:
        self.enable_timing = enable_timing
        self.at: Any = None

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: Any) -> float:
        _note("events", "CUDA events' elapsed_time: the host's time between the two record() calls; "
              "the simulated device has no timing of its own")
        if self.at is None or end_event.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event.at - self.at) * 1000.0


class _NoGraph:
    """``torch.cuda.CUDAGraph`` under the simulation: it cannot be captured."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from ..testing import SimulatedDeviceError

        _note("graphs", "CUDA graphs: a graph replays captured kernels; the simulated device has none, "
              "so CUDAGraph and torch.cuda.graph cannot run (run this part on a GPU)")
        raise SimulatedDeviceError(
            "CUDA graphs cannot be simulated: torch.cuda.CUDAGraph / torch.cuda.graph need a GPU "
            "(make_graphed_callables runs its callables eagerly instead)")


def _graphed(callables: Any, sample_args: Any, *args: Any, **kwargs: Any) -> Any:
    _note("graphed", "torch.cuda.make_graphed_callables: the callables run eagerly (not captured); "
          "their crossings are eager mode's")
    return callables


def _properties(device: Any = None) -> Any:
    _index(device)
    return SimpleNamespace(name=NAME_OF_DEVICE, major=8, minor=0, total_memory=TOTAL_MEMORY,
                           multi_processor_count=108, is_integrated=False, is_multi_gpu_board=False,
                           gcnArchName="", uuid="00000000-0000-0000-0000-000000000000", L2_cache_size=0,
                           warp_size=32, max_threads_per_multi_processor=2048)


def _memory_note() -> None:
    _note("memory", "CUDA memory figures (memory_allocated, max_memory_allocated, memory_stats, ...): "
          "the simulated device keeps no account, they are 0")


def _zero(device: Any = None) -> int:
    _memory_note()
    return 0


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def install(torch: Any) -> None:
    """Put the simulated answers on ``torch.cuda`` (and its ``memory`` module)."""
    cuda = torch.cuda
    import torch.cuda.memory as memory

    stream = _Stream.__new__(_Stream)
    stream.device, stream.priority, stream.cuda_stream = torch.device("cuda", 0), 0, 0

    @contextlib.contextmanager
    def in_stream(s: Any) -> Any:
        yield s

    class device:  # noqa: N801 - torch.cuda.device
        def __init__(self, device: Any) -> None:
            self.idx = _index(device) if device is not None else -1

        def __enter__(self) -> None:
            pass

        def __exit__(self, *exc: Any) -> bool:
            return False

    class device_of(device):  # noqa: N801
        def __init__(self, obj: Any) -> None:
            super().__init__(None)

    answers = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "init": _nothing,
        "_lazy_init": _nothing,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: (_index(device), None)[1],
        "get_device_name": lambda device=None: (_index(device), NAME_OF_DEVICE)[1],
        "get_device_capability": lambda device=None: (_index(device), (8, 0))[1],
        "get_device_properties": _properties,
        "is_bf16_supported": lambda including_emulation=True: True,
        "is_tf32_supported": lambda: True,
        "get_arch_list": lambda: ["sm_80"],
        "can_device_access_peer": lambda device, peer: False,
        "synchronize": lambda device=None: (_index(device), None)[1],
        "ipc_collect": _nothing,
        "empty_cache": _nothing,
        "manual_seed": lambda seed: None,
        "manual_seed_all": lambda seed: None,
        "seed": _nothing,
        "seed_all": _nothing,
        "initial_seed": lambda: torch.initial_seed(),
        "get_rng_state": lambda device="cuda": torch.get_rng_state(),
        "get_rng_state_all": lambda: [torch.get_rng_state()],
        "set_rng_state": lambda new_state, device="cuda": None,
        "set_rng_state_all": lambda new_states: None,
        "memory_allocated": _zero,
        "max_memory_allocated": _zero,
        "memory_reserved": _zero,
        "max_memory_reserved": _zero,
        "memory_cached": _zero,
        "max_memory_cached": _zero,
        "memory_stats": lambda device=None: (_memory_note(), collections.OrderedDict())[1],
        "memory_summary": lambda device=None, abbreviated=False: (
            _memory_note(), "simulated device (fakegpu): no memory accounting\n")[1],
        "mem_get_info": lambda device=None: (TOTAL_MEMORY, TOTAL_MEMORY),
        "reset_peak_memory_stats": _nothing,
        "reset_max_memory_allocated": _nothing,
        "reset_max_memory_cached": _nothing,
        "reset_accumulated_memory_stats": _nothing,
        "set_per_process_memory_fraction": _nothing,
        "device": device,
        "device_of": device_of,
        "Stream": _Stream,
        "Event": _Event,
        "current_stream": lambda device=None: stream,
        "default_stream": lambda device=None: stream,
        "stream": in_stream,
        "set_stream": _nothing,
        "is_current_stream_capturing": lambda: False,
        "CUDAGraph": _NoGraph,
        "graph": _NoGraph,
        "make_graphed_callables": _graphed,
        "set_sync_debug_mode": _nothing,
        "get_sync_debug_mode": lambda: 0,
    }
    for name, value in answers.items():
        setattr(cuda, name, value)
        if hasattr(memory, name):
            setattr(memory, name, value)
    graphs = getattr(cuda, "graphs", None)
    if graphs is not None:
        for name in ("CUDAGraph", "graph", "make_graphed_callables", "is_current_stream_capturing"):
            if hasattr(graphs, name):
                setattr(graphs, name, answers[name])
    _note_compile(torch)
    nvtx = getattr(cuda, "nvtx", None)
    if nvtx is not None:
        for name in ("range_push", "range_pop", "mark", "range_start", "range_end"):
            if hasattr(nvtx, name):
                setattr(nvtx, name, lambda *a, **k: 0)
        nvtx.range = lambda *a, **k: contextlib.nullcontext()


def _note_compile(torch: Any) -> None:
    """``torch.compile`` is noted when called: Dynamo cannot trace the simulated
    device's tensors, so what it returns runs eagerly."""
    real = torch.compile

    def compile(*args: Any, **kwargs: Any) -> Any:  # noqa: A001 - torch.compile
        _note("compile", "torch.compile: Dynamo cannot trace the simulated device's tensors; the compiled "
              "code runs eagerly (its crossings are eager mode's; launches are still counted)")
        return real(*args, **kwargs)

    compile.__wrapped__ = real  # type: ignore[attr-defined]
    compile.__doc__ = real.__doc__
    torch.compile = compile


def hold_triton(triton: Any) -> None:
    """A Triton kernel launched under the simulation fails saying why (Triton
    compiles for a real GPU; the simulated device has no driver)."""
    try:
        from triton.runtime.jit import JITFunction  # type: ignore[import-not-found]
    except Exception:  # pragma: no cover - another Triton
        return
    real = JITFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        from ..testing import SimulatedDeviceError

        _note("triton", "Triton kernels: they compile for a real GPU's driver, which the simulated device "
              "does not have; the program's Triton kernel cannot run here")
        raise SimulatedDeviceError(
            f"the simulated device cannot run the Triton kernel {getattr(self, '__name__', self)!r}: "
            "Triton needs a real GPU (run this part on one)")

    run.__wrapped__ = real  # type: ignore[attr-defined]
    JITFunction.run = run
