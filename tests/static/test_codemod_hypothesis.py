"""Property: for any layout of a site call, wrap compiles, is idempotent, leaves no
unwrapped site behind, and unwrap gives back the exact bytes."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.front.finder import decode_source, find_in_source

RECEIVERS = ["x", "self.x", "x[0]", "(a + b)", "model(x)", "f(x)(y)", "'s'", "x.y.z", "(x)",
             "[x][0]", "{0: x}[0]", "x.detach()", "(w := x)", "super()", '"a\\tb"', "b'\\x00'"]
OWN_SCOPE = ["(yield)", "(await x)"]  # only directly in the function body
CALLS = [("cpu", []), ("item", []), ("tolist", []), ("cuda", ["0"]), ("to", ["dev"]),
         ("to", ["dev", "non_blocking=True"]), ("to", ["*a", "**k"]), ("copy_", ["src"]),
         ("numpy", ["force=True"]), ("replay", []), ("to", ["'cuda:1'"]), ("cuda", [])]
# Whitespace that is legal anywhere inside brackets.
WS = ["", " ", "  ", "\n", "\n    ", "  # note\n    ", " \\\n    ", "\t", "\n\n        "]
FLAT = ["", " "]  # inside an f-string replacement field (3.11: no newlines, comments, backslashes)


@st.composite
def call(draw, ws, depth=0, receivers=tuple(RECEIVERS)):
    recv = draw(st.sampled_from(receivers)) if depth == 0 else draw(call(ws, depth - 1, receivers))
    name, args = draw(st.sampled_from(CALLS))
    w = lambda: draw(st.sampled_from(ws))  # noqa: E731
    parts = [recv, w(), ".", w(), name, w(), "(", w()]
    for i, a in enumerate(args):
        if i:
            parts += [w(), ",", w()]
        parts.append(a)
    if args and draw(st.booleans()):
        parts += [w(), ","]
    parts += [w(), ")"]
    text = "".join(parts)
    if draw(st.booleans()):
        text = "(" + w() + text + w() + ")"
    return text


@st.composite
def program(draw):
    context = draw(st.sampled_from(["assign", "lambda", "listcomp", "fstring", "default", "async"]))
    if context == "fstring":
        expr = draw(call(FLAT, draw(st.integers(0, 1))))
        quote = draw(st.sampled_from(['"', "'"]))
        stmt = f"    s = f{quote}{{ {expr}}} {{ {expr}!r}}{quote}\n"
    else:
        receivers = tuple(RECEIVERS + OWN_SCOPE) if context == "assign" else tuple(RECEIVERS)
        expr = draw(call(WS, draw(st.integers(0, 2)), receivers))
        if context == "assign":
            stmt = f"    y = (\n        {expr}\n    )\n"
        elif context == "lambda":
            stmt = f"    g = lambda x: (\n        {expr})\n"
        elif context == "listcomp":
            stmt = f"    z = [(\n        {expr}) for x in xs]\n"
        elif context == "default":
            return f"import torch\n\n\ndef h(x=None, w=(\n    {expr})):\n    pass\n"
        else:
            stmt = f"    v = [(\n        {expr}) async for x in xs]\n"
    head = "async def" if context == "async" or "await" in expr else "def"
    return f"import torch\n\n\n{head} step(self, x, xs, dev, a, k, src):\n    yield\n{stmt}"


def _unwrapped(data: bytes) -> int:
    res = find_in_source(decode_source(data), "m.py", None, "m.py")
    assert res.error is None
    return sum(1 for s in res.sites if not s.wrapped and not s.suppressed)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program(), st.sampled_from([b"\n", b"\r\n"]))
# a wrapper's result read as its bare call's: the host tensor `copy_` returns needs no `.cpu()` site
@example("import torch\n\n\ndef step(self, x, xs, dev, a, k, src):\n    yield\n    y = (\n"
         "        x.cpu().copy_(src).cpu()\n    )\n", b"\n")
def test_any_layout_round_trips(text, newline):
    src = text.encode().replace(b"\n", newline)
    try:  # some f-string combinations are not valid before 3.12
        compile(src, "m.py", "exec", dont_inherit=True)
    except SyntaxError:
        assume(False)
    res = wrap_source(src, "m.py", None, "m.py")
    new = res.new if res.changed else src
    compile(new, "m.py", "exec", dont_inherit=True)
    assert _unwrapped(new) == len(res.skipped)
    again = wrap_source(new, "m.py", None, "m.py")
    assert not again.changed
    back = unwrap_source(new, "m.py")
    assert (back.new if back.changed else new) == src
    if res.changed:
        assert sum(res.wrapped.values()) >= 1
