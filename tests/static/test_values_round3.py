"""The value layer on what real code does: tensors known from their uses,
state kept by this file's classes, merges, indices read back, and the false
findings new users met (each a small source and the findings it must give)."""

from __future__ import annotations

import dataclasses
import json
import textwrap

import pytest

from xferaudit.cli import main
from xferaudit.rules import table
from xferaudit.static.front.finder import find_in_source

RULES = {m: dataclasses.replace(table(), implicit=m) for m in ("proven", "gpu-first")}


def _sites(src: str, mode: str = "gpu-first"):
    res = find_in_source(textwrap.dedent(src), "x.py", RULES[mode], "lib/x.py")
    assert res.error is None, res.error
    return res.sites


def implicit(src: str, mode: str = "gpu-first") -> list:
    """(line, code) of the implicit findings."""
    return sorted((s.line, s.rule) for s in _sites(src, mode) if s.implicit)


def explicit(src: str, mode: str = "gpu-first") -> list:
    """(line, kind, call) of the explicit sites."""
    return [(s.line, s.kind, s.call) for s in _sites(src, mode) if not s.implicit]


# --- false findings ----------------------------------------------------------------------------


def test_an_unknown_callables_result_and_its_attributes_are_no_tensors():
    src = """\
    def step(make, model, x, dev):
        x = x.cuda(dev) * 2
        ctx = make(x)
        if ctx.flag:
            pass
        out = model(x)
        if out.loss > 1:
            pass
    """
    # make(x).flag is no tensor; a model output's field (out.loss) still is
    assert implicit(src) == [(7, "XFA402")]


def test_a_meters_median_is_no_tensor():
    """detectron2's writer: a history buffer's median() and a float made of it."""
    src = """\
    import datetime
    def eta(storage, max_iter, iteration):
        eta_seconds = storage.history("time").median(1000) * (max_iter - iteration - 1)
        text = "{}: {:.4g}".format("loss", storage.history("loss").median(20))
        return str(datetime.timedelta(seconds=int(eta_seconds))), text
    """
    assert implicit(src) == []


def test_item_and_tolist_of_numpy_values_are_no_sites():
    """ultralytics: numpy values by isinstance, by annotation, by np.load, astype and cv2."""
    src = """\
    import cv2
    import numpy as np
    def sanitize(value):
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
        return value.item()
    def load(file):
        with np.load(file, allow_pickle=False) as data:
            embeddings, model = data["embeddings"], data["model"]
        return str(model.item())
    def plot(px: np.ndarray, boxes, mask):
        contours = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)[0]
        return px.tolist(), boxes.astype(np.int64).tolist(), [c.ravel().tolist() for c in contours]
    """
    assert explicit(src) == [(8, "down", "value.item()")]  # nothing says what the last one is


# --- merges ------------------------------------------------------------------------------------


def test_only_host_evidence_cancels_a_device_value_where_paths_meet():
    src = """\
    import torch
    def f(x, flag, helper):
        best = None
        for _ in range(3):
            cand = torch.ones(3, device="cuda").sum()
            if best is None or flag:
                best = cand
        if best > 0:
            pass
        y = helper(x) if flag else torch.zeros(2, device="cuda")
        print(y)
        z = torch.zeros(2) if flag else torch.zeros(2, device="cuda")
        print(z)
    """
    # an unknown or None path cancels nothing in gpu-first; a host one does
    assert implicit(src) == [(8, "XFA402"), (11, "XFA403")]
    assert implicit(src, "proven") == []


def test_to_a_name_bound_to_a_literal_device_has_its_direction():
    """detectron2's test_deformable: `device = torch.device("cuda")` above `.to(device)`."""
    src = """\
    import torch
    def f(setup):
        device = torch.device("cuda")
        for k in [3, 5]:
            inputs = torch.rand(3).to(device)
        cpu = "cpu"
        back = inputs.to(device=cpu)
        either = "cuda" if torch.cuda.is_available() else "cpu"
        dev = setup()
        return inputs.to(either), back.to(dev)
    """
    assert explicit(src) == [(5, "up", "torch.rand(3).to(device)"), (7, "down", "inputs.to(device=cpu)"),
                             (10, "move", "inputs.to(either)"), (10, "move", "back.to(dev)")]


