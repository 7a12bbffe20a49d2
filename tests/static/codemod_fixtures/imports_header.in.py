#!/usr/bin/env python
# Copyright (c) somebody.
# Licensed under something.

import torch
x = torch.ones(1).cuda()
