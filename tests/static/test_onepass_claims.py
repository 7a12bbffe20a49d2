"""The one-parse pool's roots (xferaudit/static/project/onepass.py): the workers
start before the lead has found the files holding a TorchScript or
``torch.compile`` root, so a worker may hold such a file; the lead then walks
the tree the worker sends. Maps and findings are the serial passes' either way."""

from __future__ import annotations

from xferaudit.static.project import onepass

from test_onepass import _cold, _findings, project  # noqa: F401  (the fixture)


def test_roots_held_by_workers_give_the_serial_maps_and_findings(project, monkeypatch):  # noqa: F811
    claimed: list = []
    real_claim = onepass.Pool.claim

    def late_claim(self, roots):
        with self.lock:
            claimed.extend((self.claims[j], self.items[j].rel) for j in roots)
        return real_claim(self, roots)

    # the lead looks for roots only after each worker has read its share (facts sent)
    real_start = onepass.Pool.start

    def start_and_wait(self, later=frozenset()):
        real_start(self, later)
        got = [self._wait(lambda m: m[0] == "facts", [c]) for c in self.conns]
        self.inbox.extend(got)  # (read again by facts())

    with monkeypatch.context() as m:
        m.setattr(onepass.Pool, "start", start_and_wait)
        m.setattr(onepass.Pool, "claim", late_claim)
        one = _cold(project, 2)
    assert claimed and all(c[0] > 0 for c in claimed), claimed  # (held by a worker, not the lead)
    serial = _cold(project, 1)
    assert one.scripted == serial.scripted and one.scripted
    assert one.compiled == serial.compiled and one.compiled
    assert one.placed == serial.placed
    assert _findings(one) == _findings(serial)
