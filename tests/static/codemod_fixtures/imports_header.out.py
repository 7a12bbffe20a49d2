#!/usr/bin/env python
# Copyright (c) somebody.
# Licensed under something.

import xferaudit.runtime as xfer
import torch
x = xfer.cuda(torch.ones(1), site="train.py:<module>:torch.ones(1).cuda")
