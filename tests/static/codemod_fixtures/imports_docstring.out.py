#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""Module docstring.

Spans lines.
"""

# A comment that belongs to the future import.
from __future__ import annotations
from __future__ import division

# Imports the tool must leave alone.
import os  # noqa: F401
import torch
import xferaudit.runtime as _xfer


def f(x):
    return _xfer.cpu(x, site=":f:x.cpu")
