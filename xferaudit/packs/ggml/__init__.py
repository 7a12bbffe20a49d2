"""The ggml pack: rows in rules.toml, counting wrappers in runtime.py (see README.md)."""
