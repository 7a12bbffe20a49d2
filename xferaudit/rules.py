"""The one rule table.

Every pack (``xferaudit/packs/*.toml``) and every row a user adds under
``[[tool.xferaudit.rule]]`` in pyproject.toml becomes a :class:`Rule`. The
finder decides what is a site from these rows, the codemod picks the wrapper
from them, and the runtime looks up each wrapper's static kind here, so a new
API is one row and nothing else.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on old Pythons only
    import tomli as tomllib

PACK_DIR = Path(__file__).parent / "packs"

KINDS = ("up", "down", "move", "graph")
#: Codes of unwrapped sites, one per kind, in the order TRANSFERS.md lists them.
KIND_CODES = {"up": "XFA201", "down": "XFA202", "move": "XFA203", "graph": "XFA204"}
CALL_FORMS = ("method", "function")
WRAP_STYLES = ("receiver", "function", "result")


class RuleError(ValueError):
    """A rule row is malformed; the message names the row and the field."""


@dataclass(frozen=True)
class Rule:
    """One row of the table: which call is a site, of which kind, and how to wrap it.

    ``kind`` is one of :data:`KINDS`, or ``"device"`` when the direction is read
    from the call's device argument (``x.to(dev)``), located by ``device_pos``
    (positional index after the receiver) and ``device_kw``.
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
    doc: str = ""

    @property
    def method(self) -> str:
        """The attribute name this row matches (for functions, the last part)."""
        return self.target.rsplit(".", 1)[-1]

    def code(self, kind: str) -> str:
        return KIND_CODES[kind]


def _rule_from_row(row: Mapping[str, Any], pack: str, where: str) -> Rule:
    known = {
        "id", "call", "target", "kind", "wrapper", "wrap", "device", "needs",
        "host_is_cpu", "truthy", "match", "ignore", "doc",
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
    default_wrapper = {"receiver": "method", "function": "call", "result": "graph"}[wrap]
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
        doc=str(row.get("doc", "")),
    )


@dataclass(frozen=True)
class Pack:
    name: str
    imports: tuple[str, ...]  # a file importing one of these turns the pack on
    rules: tuple[Rule, ...]


@lru_cache(maxsize=None)
def load_pack(name: str) -> Pack:
    path = PACK_DIR / f"{name}.toml"
    if not path.is_file():
        known = ", ".join(available_packs())
        raise RuleError(f"unknown pack {name!r}; known packs: {known}")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rules = tuple(_rule_from_row(r, name, str(path)) for r in data.get("rule", []))
    return Pack(name=name, imports=tuple(data.get("imports", ())), rules=rules)


def available_packs() -> list[str]:
    return sorted(p.stem for p in PACK_DIR.glob("*.toml"))


def user_rules(rows: Iterable[Mapping[str, Any]], where: str = "[tool.xferaudit]") -> tuple[Rule, ...]:
    return tuple(_rule_from_row(r, "user", where) for r in rows)


@dataclass(frozen=True)
class RuleTable:
    """The rows in force, indexed the way the finder asks for them."""

    rules: tuple[Rule, ...]
    methods: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    functions: Mapping[str, Rule] = field(default_factory=dict)
    wrappers: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, rules: Iterable[Rule]) -> "RuleTable":
        rules = tuple(rules)
        methods: dict[str, list[Rule]] = {}
        functions: dict[str, Rule] = {}
        wrappers: dict[str, list[Rule]] = {}
        for r in rules:
            if r.call == "method":
                methods.setdefault(r.target, []).append(r)
            else:
                functions[r.target] = r
            wrappers.setdefault(r.wrapper, []).append(r)
        return cls(
            rules=rules,
            methods={k: tuple(v) for k, v in methods.items()},
            functions=functions,
            wrappers={k: tuple(v) for k, v in wrappers.items()},
        )

    def words(self) -> tuple[str, ...]:
        """Identifiers whose absence from a file's text proves it has no site."""
        ws = {r.method for r in self.rules}
        return tuple(sorted(ws))


def table(packs: Iterable[str] = ("torch",), extra: Iterable[Rule] = ()) -> RuleTable:
    rules: list[Rule] = []
    for name in packs:
        rules.extend(load_pack(name).rules)
    rules.extend(extra)
    return RuleTable.of(rules)
