"""The codemod keeps meaning: a program wrapped by ``wrap`` does what it did.

Programs from :mod:`codemod_programs` put tensor expressions in every context a
site can stand in. Each is wrapped as ``xferaudit wrap`` wraps it (plain, and as
``wrap --from`` a run that saw every line cross, which wraps wherever a value
could be a tensor), and run bare and wrapped, in process, on host tensors and
on the simulated device, wrapped with counting off and on. Per method, the
results (value and type), exceptions (type and message), printed and logged
output, the order of the helper calls and the warnings (category, message,
filename and line, the line read back to the bare source's) must be the bare run's.
``unwrap`` must give back every byte, restoring one call per site wrapped.

Size: 1,500 generated programs of 1 to 6 contexts each (about 5,000 contexts;
derandomized, so CI draws the same ones), and every context once more with
fixed values; two to three minutes on one core.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from codemod_programs import CONTEXTS, inputs, outcome, programs, render  # noqa: E402

from xferaudit.opforms import SITE_CATEGORIES  # noqa: E402
from xferaudit.static.codemod import unwrap_source, wrap_source  # noqa: E402
from xferaudit.static.front.evidence import FileEvidence  # noqa: E402

DEV = None  # the simulated device (conftest sets it up before the first test)
HOST = torch.device("cpu")


def _everywhere(data: bytes) -> FileEvidence:
    """Run evidence of every line crossing in every category: `wrap --from` then
    wraps every site a value the code does not place could make."""
    n = data.count(b"\n") + 1
    return FileEvidence(hot={ln: SITE_CATEGORIES for ln in range(1, n + 1)}, lines=n)


def wrapped(src: str, everywhere: bool) -> tuple[str, int]:
    """(the wrapped source, sites wrapped); unwrap checked to give back every byte."""
    data = src.encode()
    res = wrap_source(data, "m.py", None, "m.py", evidence=_everywhere(data) if everywhere else None)
    new = res.new if res.changed else data
    compile(new, "m.py", "exec", dont_inherit=True)
    back = unwrap_source(new, "m.py")
    assert (back.new if back.changed else new) == data, "unwrap did not give back every byte"
    assert not back.skipped, back.skipped
    n = sum(res.wrapped.values())
    assert sum(back.unwrapped.values()) == n, "unwrap restored a different number of calls than wrap wrapped"
    return new.decode(), n


def bare_lines(src: str, new: str) -> dict:
    """Each line of the wrapped source -> the bare source's line it came from
    (wrap adds its import and may break a statement over lines)."""
    import difflib

    a, b = src.splitlines(), new.splitlines()
    out = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for j in range(j1, j2):
            if tag == "equal":
                out[j + 1] = i1 + (j - j1) + 1
            elif tag == "replace":
                out[j + 1] = i1 + min(j - j1, i2 - i1 - 1) + 1
    return out


def _as_bare(result: list, lines: dict) -> list:
    """A wrapped run's outcome with its warnings' lines in the bare source's numbering."""
    return [(*r[:5], tuple((c, m, f, lines.get(ln, -ln) if f == "m.py" else ln) for c, m, f, ln in r[5]))
            for r in result]


def same_meaning(src: str, tv, uv, everywhere: bool) -> int:
    new, n = wrapped(src, everywhere)
    lines = bare_lines(src, new)
    for dev in (HOST, DEV):
        bare = outcome(src, tv, uv, dev, False)
        if n:
            for count in (False, True):
                got = _as_bare(outcome(new, tv, uv, dev, count), lines)
                for b, w in zip(bare, got):
                    assert w == b, (f"{b[0]} on {dev}, counting {'on' if count else 'off'}:\n"
                                    f"bare:    {b[1:]}\nwrapped: {w[1:]}\n--- wrapped source:\n{new}")
    return n


@settings(max_examples=1500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs(most=6), inputs, st.booleans())
def test_wrap_keeps_meaning(src, inp, everywhere):
    same_meaning(src, *inp, everywhere)


#: The plainest device values, as the value layer sees them (`self`'s state), and
#: explicit sites (calls of `cpu`, `item`) that the finder sees in any context.
FILLS = ({"E": "t.sum()", "E2": "self.loss", "B": "self.flag", "N": "self.n"},
         {"E": "t.sum().cpu()", "E2": "t.cpu()", "B": "(t.cpu() > 0).all()", "N": "u.sum().item()"})
#: Contexts whose only tensor is a dict key: no site, whatever the evidence.
NO_SITE = frozenset({"del_dict", "dict_key_hit"})


@pytest.mark.parametrize("ctx", sorted(CONTEXTS))
def test_each_context_keeps_its_meaning(ctx):
    """Every context of the generator, filled with each of FILLS, keeps its
    meaning on both devices (a fixed case per context, whatever hypothesis
    draws), and holds a site to wrap or leave (a dict key none)."""
    sites = 0
    for fill in FILLS:
        src = render([(ctx, fill)])
        for everywhere in (False, True):
            data = src.encode()
            res = wrap_source(data, "m.py", None, "m.py", evidence=_everywhere(data) if everywhere else None)
            sites += sum(res.wrapped.values()) + len(res.skipped)
            for tv, uv in ((0.3, 1), ([1.0, 2.0], [1, 2])):
                same_meaning(src, tv, uv, everywhere)
    assert (sites == 0) == (ctx in NO_SITE), sites



#: What each context does in a process where no guard ever ran (a guard that left
#: torch changed would change the in-process bare run too: it is no reference).
_PRISTINE = """
import pickle, sys
import torch
sys.path.insert(0, sys.argv[1])
from codemod_programs import CONTEXTS, outcome, render
from xferaudit.testing import simulated_device
import test_codemod_differential as t
dev = simulated_device()
out = {}
for ctx in sorted(CONTEXTS):
    for i, fill in enumerate(t.FILLS):
        for j, (tv, uv) in enumerate(((0.3, 1), ([1.0, 2.0], [1, 2]))):
            for d in (torch.device("cpu"), dev):
                out[ctx, i, j, d.type] = outcome(render([(ctx, fill)]), tv, uv, d, False)
sys.stdout.buffer.write(pickle.dumps(out))
"""


@pytest.fixture(scope="module")
def pristine():
    import os
    import pickle
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", _PRISTINE, here], capture_output=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return pickle.loads(done.stdout)


@pytest.mark.parametrize("ctx", sorted(CONTEXTS))
def test_the_guard_keeps_each_contexts_meaning(ctx, pristine):
    """The runtime never changes behaviour: every context, bare, run under the
    guard (log level, lite and full modes) does what it does in a process no
    guard ever ran in, on both devices, and so does it bare after the guard (a
    hooked ``Tensor.__getitem__`` once made ``torch.tensor([a, b])`` of 0-dim
    tensors raise, in the guard and for good after it)."""
    for i, fill in enumerate(FILLS):
        src = render([(ctx, fill)])
        for j, (tv, uv) in enumerate(((0.3, 1), ([1.0, 2.0], [1, 2]))):
            for dev in (HOST, DEV):
                ref = pristine[ctx, i, j, dev.type]
                for mode in ("lite", "full", ""):
                    got = outcome(src, tv, uv, dev, False, guard=mode)
                    for b, g in zip(ref, got):
                        assert g == b, (f"{b[0]} on {dev} {f'under the {mode} guard' if mode else 'after guards'}:"
                                        f"\npristine: {b[1:]}\ngot:      {g[1:]}")