def test_check_evidence_says_a_lines_count_is_shared_by_its_sites(tmp_path, monkeypatch, capsys):
    """A run counts a line: two `.to()` of one line, 445 each, make one entry of 890."""
    from evidence_util import entry_at, project, write_run

    project(tmp_path, monkeypatch)
    (tmp_path / "move.py").write_text("def f(a, b, dev):\n    return a.to(dev), b.to(dev)\n")
    write_run(tmp_path / "run.json", [entry_at(tmp_path, "move.py", "return a.to(dev), b.to(dev)", "aten._to_copy",
                                               "up", function="f", count=890, nbytes=8)])
    main(["check", "--no-cache", "--evidence", "run.json", "move.py"])
    found = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("move.py:2:")]
    assert len(found) == 2
    assert all("(aten._to_copy, up, 890 times, 8 bytes on this line, for its 2 sites together; run.json)" in ln
               for ln in found)


# --- parameters known by their uses ---------------------------------------------------------------


def test_a_parameter_is_a_tensor_by_a_tensor_only_use():
    src = """\
    import torch
    import torch.nn.functional as F
    def losses(gt_classes, scores, hist, logits):
        if gt_classes.numel() == 0:
            print(gt_classes)
        best = scores.argmax(dim=1)
        if scores.max() > 0.5:
            pass
        counts = torch.histc(hist, bins=10)
        total = float(hist.sum())
        probs = F.softmax(logits, -1)
        assert logits.mean() > 0
        return best, probs
    """
    assert implicit(src) == [(5, "XFA403"), (7, "XFA402"), (10, "XFA401"), (12, "XFA402")]
    assert implicit(src, "proven") == []


def test_descending_is_a_use_only_a_tensor_has():
    src = """\
    import numpy as np
    def rank(scores, arr):
        order = scores.argsort(descending=True)
        idx = np.argsort(arr, kind="stable")
        if scores.max() > 0.5:
            pass
        if arr.max() > 0.5:
            pass
        return order, idx
    """
    assert implicit(src) == [(5, "XFA402")]


def test_a_rebinding_to_a_slice_or_a_masked_part_of_itself_keeps_what_a_later_use_shows():
    src = """\
    import torch
    def post(boxes, scores, labels, thr):
        keep = scores > thr
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        order = scores.argsort(descending=True)
        return boxes, order, labels

    def head(logits, items, k):
        if logits.max() > 0:
            pass
        if items.max() > 0:
            pass
        logits = logits[:, 0]
        items = items[k]
        return torch.sigmoid(logits), torch.sigmoid(items)
    """
    # scores[keep] and logits[:, 0] are what scores and logits were; items[k] may be a list's item
    assert implicit(src) == [(4, "XFA405"), (4, "XFA405"), (4, "XFA405"), (9, "XFA402")]
    assert implicit(src, "proven") == []


@pytest.mark.parametrize("end", ["\r\n", "\r"])
def test_uses_are_found_on_the_lines_ast_numbers_whatever_the_line_endings(end):
    src = """\
    import torch
    def losses(gt_classes, scores):
        if gt_classes.numel() == 0:
            print(gt_classes)
        if isinstance(scores, list):
            pass
        return float(scores.sum()), scores.argmax(dim=1)
    """
    want = implicit(src)
    assert want == [(4, "XFA403")]  # (scores: its type is tested)
    assert implicit(textwrap.dedent(src).replace("\n", end)) == want


def test_uses_numpy_also_has_are_no_evidence_nor_is_a_use_after_a_rebinding_or_a_type_test():
    src = """\
    import numpy as np
    import torch
    def f(a, b, c, d, e=0):
        i = a.argmax()
        if a.max() > 0:
            pass
        b = np.asarray(b)
        b.numel()
        if isinstance(c, torch.Tensor):
            c.detach()
        if c.max() > 0:
            pass
        stats = [d.numel() for d in d]
        print(d, e)
        e.masked_fill(e > 0, 0)
        return float(b.sum())
    """
    assert implicit(src) == []


def test_a_parameter_indexed_by_a_device_mask_is_a_device_value_from_the_start():
    src = """\
    import torch
    def post(boxes, scores, dev):
        if boxes.max() > 1:
            pass
        keep = scores.to(dev) > 0.5
        kept = boxes[keep]
        return float(boxes.sum()), kept

    def nms(boxes, order):
        m = torch.ones(3, device="cuda") > 0
        print(boxes)
        b = boxes[m]
        return b
    """
    # boxes[keep], keep on the device: boxes is a device tensor (or a structure taking a mask)
    # in both readings, from the function's start; it is not itself printed or tested: only
    # what a tensor's method gives (`boxes.max()`) is read as one
    want = [(3, "XFA402"), (6, "XFA405"), (7, "XFA401"), (12, "XFA405")]
    assert implicit(src) == want
    assert implicit(src, "proven") == want


