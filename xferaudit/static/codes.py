"""Every code ``xferaudit check`` reports, with its documentation, as data.

Codes are ``XFA`` + three digits (valid flake8 codes, stable once published):

- ``XFA0xx``: the file itself (could not be read or parsed);
- ``XFA1xx``: suppression comments;
- ``XFA2xx``: an unwrapped site, one code per kind (``rules.KIND_CODES``);
- ``XFA3xx``: wrapped sites that are wrapped wrongly;
- ``XFA4xx``: implicit transfers (no transfer call of their own), found where
  the value layer shows a device tensor; ``XFA451`` is a hazard, not a site;
- ``XFA5xx``: run evidence (``check --evidence RUN.json``): a line a recorded
  run saw crossing that no site explains, and evidence gone stale;
- ``XFA6xx``: compiled code (what ``torch.compile`` compiles, found across the
  project): ``XFA601``, a host read there, which breaks the graph. It replaces
  the read's ``XFA202`` or ``XFA40x`` on that line: explicit and implicit
  reads alike, so neither of those families holds it.

Each entry is written the way ruff documents its rules: what it does, why it
matters, an example, and what to write instead. ``xferaudit rule CODE`` prints
it; the README's "Rule codes" table and the SARIF rule list come from here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..rules import KIND_CODES


#: The implicit codes: code -> (the site's category, its kind).
IMPLICIT_CODES = {
    "XFA401": ("conversion", "down"),
    "XFA402": ("truth", "down"),
    "XFA403": ("format", "down"),
    "XFA404": ("math", "down"),
    "XFA405": ("count", "down"),
    "XFA406": ("upload", "up"),
    "XFA407": ("download", "down"),
    "XFA408": ("save", "down"),
    "XFA451": ("hazard", "up"),
}
#: category -> code
IMPLICIT_OP_CODES = {op: code for code, (op, _) in IMPLICIT_CODES.items()}


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
    counts_only: bool = False  # the wrapped form counts the crossing; the code still makes it
    named: bool = False  # no call to wrap: `wrap` names the statement with a site comment

    @property
    def fix(self) -> str:
        """What `xferaudit wrap` does about a finding: one sentence, "" for nothing."""
        if not self.fixable:
            return ""
        if self.named:
            who = "`xferaudit wrap --from RUN.json`" if self.code.startswith("XFA5") else "`xferaudit wrap`"
            return (f"{who} names its statement: it appends a site comment, `# xferaudit: "
                    "site=\"...\"`, which the runtime's guard reads, so the report and budgets count the "
                    "crossing under that name (a comment: Python runs nothing new). It does not remove the "
                    "crossing. To remove it, write what *Use instead* shows.")
        if self.counts_only:
            return ("`xferaudit wrap` counts it: the read goes through a counting wrapper, so the "
                    "report names it, but the wrapped code still reads and waits; it does not "
                    "remove the synchronisation. To remove it, write what *Use instead* shows.")
        return "`xferaudit wrap` rewrites the call into its counting wrapper."


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
        "renamed. Only full literals name a file: a short one (`\":step:loss.item\"`, "
        "what `wrap` writes) is named after the file it is in, and names not of the "
        "`path:qualname:label` shape (chosen by hand) are not checked."
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
        "a = xfer.item(loss, site=\":step:loss.item\")  # the site train/loop.py:step:loss.item\n"
    ),
    fixable=True,
    note=(
        "`xferaudit wrap --rename-sites PATH` renames them to the short form (the file's "
        "own path is then the name's). It is "
        "not done by a plain `wrap`: a budget or baseline keyed by the old names would "
        "silently stop matching, so renaming is asked for."
    ),
))
_IMPLICIT_NOTE = (
    "Reported where the value is a device tensor: in the `proven` reading, where the "
    "code shows it (moved with `.to(device)` / `.cuda()`, made with `device=`, returned "
    "by a module moved to a device, or computed from such values); in the `gpu-first` "
    "reading (setting `implicit`), also where it is a tensor the file does not place "
    "(a `Tensor` parameter, a torch function's result). Host evidence wins; a value it "
    "cannot place is left to the runtime guard. `# noqa: {code}` on the line suppresses one."
)
_IMPLICIT_DOCS = [
    ("XFA401", "implicit-conversion", "A device tensor converted to a Python number",
     "Reports `float(t)`, `int(t)`, `bool(t)`, `complex(t)`, `operator.index(t)` and a device "
     "tensor used as an int: `range(t)`, `seq[t]` on a Python list or numpy array, slice bounds "
     "`x[:t]`; and a host tensor built from values the code shows on a device (in either reading), "
     "`torch.tensor([loss, acc])` or "
     "`torch.tensor(losses)` (`as_tensor`, `asarray`) without a device or with the host's, which "
     "converts each device element to a number (an `.item()` each). That one has no wrapped form: "
     "PyTorch reads the elements below the dispatcher, where neither a wrapper nor the guard sees "
     "them, so `wrap` leaves it with that reason; `torch.stack(losses)` keeps them on the device.",
     "Each conversion copies the value to the host and waits for every queued kernel first: a "
     "synchronisation hidden in what reads like arithmetic. Once per step it stalls the pipeline "
     "every step, and no `.item()` in the code shows it.",
     "for x, y in loader:\n    loss = crit(model(x.to(dev)), y.to(dev))\n    total += float(loss)\n",
     "total = torch.zeros((), device=dev)\nfor x, y in loader:\n    loss = crit(model(x.to(dev)), y.to(dev))\n"
     "    total += loss.detach()  # stays on the device\nmean = total.item() / len(loader)  # one read, after the loop\n",
     "xferaudit wrap rewrites `float(loss)` as `xfer.float(loss, site=...)` (and `range(t)`, "
     "`seq[t]`, `x[:t]` with `xfer.index(t, site=...)`) so the runtime counts each read."),
    ("XFA402", "implicit-truth", "A device tensor tested for truth",
     "Reports a device tensor in a boolean context: `if t:`, `while t:`, `assert t`, `not t`, "
     "operands of `and`/`or`, a comparison such as `if loss > 100:`, `if t.any():`.",
     "Python must know the answer on the host: the tensor is copied back and the host waits for "
     "the device. In a loop this serialises host and device on every iteration.",
     "if (pred == y).float().mean() > 0.99:\n    break\n",
     "acc = (pred == y).float().mean()\nif step % 100 == 0 and acc.item() > 0.99:  # read it rarely, explicitly\n    break\n",
     "xferaudit wrap rewrites the condition as `xfer.bool(cond, site=...)`; an `and`/`or` whose "
     "value is used (not tested) has no wrapped form and is left, with the reason."),
    ("XFA403", "implicit-format", "A device tensor formatted as text",
     "Reports a device tensor passed to `print`, `str`, `repr`, `format`, an f-string field, "
     "`%` formatting, `.format()` or a logging call: one finding per formatting construct, at "
     "its first device value (`\"%d + %d\" % (a[0], a[1])` is one, at the tuple), and a "
     "`.format()` call as a whole.",
     "Formatting reads the values to the host (a copy and a synchronisation). A `print(loss)` "
     "left in a training loop syncs every step.",
     "print(f\"step {i} loss {loss:.3f}\")\n",
     "if i % 100 == 0:\n    print(f\"step {i} loss {loss.item():.3f}\")\n",
     "xferaudit wrap rewrites the value as `xfer.read(loss, site=...)` where it is only "
     "formatted (an f-string field, `%`, `print`, `str`, `repr`, `format`): it formats exactly "
     "like the tensor and counts the read when it happens. A `.format()` call is wrapped whole, "
     "`xfer.reads(\"{0.shape}\".format, t, site=...)`, so it gets the tensor itself. A logging "
     "call is left, with the reason: its handlers may keep or inspect the arguments; format "
     "the value in the call (an f-string) and that is wrapped."),
    ("XFA404", "implicit-math", "A device tensor passed to `math` or numpy",
     "Reports a device tensor passed to a `math` function (`math.isnan(loss)`) or a numpy "
     "function (`np.asarray(t)`, `np.array(t)`), or compared by the builtins `max` and `min` "
     "(`max(loss, loss * 2)`, `min(t, 3.0)`, `max(t)` of a device tensor's rows), which test "
     "each comparison for truth inside the call.",
     "`math` reads a Python float (a copy and a synchronisation); numpy needs host memory "
     "(on CUDA it raises, elsewhere it copies).",
     "if math.isnan(loss):\n    raise FloatingPointError\n",
     "if torch.isnan(loss).item():  # one explicit, counted read\n    raise FloatingPointError\n",
     "xferaudit wrap wraps the call, `xfer.reads(math.isnan, t, site=...)`: the function gets "
     "the tensor itself, as in the bare call, and the read is counted around it."),
    ("XFA405", "implicit-count", "An op whose output size depends on device data",
     "Reports indexing anything with a device mask (`t[mask]`, `boxes[mask]`, an object's "
     "`__getitem__`; masks combine with `&`, `|`, `^` and `~`), `nonzero`, `unique`, "
     "`unique_consecutive`, `masked_select`, `argwhere`, one-argument `torch.where`, and "
     "`repeat_interleave` without `output_size`, on device tensors.",
     "The size of the result is data: the op reads a count back to the host to allocate it, and "
     "waits for the device. Post-processing loops full of these run at the speed of the bus.",
     "keep = scores[scores > 0.5]\n",
     "keep = torch.where(scores > 0.5, scores, 0.0)  # fixed size, no read-back\n",
     "No call makes the crossing, so there is none to wrap: `xferaudit wrap` names the statement "
     "instead, `keep = scores[scores > 0.5]  # xferaudit: site=\":f:count(scores[scores>0.5])\"`, and "
     "the guard counts every crossing of that statement under the name (`xferaudit run`, "
     "`xfer.guard()`, `xfer.expect`). Suppress a deliberate one with `# noqa: XFA405`."),
    ("XFA406", "implicit-upload", "Host data uploaded by indexing or assignment",
     "Reports a device tensor indexed with a Python list or a host tensor (`t[[0, 5]]`, "
     "`t[:, host_idx]`, a list built by a display, a comprehension, `list()`, `range()`, `+`, "
     "kept in an attribute or returned by a function of the file), also inside an assignment's "
     "index (`a[a < v[:, [-1]]] = 0`), and host data assigned into a device tensor "
     "(`t[i] = np_array`).",
     "The index or the value is copied to the device inside the indexing, synchronously, each "
     "time the line runs.",
     "rows = emb[[0, 5, 9]]\n",
     "idx = torch.tensor([0, 5, 9], device=emb.device)  # once, outside the loop\nrows = emb[idx]\n",
     "No call to wrap: `xferaudit wrap` names the statement with a site comment "
     "(`rows = emb[[0, 5, 9]]  # xferaudit: site=\"...\"`), which the guard counts it under."),
    ("XFA407", "implicit-download", "A device value assigned into a host tensor",
     "Reports `host_t[i] = t` with `host_t` a host tensor and `t` a device value.",
     "The value is copied to the host inside the assignment, with a synchronisation.",
     "history[step] = loss\n",
     "losses.append(loss.detach())  # on the device; read once at the end\n",
     "No call to wrap: `xferaudit wrap` names the statement with a site comment, which the guard "
     "counts it under."),
    ("XFA408", "implicit-save", "`torch.save` of device data",
     "Reports `torch.save` of a device tensor, of a module on a device or its `state_dict()`, "
     "or of a dict or list holding them.",
     "Saving copies every device storage to the host first. A checkpoint every N steps is "
     "expected; inside the step it is a full download each time.",
     "torch.save(model.state_dict(), path)\n",
     "import xferaudit.runtime as xfer\n\nxfer.save(torch.save, model.state_dict(), path, site=\"train.py:step:save\")\n",
     "xferaudit wrap rewrites it as `xfer.save(torch.save, obj, f, site=...)`, which counts the "
     "bytes of the device storages saved."),
    ("XFA451", "pageable-non-blocking", "A `non_blocking=True` upload of pageable host memory",
     "Reports `.to(device, non_blocking=True)`, `.cuda(non_blocking=True)` or "
     "`dev_t.copy_(src, non_blocking=True)` whose host side is evidently pageable: made by "
     "`torch.from_numpy`, `torch.tensor`, a legacy constructor or a factory without "
     "`pin_memory=True`, on one line or through names in a function.",
     "A copy from pageable memory cannot be asynchronous: the driver stages it through a pinned "
     "buffer and the host waits. `non_blocking=True` then promises an overlap that never happens.",
     "x = torch.from_numpy(batch).to(dev, non_blocking=True)\n",
     "x = torch.from_numpy(batch).pin_memory().to(dev, non_blocking=True)\n",
     "A hazard, not a site: `xferaudit wrap` does not change it. Pin the host side "
     "(`pin_memory=True` on the DataLoader or the factory, `.pin_memory()`)."),
]
for _code, _name, _summary, _what, _why, _ex, _inst, _note in _IMPLICIT_DOCS:
    _add(CodeDoc(
        code=_code, name=_name, summary=_summary,
        what=_what + " " + _IMPLICIT_NOTE.format(code=_code),
        why=_why, example=_ex, instead=_inst,
        fixable=_code in ("XFA401", "XFA402", "XFA403", "XFA404", "XFA405", "XFA406", "XFA407", "XFA408"),
        note=_note, counts_only=True, named=_code in ("XFA405", "XFA406", "XFA407"),
    ))


def doc(code: str) -> CodeDoc:
    code = code.strip().upper()
    if code not in CODES:
        raise KeyError(code)
    return CODES[code]


def render(d: CodeDoc) -> str:
    """The ruff-style Markdown page of one code (``xferaudit rule CODE``)."""
    fix = f"{d.fix}\n\n" if d.fix else ""
    return (
        f"# {d.name} ({d.code})\n\n"
        f"{d.summary}.\n\n{fix}"
        f"## What it does\n{d.what}\n\n"
        f"## Why is this bad?\n{d.why}\n\n"
        f"## Example\n```python\n{d.example}```\n\n"
        f"## Use instead:\n```python\n{d.instead.rstrip()}\n```\n"
        + (f"\n{d.note}\n" if d.note else "")
    )


_add(CodeDoc(
    code="XFA501",
    name="seen-crossing-at-run-time",
    summary="A line a recorded run saw crossing, outside every wrapper, with no call xferaudit can wrap",
    what=(
        "With run evidence (`check --evidence RUN.json`, or `evidence = [...]` in `[tool.xferaudit]`), "
        "reports each line the run saw crossing outside every wrapper where no site of the op's kind is on "
        "the line: the crossing happens inside an op (`t[mask]` with a mask the file does not show, "
        "`torch.equal`, an op given host and device tensors), while a compiled call compiles (the constants "
        "it uploads the first time it runs), or through a construct the static half does not know. The "
        "message names the op, how often it crossed, the bytes and the run file. A line where a site of the "
        "op's kind sits is reported under that site's own code instead (its message then says it was seen "
        "crossing at run time), even where the code alone shows no device. A crossing made inside a library "
        "function the line calls is no finding: the run names it by that function and the line "
        "(`lib.mod:function <- train.py:41`)."
    ),
    why=(
        "The run is the truth, the static reading a prediction: this line crossed, every time it ran. "
        "Unnamed, it is a line number in the report: budgets hold it by `path:line`, which any edit above "
        "it moves."
    ),
    example="keep = scores[mask]  # mask is a device bool tensor: the count is read back\n",
    instead=(
        "keep = torch.where(mask, scores, 0.0)  # fixed size: nothing crosses\n"
    ),
    fixable=True,
    named=True,
    note=(
        "`xferaudit wrap --from RUN.json` names the statement, `keep = scores[mask]  # xferaudit: "
        "site=\":f:keep=scores[mask]\"`: the guard counts its crossings under that name, and `check` takes "
        "the line as named. Accept a deliberate one instead with `# noqa: XFA501` on the line (a trailing "
        "comment keeps the evidence matched)."
    ),
))

_add(CodeDoc(
    code="XFA502",
    name="stale-evidence",
    summary="A line of the run evidence is no longer in the file",
    what=(
        "With run evidence, reports each line the run saw crossing whose text is no longer in its function "
        "(or whose file is gone): the line was edited since the run. Lines moved by edits elsewhere, "
        "re-indented, given a trailing comment or rewritten by `wrap` still match and are not stale."
    ),
    why=(
        "Evidence is matched by each line's text, not its number, so that edits above a line do not lose it. "
        "A changed line may no longer cross, or cross differently: only a new run can tell. Stale evidence "
        "is reported rather than dropped, so a fix is never assumed."
    ),
    example="# the run saw `value = float(loss)`; the line now reads:\nvalue = float(loss.detach())\n",
    instead="# record a new run and commit it:\n# xferaudit run -o xferaudit-run.json train.py\n",
))

_add(CodeDoc(
    code="XFA601",
    name="read-breaks-compiled-graph",
    summary="A host read inside code that `torch.compile` compiles: it breaks the graph",
    what=(
        "Reports a read of device data to the host inside a function that `torch.compile` compiles: "
        "`.item()`, `.tolist()`, `int(t)`, `float(t)`, `bool(t)`, `range(t)`, `seq[t]`, `math.*(t)`, "
        "`if t:`, `while t:`, `not t`, `and`/`or` of tensors, `print(t)`, `str(t)`, `repr(t)`, logging "
        "a tensor, `t[mask]`, `nonzero`, `unique`. The compiled code is found across the project's files: "
        "what `torch.compile(fn)`, `@torch.compile` (with or without arguments), `torch.compile(model)`, "
        "`torch.compile(Net(...))`, `model.compile()` and `self.model = torch.compile(self.model)` reach, "
        "through `forward` and the functions and methods (on `self`) it calls, in any file; "
        "`@torch.compiler.disable` functions are not followed. The message names the call that compiles "
        "it. The read is reported under this code instead of its usual one (`XFA202`, `XFA401`-`XFA405`); "
        "outside compiled code, or where the reach is not shown, it keeps that code. Not reported here, as "
        "Dynamo keeps them in the graph: `.cpu()`, `.to(\"cpu\")`, `.numpy()`, `assert t`, f-string fields "
        "and `\"...\".format(t)` (unless given to `print` or logging, which break the graph themselves), numpy "
        "calls, `torch.tensor([a, b])` of tensors. `# noqa: XFA601` on the "
        "line suppresses one."
    ),
    why=(
        "Dynamo cannot put a host read into a graph: it ends the graph before the read, runs the read in "
        "Python (a synchronisation: the host waits for every queued kernel) and starts another graph after "
        "it. A step compiled as one graph becomes several, each a launch of its own, with eager Python "
        "between them, and CUDA graphs (`mode=\"reduce-overhead\"`) cover only the pieces. PyTorch says so "
        "only in its logs (`TORCH_LOGS=graph_breaks`), once."
    ),
    example=(
        "@torch.compile\n"
        "def step(x, w):\n"
        "    h = x @ w\n"
        "    if h.abs().sum().item() > 1e3:  # the graph breaks here\n"
        "        h = h / 2\n"
        "    return h\n"
    ),
    instead=(
        "@torch.compile\n"
        "def step(x, w):\n"
        "    h = x @ w\n"
        "    return torch.where(h.abs().sum() > 1e3, h / 2, h)  # one graph, no read\n"
    ),
    fixable=True,
    counts_only=True,
    note=(
        "Three ways out: keep it a tensor (`torch.where`, `torch.cond` for a branch), move the read out of "
        "the compiled code (return the tensor, read it after the call), or let Dynamo trace it: "
        "`torch._dynamo.config.capture_scalar_outputs = True` for `.item()` and conversions (a branch on the "
        "value still breaks), `capture_dynamic_output_shape_ops = True` for `t[mask]` and `nonzero`, "
        "`reorderable_logging_functions` for `print`. `xferaudit wrap` counts the read where it is (a "
        "wrapper inside compiled code breaks the graph at the same line, as the bare read does); "
        "`--ignore XFA601` leaves these reads unwrapped. `xferaudit run` reports the breaks a run really "
        "made, with their counts."
    ),
))
