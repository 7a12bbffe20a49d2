"""The one rule table.

Every pack (``xferaudit/packs/<name>/rules.toml``) and every row a user adds under
``[[tool.xferaudit.rule]]`` in pyproject.toml becomes a :class:`Rule`. The
finder decides what is a site from these rows, the codemod picks the wrapper
from them, and the runtime looks up each wrapper's static kind here, so a new
API is one row and nothing else.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from .wrapform import DEFAULT_WRAPPER, STYLES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on old Pythons only
    import tomli as tomllib

PACK_DIR = Path(__file__).parent / "packs"

KINDS = ("up", "down", "move", "graph")
#: Codes of unwrapped sites, one per kind.
KIND_CODES = {"up": "XFA201", "down": "XFA202", "move": "XFA203", "graph": "XFA204"}
CALL_FORMS = ("method", "function")
WRAP_STYLES = STYLES
#: How the value layer reads a tensor whose device the file does not show:
#: "proven" reports an implicit transfer only on a value the file shows on a
#: device; "gpu-first" takes such a tensor to be on the accelerator (host
#: evidence still wins). See docs/sites.md.
IMPLICIT_READINGS = ("proven", "gpu-first")
DEFAULT_IMPLICIT = "gpu-first"
#: Paths read "proven" even under "gpu-first": tests run on the CPU, and so does
#: data processing (processors, feature extractors, tokenizers prepare inputs on
#: the host; a package's `data` folder loads and samples them in worker
#: processes). Patterns as ``exclude`` takes them (a name without a slash matches
#: any path component).
DEFAULT_GPU_FIRST_EXCLUDE = ("test", "tests", "testing", "test_*.py", "*_test.py", "conftest.py",
                             "*processing*.py", "*processor*.py", "feature_extraction*.py", "tokenization*.py", "data")


class RuleError(ValueError):
    """A rule row is malformed; the message names the row and the field."""


@dataclass(frozen=True)
class Rule:
    """One row of the table: which call is a site, of which kind, and how to wrap it.

    ``kind`` is one of :data:`KINDS`, or ``"device"`` when the direction is read
    from the call's device argument (``x.to(dev)``), located by ``device_pos``
    (positional index after the receiver) and ``device_kw``. How the row's
    calls are wrapped (``wrap``, ``wrapper``) is spelled out by
    :mod:`xferaudit.wrapform`. A row may carry a ``doc`` string for its
    readers; the tool does not read it.
    """

    id: str
    pack: str
    call: str  # "method" | "function"
    target: str  # method name, or qualified function name
    kind: str
    wrapper: str
    wrap: str = "receiver"
    device_pos: int | None = None
    device_kw: str | None = None
    needs: str | None = None
    host_is_cpu: bool = False
    truthy: str | None = None
    match: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    # Narrowing fields (for packs whose method names are common words):
    min_args: int | None = None  # fewest positional args (receiver excluded)
    max_args: int | None = None  # most positional args: `x.get()` but not `d.get(k)`
    keywords: tuple[str, ...] | None = None  # the only keywords allowed; others: not a site
    not_receiver: tuple[str, ...] = ()  # regexes; a receiver whose text (no spaces) fullmatches one: no site
    no_device: str | None = None  # kind "device": the kind when no device argument is given
    arg_from: tuple[str, ...] = ()  # first arg must be a call of a function under one of these names
    aliases: tuple[str, ...] = ()  # other qualified names of a function row

    @property
    def method(self) -> str:
        """The attribute name this row matches (for functions, the last part)."""
        return self.target.rsplit(".", 1)[-1]


def _rule_from_row(row: Mapping[str, Any], pack: str, where: str) -> Rule:
    known = {
        "id", "call", "target", "kind", "wrapper", "wrap", "device", "needs",
        "host_is_cpu", "truthy", "match", "ignore", "doc",
        "min_args", "max_args", "keywords", "not_receiver", "no_device", "arg_from", "aliases",
    }
    unknown = set(row) - known
    rid = row.get("id") or row.get("target") or "?"
    if unknown:
        raise RuleError(f"{where}: rule {rid!r}: unknown field(s) {', '.join(sorted(unknown))}")
    for req in ("call", "target", "kind"):
        if req not in row:
            raise RuleError(f"{where}: rule {rid!r}: missing field {req!r}")
    call = row["call"]
    if call not in CALL_FORMS:
        raise RuleError(f"{where}: rule {rid!r}: call must be one of {CALL_FORMS}, not {call!r}")
    kind = row["kind"]
    if kind not in KINDS + ("device",):
        raise RuleError(f"{where}: rule {rid!r}: kind must be one of {KINDS + ('device',)}, not {kind!r}")
    device = row.get("device") or {}
    if not isinstance(device, Mapping):
        raise RuleError(f"{where}: rule {rid!r}: device must be a table like {{pos = 0, kw = \"device\"}}")
    if kind == "device" and not device:
        raise RuleError(f"{where}: rule {rid!r}: kind \"device\" needs a device = {{pos, kw}} field")
    # User rows without a wrapper of their own go through the generic ones.
    default_wrap = "receiver" if call == "method" else ("result" if kind == "graph" else "function")
    wrap = row.get("wrap", default_wrap)
    if wrap not in WRAP_STYLES:
        raise RuleError(f"{where}: rule {rid!r}: wrap must be one of {WRAP_STYLES}, not {wrap!r}")
    default_wrapper = DEFAULT_WRAPPER[wrap]
    no_device = row.get("no_device")
    if no_device is not None and no_device not in KINDS:
        raise RuleError(f"{where}: rule {rid!r}: no_device must be one of {KINDS}, not {no_device!r}")
    for key in ("min_args", "max_args"):
        v = row.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise RuleError(f"{where}: rule {rid!r}: {key} must be a non-negative integer, not {v!r}")
    for key in ("keywords", "not_receiver", "arg_from", "aliases"):
        v = row.get(key)
        if v is not None and (not isinstance(v, list) or not all(isinstance(x, str) for x in v)):
            raise RuleError(f"{where}: rule {rid!r}: {key} must be a list of strings")
    for rx in row.get("not_receiver", ()):
        try:
            re.compile(rx)
        except re.error as e:
            raise RuleError(f"{where}: rule {rid!r}: not_receiver {rx!r} is not a regex: {e}") from None
    return Rule(
        id=str(rid),
        pack=pack,
        call=call,
        target=str(row["target"]),
        kind=kind,
        wrapper=str(row.get("wrapper", default_wrapper)),
        wrap=wrap,
        device_pos=device.get("pos"),
        device_kw=device.get("kw"),
        needs=row.get("needs"),
        host_is_cpu=bool(row.get("host_is_cpu", False)),
        truthy=row.get("truthy"),
        match=tuple(row.get("match", ())),
        ignore=tuple(row.get("ignore", ())),
        min_args=row.get("min_args"),
        max_args=row.get("max_args"),
        keywords=tuple(row["keywords"]) if row.get("keywords") is not None else None,
        not_receiver=tuple(row.get("not_receiver", ())),
        no_device=no_device,
        arg_from=tuple(row.get("arg_from", ())),
        aliases=tuple(row.get("aliases", ())),
    )


@dataclass(frozen=True)
class Devices:
    """A pack's device vocabulary (its ``[devices]`` table): how the finder
    reads a device argument, and which devices the runtime counts.

    ``host`` and ``accelerators`` are device types (the part before ``:``) that
    mean the host or an accelerator; ``no_data`` devices hold no data, so a copy
    to one moves nothing (``x.to("meta")`` is no site, and the runtime counts
    none); ``constructors`` are calls that build a device from a type string
    (``torch.device("cuda", 0)``); ``not_device`` maps a module to its names
    that are dtypes or layouts, never devices (``torch.float16``).
    """

    host: frozenset = frozenset()
    accelerators: frozenset = frozenset()
    no_data: frozenset = frozenset()
    constructors: frozenset = frozenset()
    not_device: Mapping[str, frozenset] = field(default_factory=dict)

    def merged(self, other: "Devices") -> "Devices":
        nd = dict(self.not_device)
        for k, v in other.not_device.items():
            nd[k] = nd.get(k, frozenset()) | v
        return Devices(self.host | other.host, self.accelerators | other.accelerators,
                       self.no_data | other.no_data, self.constructors | other.constructors, nd)

    def is_not_device(self, qualname: str) -> bool:
        """``torch.float16``: a dtype or layout of a pack's module, never a device."""
        module, _, name = qualname.rpartition(".")
        return name in self.not_device.get(module, ())


