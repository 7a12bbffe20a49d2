"""``xferaudit server``: the Language Server Protocol over standard input and output.

An editor starts ``xferaudit server`` and talks JSON-RPC to it: it shows
``check``'s findings as you type, offers ``wrap``'s edit for each one, and
explains codes on hover. The server needs pygls (``pip install
'xferaudit[server]'``), imported only when it runs; everything it reports
comes from the engine ``check -`` and ``wrap -`` use, so the editor, the
command line and CI agree.

- :mod:`.documents`: the open documents and what can be done with them (no
  protocol here);
- :mod:`.lsp`: the pygls shell (features, positions in the client's units,
  the per-document wait after a change).
"""

from __future__ import annotations


def main(stdin=None, stdout=None) -> None:
    """Run the server until the client exits it."""
    from .lsp import start

    start(stdin, stdout)
