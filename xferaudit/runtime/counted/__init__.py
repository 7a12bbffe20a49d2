"""The counted path: what a wrapper does when it records a crossing.

The recorder (``STATE``, ``record``, ``timed_call``) and its tallies, the rows
a report is made of, the crossing rules (which way a copy went, and its bytes),
the kinds of the pack rows, site names (a short literal named after its file),
the frames and statements a site is found in, ranges, and the C counted path
of the scalar reads (``fastpath``, ``_fastcount.c``). The bottom layer: it
imports no other part of the runtime.
"""