def test_a_tensor_mask_the_file_does_not_place_shows_a_parameter_only_gpu_first():
    src = """\
    import torch
    def post(boxes, scores):
        keep = torch.isfinite(scores).all(dim=1)
        top = boxes[keep]
        return float(boxes.sum()), top
    """
    assert implicit(src) == [(4, "XFA405"), (5, "XFA401")]
    assert implicit(src, "proven") == []


def test_a_mask_use_is_no_evidence_after_a_rebinding_nor_with_a_type_test_nor_for_a_default():
    src = """\
    import torch
    M = torch.ones(3, device="cuda") > 0
    def rebound(boxes, other):
        total = float(boxes.sum())
        boxes = other
        return boxes[M], total
    def tested(inst):
        total = float(inst.sum())
        if hasattr(inst, "fields"):
            pass
        return inst[M], total
    def defaulted(n=0, *rest):
        n[M], rest[M]
        return float(n.sum()), float(rest.sum())
    def used(boxes):
        total = float(boxes.sum())
        return boxes[M], total
    """
    # only `used` shows its parameter on the device before anything else binds or tests it
    assert implicit(src) == [(6, "XFA405"), (11, "XFA405"), (13, "XFA405"), (13, "XFA405"), (16, "XFA401"),
                              (17, "XFA405")]
    assert implicit(src, "proven") == implicit(src)


def test_the_evidence_of_a_mask_use_says_which_mask(tmp_path, capsys):
    p = tmp_path / "post.py"
    p.write_text(textwrap.dedent("""\
        import torch
        def post(boxes, dev):
            keep = torch.ones(3, device=dev) > 0
            kept = boxes[keep]
            return float(boxes.sum())
    """))
    assert main(["sites", str(p), "--no-cache", "--format", "json"]) == 0
    got = {r["line"]: r.get("evidence") for r in json.loads(capsys.readouterr().out)}
    assert got[5] == ("result of `float(boxes.sum())`, result of `boxes.sum()`, boxes: a parameter indexed by "
                      "a mask on the device, `boxes[keep]` (line 4)")


# --- indices, rebindings, narrowing, formatting -----------------------------------------------------


def test_a_tensor_of_no_dimensions_as_an_index_is_read_back():
    src = """\
    import torch
    def nms(dets: torch.Tensor, scores: torch.Tensor, thresh: float):
        x1 = dets[:, 0]
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i)
            xx1 = x1[order[1:]].clamp(min=x1[i])
            inds = torch.where(xx1 <= thresh)[0]
            order = order[inds + 1]
        return keep
    def gather(x: torch.Tensor, edge_index: torch.Tensor, t: torch.Tensor):
        return x[edge_index[0]], x[t.argmax(dim=1)], x[t.argmax()], x[torch.argmax(t)]
    """
    # order[0] of a vector and argmax() without a dimension have none; edge_index[0] may be a row
    assert implicit(src) == [(9, "XFA401"), (10, "XFA405"), (14, "XFA401"), (14, "XFA401")]


def test_x_passed_through_an_unknown_function_stays_a_tensor():
    src = """\
    from torch import Tensor
    def f(x: Tensor, h: Tensor, block, to_numpy, make):
        x = checkpoint(block, x)
        h = rearrange(h, "b c -> c b")
        if x.any() or h.any():
            pass
        x = to_numpy(x)
        print(x, make(h))
    """
    # to_numpy(x) converts, by its name; what make(h) gives is no tensor
    assert implicit(src) == [(5, "XFA402"), (5, "XFA402")]
    assert implicit(src, "proven") == []


def test_isinstance_list_makes_an_index_that_uploads():
    src = """\
    import torch
    def pick(t, v, w):
        t = torch.zeros(3, device="cuda")
        if isinstance(v, list):
            return t[v]
        if isinstance(w, (list, tuple)):
            return t[w]
        return t[v]
    """
    assert implicit(src) == [(5, "XFA406")]


def test_a_concatenated_f_string_has_one_finding_per_line():
    src = """\
    from torch import Tensor
    def log(x: Tensor, y: Tensor):
        print(f"a {x} {y} "
              f"b {y}")
        s = f"a {x} " f"b {y}"
    """
    assert implicit(src) == [(3, "XFA403"), (4, "XFA403"), (5, "XFA403")]


def test_lists_concatenated_as_an_index_upload():
    src = """\
    import torch
    def f(t: torch.Tensor, n: int):
        keep = [0, 1]
        a = t[keep + [n]]
        b = t[[i for i in range(n)] + [n]]
        c = t[sorted(keep) + [n]]
        return a, b, c, t[n]
    """
    assert implicit(src) == [(4, "XFA406"), (5, "XFA406"), (6, "XFA406")]


