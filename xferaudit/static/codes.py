"""Every code ``xferaudit check`` reports, with its documentation, as data.

Codes are ``XFA`` + three digits (valid flake8 codes, stable once published):

- ``XFA0xx``: the file itself (could not be read or parsed);
- ``XFA1xx``: suppression comments;
- ``XFA2xx``: an unwrapped site, one code per kind (``rules.KIND_CODES``);
- ``XFA3xx``: wrapped sites that are wrapped wrongly.

Each entry is written the way ruff documents its rules: what it does, why it
matters, an example, and what to write instead. ``xferaudit rule CODE`` prints
it; the README's "Rule codes" table and the SARIF rule list come from here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..rules import KIND_CODES


@dataclass(frozen=True)
class CodeDoc:
    code: str
    name: str  # kebab-case, like ruff's rule names
    summary: str  # one line: what is reported
    what: str
    why: str
    example: str
    instead: str
    fixable: bool = False  # `xferaudit wrap` rewrites it
    note: str = ""  # said after the "Use instead" example


CODES: dict[str, CodeDoc] = {}


def _add(doc: CodeDoc) -> None:
    CODES[doc.code] = doc


_add(CodeDoc(
    code="XFA001",
    name="unreadable-file",
    summary="A file could not be read, decoded or parsed",
    what=(
        "Reports a Python file that xferaudit could not read, decode (by its coding "
        "declaration) or parse, with the error. The other files are still checked, "
        "and the exit status is 2."
    ),
    why=(
        "A file that cannot be parsed cannot be searched: any transfer in it would "
        "pass unseen. This code cannot be suppressed or baselined."
    ),
    example="def step(batch:\n    return batch.cuda()\n",
    instead="def step(batch):\n    return batch.cuda()\n",
))

_add(CodeDoc(
    code="XFA101",
    name="unused-suppression",
    summary="A suppression comment names a code that is not reported on its line",
    what=(
        "Reports a `# noqa: XFA2xx` or `# xferaudit: ignore[...]` comment naming a "
        "code that is not reported on that line, and a bare `# xferaudit: ignore` on "
        "a line with nothing to suppress. (A bare `# noqa` is left alone: it may be "
        "meant for another linter.)"
    ),
    why=(
        "A stale suppression hides the next transfer someone adds to that line. It "
        "usually means the call was wrapped, moved or deleted, or the comment sits on "
        "the wrong line of a multi-line call: a site's line is the line holding the "
        "called name (`cpu` of `x.cpu()`), not the statement's first line."
    ),
    example="n = int(count)  # noqa: XFA202\n",
    instead="n = int(count)\n",
))

_KIND_DOCS = {
    "up": dict(
        name="unwrapped-up",
        summary="An unwrapped host-to-device transfer",
        what=(
            "Reports a call that copies host data to the device and is not wrapped in "
            "xferaudit's counting wrapper: `x.cuda()`, `x.to(\"cuda\")`, `x.to(0)`, "
            "`torch.tensor(data, device=dev)`, `torch.load(f, map_location=dev)`."
        ),
        why=(
            "Each upload costs a copy over the bus and often a synchronisation. One per "
            "batch is normal; one per weight per step, or inside an inner loop, is the "
            "slowdown this tool exists to find. Unwrapped, the runtime cannot say how "
            "often this line runs or how many bytes it moves."
        ),
        example="batch = batch.cuda(non_blocking=True)\n",
        instead=(
            "import xferaudit.runtime as xfer\n\n"
            "batch = xfer.cuda(batch, non_blocking=True, site=\"train.py:step:batch.cuda\")\n"
        ),
    ),
    "down": dict(
        name="unwrapped-down",
        summary="An unwrapped device-to-host transfer or scalar read",
        what=(
            "Reports a call that reads device data back to the host and is not wrapped: "
            "`x.cpu()`, `x.item()`, `x.tolist()`, `x.numpy(force=True)`, `x.to(\"cpu\")`."
        ),
        why=(
            "A read to the host waits for every queued kernel first: it synchronises the "
            "device. `loss.item()` once per logging interval is fine; once per step it "
            "stalls the pipeline every step. Wrapped, each read is counted per site."
        ),
        example="total += loss.item()\n",
        instead=(
            "import xferaudit.runtime as xfer\n\n"
            "total += xfer.item(loss, site=\"train.py:step:loss.item\")\n"
        ),
    ),
    "move": dict(
        name="unwrapped-move",
        summary="An unwrapped transfer whose direction is known only at run time",
        what=(
            "Reports an unwrapped copy whose direction the source does not say: "
            "`x.to(device)`, `x.to(other)`, `model.to(dev)`, `dst.copy_(src)`. The "
            "wrapper records the direction each call actually takes."
        ),
        why=(
            "`x.to(device)` is free when `x` is already there and a full copy when it is "
            "not; only the run time knows. These are the sites that quietly start "
            "copying when a default device or a data loader changes."
        ),
        example="images = images.to(device, non_blocking=True)\n",
        instead=(
            "import xferaudit.runtime as xfer\n\n"
            "images = xfer.to(images, device, non_blocking=True, site=\"train.py:step:images.to\")\n"
        ),
    ),
    "graph": dict(
        name="unwrapped-graph",
        summary="An unwrapped graph site (a compiled or captured graph made or replayed)",
        what=(
            "Reports `torch.compile(...)` (also as a decorator), "
            "`torch.cuda.make_graphed_callables(...)` and `g.replay()` not wrapped. The "
            "wrapper around what `torch.compile` returns counts every launch."
        ),
        why=(
            "A compiled step that recompiles or falls back to eager, or a CUDA graph "
            "replayed more or less often than you think, changes how many transfers and "
            "launches a step makes. Counting launches per site shows it."
        ),
        example="model = torch.compile(model, mode=\"max-autotune\")\n",
        instead=(
            "import xferaudit.runtime as xfer\n\n"
            "model = xfer.graph(torch.compile(model, mode=\"max-autotune\"), site=\"train.py:<module>:torch.compile\")\n"
        ),
    ),
}

for _kind, _code in KIND_CODES.items():
    _d = _KIND_DOCS[_kind]
    _add(CodeDoc(
        code=_code,
        name=_d["name"],
        summary=_d["summary"],
        what=_d["what"] + " Wrapped calls are not reported; `# noqa: " + _code + "` on the "
        "line of the called name suppresses one.",
        why=_d["why"],
        example=_d["example"],
        instead=_d["instead"],
        fixable=True,
        note="Or run `xferaudit wrap PATH` to wrap every site of a file, each under its own name.",
    ))

_add(CodeDoc(
    code="XFA301",
    name="duplicate-site-name",
    summary="Two wrapped calls share one site name",
    what=(
        "Reports a wrapped call whose `site=` name is already used by another wrapped "
        "call in the files checked (the message names the first one)."
    ),
    why=(
        "The runtime counts per site name: two calls under one name merge their "
        "counts, so the report can no longer say which line made the crossings. This "
        "typically comes from copying a wrapped line by hand."
    ),
    example=(
        "a = xfer.item(loss, site=\"train.py:step:loss.item\")\n"
        "b = xfer.item(aux, site=\"train.py:step:loss.item\")\n"
    ),
    instead=(
        "a = xfer.item(loss, site=\"train.py:step:loss.item\")\n"
        "b = xfer.item(aux, site=\"train.py:step:aux.item\")\n"
    ),
))


_add(CodeDoc(
    code="XFA302",
    name="site-name-of-another-file",
    summary="A wrapped call's site name names another file",
    what=(
        "Reports a wrapped call whose `site=` name starts with a path other than its "
        "own file's (relative to the project root), as after a file is moved or "
        "renamed. Names not of the `path:qualname:label` shape `wrap` writes (chosen "
        "by hand) are not checked."
    ),
    why=(
        "A site name says where the crossing happens: reports, budgets and "
        "baselines then point at a file that no longer exists, and a new file at "
        "the old path would make the same names again (XFA301)."
    ),
    example=(
        "# in train/loop.py, moved from train.py\n"
        "a = xfer.item(loss, site=\"train.py:step:loss.item\")\n"
    ),
    instead=(
        "a = xfer.item(loss, site=\"train/loop.py:step:loss.item\")\n"
    ),
    fixable=True,
    note=(
        "`xferaudit wrap --rename-sites PATH` renames them (the path part only). It is "
        "not done by a plain `wrap`: a budget or baseline keyed by the old names would "
        "silently stop matching, so renaming is asked for."
    ),
))


def doc(code: str) -> CodeDoc:
    code = code.strip().upper()
    if code not in CODES:
        raise KeyError(code)
    return CODES[code]


def render(d: CodeDoc) -> str:
    """The ruff-style Markdown page of one code (``xferaudit rule CODE``)."""
    fix = "Fix is available with `xferaudit wrap`.\n\n" if d.fixable else ""
    return (
        f"# {d.name} ({d.code})\n\n"
        f"{d.summary}.\n\n{fix}"
        f"## What it does\n{d.what}\n\n"
        f"## Why is this bad?\n{d.why}\n\n"
        f"## Example\n```python\n{d.example}```\n\n"
        f"## Use instead:\n```python\n{d.instead.rstrip()}\n```\n"
        + (f"\n{d.note}\n" if d.note else "")
    )
