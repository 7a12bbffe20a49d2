"""The guard: crossings nobody wrapped, seen through torch's dispatch.

``xfer.guard(...)`` (``guard``), its hooks on torch's C methods
(``guard_hooks``; ``type_slots`` keeps a hooked tensor no sequence to C
code), the ops that copy and how many bytes (``guard_ops``), what cannot run
under its mode (``guard_trace``: ``torch.jit.trace``), what it prints and logs
(``guard_print``) and its per-thread state (``guard_state``). Above the
counted path, which it records through.
"""