# --- explainable findings -------------------------------------------------------------------------------


def test_each_implicit_finding_says_its_evidence(tmp_path, capsys):
    p = tmp_path / "train.py"
    p.write_text(textwrap.dedent("""\
        import torch
        def step(model, x, dev, scores):
            model = model.to(dev)
            out = model(x)
            loss = out.sum()
            if loss > 100:
                pass
            best = scores.argmax(dim=1)
            print(scores)
    """))
    assert main(["sites", str(p), "--no-cache", "--format", "json"]) == 0
    got = {r["line"]: r.get("evidence") for r in json.loads(capsys.readouterr().out)}
    assert got[6] == ("loss: `out.sum()` (line 5), out: result of `model(x)` (line 4), "
                      "model: moved to the device by `model.to(dev)` (line 3)")
    assert got[9].startswith("scores: a parameter used as only a tensor is, `scores.argmax(dim=...)` (line 8); "
                             "read gpu-first")
    assert got[3] is None  # an explicit site: no evidence key
    assert main(["sites", str(p), "--no-cache", "--explain"]) == 0
    out = capsys.readouterr().out.splitlines()
    i = next(i for i, ln in enumerate(out) if ":6:8: down  XFA402" in ln)
    assert out[i + 1] == "    evidence: " + got[6]


# --- this file's classes: state across methods, properties, torch functions as values -------------


METER = """\
import torch


class AverageMeter:
    def __init__(self, name, fmt=":f"):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)


def accuracy(output, target):
    res = []
    for k in (1, 5):
        res.append(output.eq(target).float().sum(0, keepdim=True))
    return res


def validate(loader, model, dev):
    losses = AverageMeter("Loss")
    top1 = AverageMeter("Acc@1")
    for images, target in loader:
        output = model(images.to(dev))
        acc1, acc5 = accuracy(output, target.to(dev))
        losses.update(output.sum().item(), 4)
        top1.update(acc1[0], 4)
    print(f"loss {losses.avg:.3f}")
    return top1.avg


def main(loader, model, dev):
    best = 0
    acc1 = validate(loader, model, dev)
    if acc1 > best:
        print("best")
"""


def test_an_instance_keeps_what_its_methods_are_given():
    # top1.update(device value): self.val/sum/avg are device values, formatted in
    # __str__ and returned by validate(); losses.update(a Python float) is not
    assert implicit(METER) == [(24, "XFA403"), (49, "XFA402")]
    assert implicit(METER.replace("top1.update(acc1[0], 4)", "top1.update(float(acc1[0]), 4)")) == [(41, "XFA401")]


def test_a_property_returning_a_torch_function_is_called_as_one():
    src = """\
    import torch
    from torch import Tensor
    class EarlyStopping:
        mode_dict = {"min": torch.lt, "max": torch.gt}
        def __init__(self, mode):
            self.mode = mode
        @property
        def monitor_op(self):
            return self.mode_dict[self.mode]
        def check(self, current: Tensor, best: float):
            if self.monitor_op(current, best):
                return True
            return False
    """
    assert implicit(src) == [(11, "XFA402")]


# --- precision: what judging real code turned up --------------------------------------------------------


def test_what_judging_real_code_turned_up_is_no_finding():
    src = """\
    import numpy as np
    import torch
    from torch import Tensor
    def panel(gt: Tensor, i: int):
        g = gt[i]
        return g.cpu().numpy() if isinstance(g, torch.Tensor) else np.asarray(g, np.float32)
    def to_format(image):
        is_torch = isinstance(image, torch.Tensor)
        image = image.permute(2, 0, 1) if is_torch else image.transpose(2, 0, 1)
        print(image)
    class Lazy:
        def __init__(self, metatensor):
            self.metatensor = metatensor
        def __repr__(self):
            return f"Lazy({repr(self.metatensor)})"
    def lazy(shape):
        return Lazy(torch.empty(shape, device="meta"))
    class Pi0Processor:
        def __call__(self, pixel_values: Tensor, mask: Tensor):
            padded = pixel_values.new_zeros(3)
            padded[mask] = pixel_values
            return padded
    def crop(processor, image: Tensor):
        out = processor(image)
        for size in out["image_size"]:
            image = image[:, : size[0]]
        return out["logits"][: image.sum()]
    """
    # only the model output's field of what an unknown callable gives is a tensor
    assert implicit(src) == [(27, "XFA401")]


def test_data_folders_are_read_proven_by_default():
    src = "from torch import Tensor\ndef sample(w: Tensor):\n    if w.sum() <= 0:\n        pass\n"
    assert [s.line for s in find_in_source(src, "x.py", RULES["gpu-first"], "pkg/data/sampler.py").sites] == []
    assert [s.line for s in find_in_source(src, "x.py", RULES["gpu-first"], "pkg/models/sampler.py").sites] == [3]


