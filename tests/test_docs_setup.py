"""What a new user copies from the docs works as written: the set-up's torch
command is the pinned one and says where the wheel comes from, a fix's site
name is the one `wrap` writes, and the Neovim set-up covers the versions
distributions ship (0.7 and later)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_gives_the_pinned_cpu_torch_command_first_and_says_whose_index_it_needs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [ln for ln in setup.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    pin = re.search(r'"torch==([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert commands[0] == f"pip install torch=={pin} --index-url https://download.pytorch.org/whl/cpu"
    after = readme.split("## Set up", 1)[1].split("##", 1)[0]
    assert "PyTorch's own package index" in after and "must reach that index" in after


def test_the_fix_shown_in_the_docs_names_its_site_as_wrap_writes_it():
    from xferaudit.static.codemod import wrap_source

    doc = (ROOT / "docs" / "editors-and-ci.md").read_text(encoding="utf-8")
    shown = re.findall(r'"content": "(_?xfer\.\w+\([^"\\]*, site=\\"[^"\\]*\\")"', doc)
    src = b"import torch\n\n\ndef step(model, x):\n    loss = model(x)\n    return loss.item()\n"
    written = wrap_source(src, "train.py", None, "train.py").new.decode()
    assert shown and all(s.replace('\\"', '"') in written for s in shown), (shown, written)


def test_the_neovim_set_up_covers_0_7_with_the_calls_0_7_has():
    doc = (ROOT / "docs" / "editors-and-ci.md").read_text(encoding="utf-8")
    nvim = doc.split("### Neovim", 1)[1].split("## flake8", 1)[0]
    assert "Neovim 0.7" in nvim
    blocks = re.findall(r"```lua\n(.*?)```", nvim, re.S)
    old = [b for b in blocks if "start_client" in b]
    assert len(old) == 1
    # what 0.7 lacks: vim.lsp.start (0.8), vim.fs.root (0.10), vim.lsp.config/enable (0.11)
    assert not re.search(r"vim\.lsp\.start\(|vim\.fs\.|vim\.lsp\.config|vim\.lsp\.enable", old[0])
    assert "vim.lsp.buf_attach_client(args.buf" in old[0] and "nvim_create_autocmd" in old[0]
