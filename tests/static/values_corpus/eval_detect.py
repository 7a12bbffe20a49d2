"""Detection post-processing: data-dependent sizes, hidden uploads and downloads, saves."""
import numpy as np
import torch


def postprocess(model, images, device, keep_idx, thresholds):
    model = model.cuda()
    images = images.cuda()
    scores = model(images)
    boxes = scores * 4
    mask = scores > 0.5
    kept = boxes[mask]  # expect: XFA405
    idx = scores.nonzero()  # expect: XFA405
    labels = torch.unique(scores.argmax(-1))  # expect: XFA405
    sel = torch.masked_select(scores, mask)  # expect: XFA405
    where = torch.where(mask)  # expect: XFA405
    rep = scores.repeat_interleave(idx.squeeze(-1))  # expect: XFA405
    first = scores[[0, 5]]  # expect: XFA406
    host_idx = torch.arange(3)
    cols = scores[:, host_idx]  # expect: XFA406
    scores[0] = np.zeros(4)  # expect: XFA406
    history = torch.zeros(10)
    history[0] = scores.max()  # expect: XFA407
    torch.save(scores, "scores.pt")  # expect: XFA408
    torch.save(model.state_dict(), "model.pt")  # expect: XFA408
    # look-alikes: none reported
    fixed = torch.where(mask, scores, 0.0)
    rep2 = scores.repeat_interleave(idx.squeeze(-1), output_size=16)
    scores[mask] = 0.0
    host = torch.rand(5)
    hm = host[host > 0.5]
    hn = host.nonzero()
    torch.save(host, "host.pt")
    half = scores * 0.5
    dev_idx = torch.tensor([0, 1], device=device)
    picked = scores[dev_idx]
    n = scores.shape[0]
    top = scores[:n]
    return kept, idx, labels, sel, where, rep, first, cols, fixed, rep2, hm, hn, half, picked, top


def from_host(arr, device):
    t = torch.from_numpy(arr)
    u = t[t > 0]
    w = t.to(device)
    cnt = int(w.sum())  # expect: XFA401
    return u, cnt


def per_box(model, loader, device):
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        outputs = model(**batch)
        boxes, scores = outputs["boxes"], outputs["scores"]
        for box, score in zip(boxes, scores):
            if score > 0.5:  # expect: XFA402
                print(box)  # expect: XFA403
        for i, s in enumerate(scores):
            if i > 2:
                break
        names = [str(n) for n in range(3)]
    return names
