"""`xferaudit wrap` on the packs' example programs writes exactly the wrapper
calls the runtime tests run (tests/packs/ggml/ggml_model.py, jax_model.py): same
wrapper names, same arguments, same site names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

try:
    import libcst  # noqa: F401
except ImportError:
    pytest.skip("libcst is not installed: the codemod needs it", allow_module_level=True)

from xferaudit.cli import main  # noqa: E402

HERE = Path(__file__).parent
ORIGINAL = {
    "jax_device_put": "jax.device_put({})", "jax_device_get": "jax.device_get({})",
    "jax_np_asarray": "np.asarray({})", "jax_jit": "{}",
}
WRAPPED = re.compile(r'xfer\.((?:ggml|jax)_\w+)\((.*), site="[^"]+"(?:, decorator=True)?\)')


def _unwrap(text: str) -> str:
    def back(mo):
        name, args = mo.group(1), mo.group(2)
        return ORIGINAL[name].format(args) if name in ORIGINAL else f"ggml.{name}({args})"

    return WRAPPED.sub(back, text).replace("import xferaudit.runtime as _xfer\n", "")


def _wrapper_lines(text: str) -> set:
    return {line.strip() for line in text.splitlines() if "xfer." in line and "import" not in line}


@pytest.mark.parametrize("name", ["ggml/ggml_model.py", "jax/jax_model.py"])
def test_wrap_writes_the_wrapper_calls_the_runtime_tests_run(name, tmp_path, capsys):
    # a wide line length: the wrapper calls are compared line by line, not broken
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 1000\n\n[tool.xferaudit]\n")
    target = tmp_path / "tests" / "packs" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    hand = (HERE / name).read_text()
    target.write_text(_unwrap(hand))
    assert "xfer." not in target.read_text()
    main(["wrap", "-q", str(target)])
    out = _wrapper_lines(target.read_text())
    want = _wrapper_lines(hand)
    assert out <= want
    # A bare `@jax.jit` may be left for a hand edit (its wrapped form is
    # `@xfer.jax_jit(jax.jit, site=..., decorator=True)`); every call is wrapped.
    assert {w for w in want - out if not w.startswith("@_xfer.jax_jit(jax.jit,")} == set()
    assert len(out) >= len(want) - 1