def _devices(data: Any, where: str) -> Devices:
    if not isinstance(data, Mapping):
        raise RuleError(f"{where}: [devices] must be a table")
    known = {"host", "accelerators", "simulated", "no_data", "constructors", "not_device"}
    unknown = set(data) - known
    if unknown:
        raise RuleError(f"{where}: [devices]: unknown field(s) {', '.join(sorted(unknown))}")
    for k in known - {"not_device"}:
        v = data.get(k, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise RuleError(f"{where}: [devices]: {k} must be a list of strings")
    nd = data.get("not_device", {})
    if not isinstance(nd, Mapping) or not all(isinstance(v, list) for v in nd.values()):
        raise RuleError(f"{where}: [devices]: not_device must map a module to a list of names")
    return Devices(
        host=frozenset(data.get("host", ())),
        accelerators=frozenset(data.get("accelerators", ())) | frozenset(data.get("simulated", ())),
        no_data=frozenset(data.get("no_data", ())),
        constructors=frozenset(data.get("constructors", ())),
        not_device={k: frozenset(v) for k, v in nd.items()},
    )


@dataclass(frozen=True)
class Kernels:
    """A pack's kernel vocabulary (its ``[kernels]`` table): code that a GPU
    kernel language compiles, not PyTorch, so no site is there.

    ``decorators`` are qualified names that make a kernel of the function they
    decorate (``triton.jit``, with ``triton.autotune(...)`` stacked on it) or
    that they are called on (``triton.jit(fn)``); ``modules`` are kernel
    languages whose functions only a kernel calls (``triton.language``): a
    function calling one (``tl.load(...)``) is kernel code whatever decorates it.
    """

    decorators: frozenset = frozenset()
    modules: frozenset = frozenset()

    def merged(self, other: "Kernels") -> "Kernels":
        return Kernels(self.decorators | other.decorators, self.modules | other.modules)

    def top_modules(self) -> frozenset:
        """The top-level modules the vocabulary names (``triton``, ``numba``): a
        file naming none of them holds no kernel."""
        return frozenset(q.split(".", 1)[0] for q in self.decorators | self.modules)


def _kernels(data: Any, where: str) -> Kernels:
    if not isinstance(data, Mapping):
        raise RuleError(f"{where}: [kernels] must be a table")
    unknown = set(data) - {"decorators", "modules"}
    if unknown:
        raise RuleError(f"{where}: [kernels]: unknown field(s) {', '.join(sorted(unknown))}")
    for k in ("decorators", "modules"):
        v = data.get(k, [])
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise RuleError(f"{where}: [kernels]: {k} must be a list of qualified names")
    return Kernels(frozenset(data.get("decorators", ())), frozenset(data.get("modules", ())))


@dataclass(frozen=True)
class Pack:
    name: str
    imports: tuple[str, ...]  # a file importing one of these turns the pack on
    rules: tuple[Rule, ...]
    prelude: str = ""  # imports the rows' match/ignore examples are read under
    devices: Devices = Devices()
    #: Names that mean their module even where no import binds them (a star
    #: import, a notebook cell): ``torch`` used bare is still torch.
    assumed_imports: tuple[str, ...] = ()
    kernels: Kernels = Kernels()


def _pack_path(name: str) -> Path:
    """A pack is a folder: ``packs/<name>/rules.toml`` holds its rows."""
    return PACK_DIR / name / "rules.toml"


@lru_cache(maxsize=None)
def load_pack(name: str) -> Pack:
    path = _pack_path(name)
    if not path.is_file():
        known = ", ".join(available_packs())
        raise RuleError(f"unknown pack {name!r}; known packs: {known}")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rules = tuple(_rule_from_row(r, name, str(path)) for r in data.get("rule", []))
    return Pack(name=name, imports=tuple(data.get("imports", ())), rules=rules, prelude=str(data.get("prelude", "")),
                devices=_devices(data.get("devices", {}), str(path)),
                assumed_imports=tuple(data.get("assumed_imports", ())),
                kernels=_kernels(data.get("kernels", {}), str(path)))


def no_data_devices() -> frozenset:
    """Device types that hold no data, from every pack (``meta``): a copy to or
    from one moves nothing, for the finder and the runtime alike."""
    out: frozenset = frozenset()
    for name in available_packs():
        out |= load_pack(name).devices.no_data
    return out


def pack_files() -> list[Path]:
    """Every data file of every pack (the findings cache hashes them)."""
    return sorted(p for p in PACK_DIR.rglob("*.toml") if p.is_file())


def available_packs() -> list[str]:
    return sorted(p.parent.name for p in PACK_DIR.glob("*/rules.toml"))


def user_rules(rows: Iterable[Mapping[str, Any]], where: str = "[tool.xferaudit]") -> tuple[Rule, ...]:
    return tuple(_rule_from_row(r, "user", where) for r in rows)


@dataclass(frozen=True)
class RuleTable:
    """The rows in force, indexed the way the finder asks for them."""

    rules: tuple[Rule, ...]
    methods: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    functions: Mapping[str, Rule] = field(default_factory=dict)
    wrappers: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    #: Packs on in every file (plus "user"); None means every row is on everywhere.
    always: frozenset | None = None
    #: The other packs: on in a file that imports one of these top-level modules.
    pack_imports: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The device vocabulary of the packs in the table, merged.
    devices: Devices = Devices()
    #: Names meaning their module with no import in sight (see :class:`Pack`).
    assumed_imports: frozenset = frozenset()
    #: The value layer's reading (:data:`IMPLICIT_READINGS`), and the paths read
    #: "proven" whatever it is (``implicit`` and ``gpu-first-exclude`` in the config).
    implicit: str = DEFAULT_IMPLICIT
    gpu_first_exclude: tuple[str, ...] = DEFAULT_GPU_FIRST_EXCLUDE
    #: Every pack's kernel vocabulary, merged: whatever packs are on in a file,
    #: code a kernel language compiles holds no site (static/front/kernels.py).
    kernels: Kernels = Kernels()

    @classmethod
    def of(
        cls,
        rules: Iterable[Rule],
        always: Iterable[str] | None = None,
        pack_imports: Mapping[str, Iterable[str]] | None = None,
        devices: Devices | None = None,
        assumed_imports: Iterable[str] = (),
        kernels: Kernels | None = None,
    ) -> "RuleTable":
        rules = tuple(rules)
        methods: dict[str, list[Rule]] = {}
        functions: dict[str, Rule] = {}
        wrappers: dict[str, list[Rule]] = {}
        for r in rules:
            if r.call == "method":
                methods.setdefault(r.target, []).append(r)
            else:
                functions[r.target] = r
                for alias in r.aliases:
                    functions[alias] = r
            wrappers.setdefault(r.wrapper, []).append(r)
        return cls(
            rules=rules,
            methods={k: tuple(v) for k, v in methods.items()},
            functions=functions,
            wrappers={k: tuple(v) for k, v in wrappers.items()},
            always=None if always is None else frozenset(always) | {"user"},
            pack_imports={k: tuple(v) for k, v in (pack_imports or {}).items()},
            devices=devices if devices is not None else Devices(),
            assumed_imports=frozenset(assumed_imports),
            kernels=kernels if kernels is not None else Kernels(),
        )

    def active_packs(self, imported: Iterable[str]) -> frozenset | None:
        """The packs on in a file that imports these modules (None: every pack).

        A pack not always on turns on where the file imports its library
        (``import cupy as cp``, ``from jax import numpy``, ``import ggml.utils``).
        """
        if self.always is None:
            return None
        tops = {m.split(".", 1)[0] for m in imported}
        on = {p for p, mods in self.pack_imports.items() if any(m.split(".", 1)[0] in tops for m in mods)}
        return self.always | on

    def words(self) -> tuple[str, ...]:
        """Identifiers whose absence from a file's text proves it has no site.

        A pack that is on only by import contributes its import names (a file
        that never names ``cupy`` cannot turn the CuPy pack on) and its wrapper
        names (a wrapped site is found whatever the file imports).
        """
        if self.always is None:
            ws = {r.method for r in self.rules}
        else:
            ws = {r.method for r in self.rules if r.pack in self.always}
            ws.update(r.wrapper for r in self.rules if r.pack not in self.always)
            for p, mods in self.pack_imports.items():
                ws.update(m.split(".", 1)[0] for m in mods)
        return tuple(sorted(ws))


def table(packs: Iterable[str] = ("torch",), extra: Iterable[Rule] = (), by_import: bool = True) -> RuleTable:
    """The rows of `packs` (on in every file) and `extra` (the user's rows).

    With `by_import`, every other available pack is in the table too, on only in
    files that import its library (the pack's ``imports`` list).
    """
    always = list(dict.fromkeys(packs))
    rules: list[Rule] = []
    devices = Devices()
    assumed: list[str] = []
    kernels = Kernels()
    for name in available_packs():  # (every pack's kernels, whichever are on)
        kernels = kernels.merged(load_pack(name).kernels)
    for name in always:
        pack = load_pack(name)
        rules.extend(pack.rules)
        devices = devices.merged(pack.devices)
        assumed.extend(pack.assumed_imports)
    pack_imports: dict[str, tuple[str, ...]] = {}
    if by_import:
        for name in available_packs():
            if name not in always:
                pack = load_pack(name)
                rules.extend(pack.rules)
                pack_imports[name] = pack.imports
                devices = devices.merged(pack.devices)
    rules.extend(extra)
    return RuleTable.of(rules, always=always, pack_imports=pack_imports, devices=devices, assumed_imports=assumed,
                        kernels=kernels)