def test_a_host_tensor_built_from_device_values_is_a_conversion_of_each():
    # torch.tensor of a list holding device scalars converts each to a number (an item()
    # each: two DtoH memcpys for two elements on the H200) to build a host tensor
    src = """\
    import torch

    def evaluate(model, loader, device):
        losses = []
        for x in loader:
            loss = model(x.to(device)).sum()
            losses.append(loss)
        mean = torch.tensor(losses).mean()
        pair = torch.tensor([loss, loss * 2])
        onhost = torch.tensor([loss, 1.0], device="cpu")
        nested = torch.as_tensor([[loss], [loss]])
        updev = torch.tensor([loss, 1.0], device=device)
        same = torch.tensor(loss)
        plain = torch.tensor([1.0, 2.0])
        table = torch.tensor({"a": loss})
        return mean, pair, onhost, nested, updev, same, plain, table
    """
    for mode in ("proven", "gpu-first"):
        assert implicit(src, mode) == [(8, "XFA401"), (9, "XFA401"), (10, "XFA401"), (11, "XFA401")], mode
    assert (12, "up", "torch.tensor") in [(ln, k, c.split("(")[0]) for ln, k, c in explicit(src)]
    # PyTorch reads the elements where neither a wrapper nor the guard sees them: left, with why
    left = {s.line: s.no_wrap for s in _sites(src) if s.implicit}
    assert all("neither a wrapper nor the guard" in why for why in left.values()), left


def test_a_host_tensor_of_host_values_or_a_device_copy_is_no_conversion():
    src = """\
    import torch

    def f(xs, t, device):
        a = torch.tensor([x * 2 for x in xs])
        b = torch.tensor([t.shape[0], len(xs)])
        c = torch.as_tensor([1, 2], torch.long, device)
        return a, b, c
    """
    assert implicit(src, "gpu-first") == []


def test_a_list_of_device_values_is_empty_where_a_test_of_its_length_fails():
    # kornia's nms: `if len(keep) > 0: return torch.stack(keep)` then `return torch.tensor(keep)`
    # builds a host tensor of an empty list: nothing is read back
    src = """\
    import torch

    def nms(scores, n, iou_threshold):
        keep = []
        order = scores.cuda().argsort()
        while order.numel() > 0:
            keep.append(order[0])
            order = order[1:]
        if len(keep) > 0:
            return torch.stack(keep)
        return torch.tensor(keep)

    def other(scores):
        keep = [torch.argmax(scores.cuda())]
        if len(keep) == 0:
            return torch.tensor(keep)
        return torch.tensor(keep)
    """
    assert [c for c in implicit(src) if c[1] == "XFA401"] == [(17, "XFA401")]


def test_wrap_leaves_a_host_tensor_built_from_device_values_and_check_says_why(tmp_path, monkeypatch, capsys):
    # (tests/runtime/test_guard_gpu.py shows on CUDA that the reads are real: one DtoH copy each)
    src = "import torch\n\n\ndef pair(x):\n    a = x.cuda()\n    return torch.tensor([a, a * 2])\n"
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "pairs.py").write_text(src)
    monkeypatch.chdir(tmp_path)
    assert main(["wrap", "pairs.py", "--implicit", "gpu-first"]) == 1  # (a site left: wrap says so)
    lines = (tmp_path / "pairs.py").read_text().splitlines()
    assert any(ln.startswith("    a = _xfer.cuda(x, site=") for ln in lines)  # (the upload: wrapped)
    assert lines[-1] == "    return torch.tensor([a, a * 2])"  # (the element reads: left)
    assert "pairs.py:6:18: XFA401 left as it is" in capsys.readouterr().err
    assert main(["check", "pairs.py", "--implicit", "gpu-first", "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert f"pairs.py:{len(lines)}:18: XFA401" in out and "neither a wrapper nor the guard" in out, out


def test_a_host_tensor_of_tensors_the_code_does_not_place_is_no_finding():
    # gpu-first takes a tensor nothing places for a device one, but a list of such tensors
    # handed to torch.tensor is most often of host ones (positions, shapes): not reported
    src = """\
    import torch

    def deltas(a: torch.Tensor, n: int):
        out = []
        for i in range(n):
            out.append(a.max() + 1 - i)
        return torch.tensor(out), torch.tensor([a.sum(), a.mean()])
    """
    assert [c for c in implicit(src) if c[1] == "XFA401"] == []
