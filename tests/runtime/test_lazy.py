"""The packs' libraries are imported on first use, or the error says how to install them."""

from __future__ import annotations

import pytest

from xferaudit.runtime.counted._lazy import library


class NoLib(ImportError):
    pass


def test_missing_library_raises_the_packs_error_with_the_hint():
    with pytest.raises(NoLib, match=r"calls xferaudit_no_such_lib, but it is missing; pip install x"):
        library("xferaudit_no_such_lib", NoLib, "it is missing; pip install x")


def test_an_installed_library_is_returned_as_imported():
    import json

    assert library("json", NoLib, "missing", probe="dumps") is json


def test_a_namespace_package_of_the_same_name_is_not_the_library(tmp_path, monkeypatch):
    # A folder named like the library (a test folder on sys.path) imports as a
    # namespace package: without the probe attribute it is not the library.
    (tmp_path / "xferaudit_fake_lib").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(NoLib, match="is not it"):
        library("xferaudit_fake_lib", NoLib, "it is missing", probe="asarray")
