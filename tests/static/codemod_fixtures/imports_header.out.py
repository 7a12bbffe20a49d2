#!/usr/bin/env python
# Copyright (c) somebody.
# Licensed under something.

import torch
import xferaudit.runtime as _xfer
x = _xfer.cuda(torch.ones(1), site=":<module>:torch.ones(1).cuda")
