#!/usr/bin/python3
"""ddp_torch: PyTorch's side of the model/optimizer equivalence check
(tests/crosscheck/ddp_torch.sh; Debian's python3-torch, 1.13).

    ddp_torch.py DIR          check every DIR/case_*.safetensors that
                              build/tests/unit/test_torch_cases wrote, then write
                              DIR/torch_written.safetensors for the C side to load
    ddp_torch.py --fixture F  write that torch file to F (the committed copy is
                              tests/crosscheck/torch_written.safetensors)

A case holds our initial parameters, the batches, and what our model computed:
the first logits, each step's loss, the first step's gradients, the final
parameters and BatchNorm buffers. Here the same network is built from
torch.nn modules, torch.manual_seed(seed) must give the same initial
parameters bit for bit, and torch then trains on the same batches with
torch.optim; each quantity must agree to float32 tolerance (see TOLERANCE).
The model file our checkpoint_save_model wrote must load with
load_state_dict(strict=True). Prints "PASS ddp_torch.NAME" or
"FAIL ddp_torch.NAME: why" per check, with the largest error measured.

The python safetensors package is not installed, so the format is read and
written here in a few lines: 8 bytes of little-endian header size, a JSON
header, the raw little-endian data.
"""
import json
import math
import struct
import sys
from pathlib import Path

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "U8": torch.uint8}

# Why not exact: the matrix products sum in another order (OpenBLAS blocks our
# feature-major products differently from torch's batch-major addmm), torch's
# AVX2 kernels fuse multiply-adds that our C code rounds twice (the optimizer
# updates), BatchNorm's statistics are summed in another order, and
# log-softmax is computed another way. Each is a float32 rounding (relative
# 6e-8) per operation. Errors are measured as the largest difference over a
# tensor divided by a scale:
# - logits, loss, SGD parameters, buffers: the tensor's largest element. Through
#   three layers and five steps they stay below 1e-6 (printed below); the
#   tolerance is 1e-5.
# - gradients: the tensor's largest element, but at least 1% of the model's
#   largest gradient. With BatchNorm, the gradient of the Linear bias before it
#   is exactly 0 in theory (BatchNorm subtracts the batch mean), so both sides
#   hold rounding noise of 1e-8 that no relative test can compare: 2e-5 of the
#   floor (3e-7 without BatchNorm). Tolerance 1e-4.
# - Adam's parameters: in units of lr x steps, the most Adam can move an
#   element. Adam divides by sqrt(v), so its first update is lr x sign(g) for
#   every element: an element whose gradient is near rounding level (the
#   BatchNorm-fed bias again, or a dW entry where the batch's terms cancel)
#   moves by a direction decided by rounding, in torch as here. So: at most
#   0.1% of the elements may differ by more than 1e-3 of lr x steps (measured:
#   0.02%), and none by more than 25% (measured: up to 7%, with BatchNorm).
#   BatchNorm's running mean follows that bias: buffers to 1e-3 (measured
#   2e-4). A wrong rule (a missing bias correction, eps inside the root) moves
#   every update by far more.
TOLERANCE = {"logits": 1e-5, "loss": 1e-5, "grad": 1e-4, "param": 1e-5, "buffer": 1e-5}
ADAM_TOLERANCE = {"param": 0.25, "param_share": 1e-3, "buffer": 1e-3}


def read_safetensors(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=DTYPES[info["dtype"]]) if e > b \
            else torch.empty(0, dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"])
    return tensors, meta


def write_safetensors(path, tensors, meta):
    header, blobs, offset = {"__metadata__": meta}, [], 0
    inverse = {v: k for k, v in DTYPES.items()}
    for name, t in tensors.items():
        # through an integer view of the element's width: numpy has no bfloat16
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        blob = t.detach().contiguous().view(width).numpy().tobytes()
        header[name] = {"dtype": inverse[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class MLP(torch.nn.Module):
    """fc1, [bn1], fc2, ...: the C model's names and order."""

    def __init__(self, sizes, batchnorm):
        super().__init__()
        self.nlayers = len(sizes) - 1
        self.bn = batchnorm
        for i in range(self.nlayers):
            setattr(self, f"fc{i + 1}", torch.nn.Linear(sizes[i], sizes[i + 1]))
            if batchnorm and i < self.nlayers - 1:
                setattr(self, f"bn{i + 1}", torch.nn.BatchNorm1d(sizes[i + 1]))

    def forward(self, x):
        for i in range(1, self.nlayers + 1):
            x = getattr(self, f"fc{i}")(x)
            if i < self.nlayers:
                if self.bn:
                    x = getattr(self, f"bn{i}")(x)
                x = torch.relu(x)
        return x


results = []


def verdict(name, ok, why=""):
    results.append(ok)
    print(f"PASS ddp_torch.{name}" if ok else f"FAIL ddp_torch.{name}: {why}")


def rel_error(ours, theirs, floor=0.0):
    scale = max(theirs.abs().max().item(), floor)
    return (ours.double() - theirs.double()).abs().max().item() / (scale if scale > 0 else 1.0)


def check_case(path, outdir):
    t, meta = read_safetensors(path)
    case = path.stem[len("case_"):]
    sizes = [784] + [int(h) for h in meta["hidden"].split(",")] + [10]
    torch.manual_seed(int(meta["seed"]))
    model = MLP(sizes, meta["batchnorm"] == "1")
    named = dict(model.named_parameters())
    same_init = all(torch.equal(p.detach(), t["init." + n]) for n, p in named.items())
    verdict(f"{case}.init_bit_for_bit", same_init, "torch.manual_seed gives other initial parameters than ours")
    lr, mom, wd = float(meta["lr"]), float(meta["momentum"]), float(meta["weight_decay"])
    if meta["optimizer"] == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=mom, weight_decay=wd,
                              nesterov=meta["nesterov"] == "1")
    x, y = t["x"], t["y"]
    worst = {k: 0.0 for k in TOLERANCE}
    model.train()
    for step in range(x.shape[0]):
        opt.zero_grad()
        out = model(x[step].float().div(255))
        loss = torch.nn.functional.cross_entropy(out, y[step])
        loss.backward()
        if step == 0:
            worst["logits"] = rel_error(t["logits0"], out.detach())
            floor = 1e-2 * max(p.grad.abs().max().item() for p in named.values())
            worst["grad"] = max(rel_error(t["grad0." + n], p.grad, floor) for n, p in named.items())
        worst["loss"] = max(worst["loss"], abs(t["loss"][step].item() - loss.item()) / abs(loss.item()))
        opt.step()
    adam = meta["optimizer"] == "adam"
    if adam:  # in units of the most Adam can move an element
        moved = torch.cat([(t["final." + n].double() - p.detach().double()).abs().flatten() / (lr * x.shape[0])
                           for n, p in named.items()])
        worst["param"] = moved.max().item()
        worst["param_share"] = (moved > 1e-3).double().mean().item()
    else:
        worst["param"] = max(rel_error(t["final." + n], p.detach()) for n, p in named.items())
    buffers = {n: b for n, b in model.named_buffers() if b.dtype == torch.float32}
    worst["buffer"] = max([rel_error(t["final." + n], b) for n, b in buffers.items()] or [0.0])
    for what, err in worst.items():
        tol = ADAM_TOLERANCE[what] if adam and what in ADAM_TOLERANCE else TOLERANCE[what]
        unit = {"param": "of lr x steps", "param_share": "(share of elements off by 1e-3 of lr x steps)"}.get(
            what, "of the scale") if adam else "of the scale"
        verdict(f"{case}.{what}", err <= tol, f"largest error {err:.3g} {unit}, tolerance {tol:g}")
    print(f"  {case}: largest relative errors " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
    # the file --save writes loads into torch as a state_dict, strictly
    saved, _ = read_safetensors(outdir / f"model_{case}.safetensors")
    fresh = MLP(sizes, meta["batchnorm"] == "1")
    try:
        fresh.load_state_dict(saved, strict=True)
        same = all(torch.equal(v, t["final." + n]) for n, v in fresh.state_dict().items() if "final." + n in t)
        verdict(f"{case}.saved_model_loads", same, "load_state_dict gave other values than the case's final ones")
    except RuntimeError as e:
        verdict(f"{case}.saved_model_loads", False, f"load_state_dict refused it: {e}")


def write_torch_file(path):
    """A small BatchNorm model trained two steps by torch, with each tensor's
    sum in the metadata, for build/tests/unit/test_torch_cases torch_file_loads."""
    torch.manual_seed(11)
    model = MLP([20, 9, 6, 4], True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(torch.rand(8, 20)), torch.randint(0, 4, (8,))).backward()
        opt.step()
    state = model.state_dict()
    meta = {"format": "pt", "model": "20-9-6-4 with BatchNorm1d"}
    for n, v in state.items():
        if v.dtype == torch.float32:
            meta["sum." + n] = repr(math.fsum(v.double().flatten().tolist()))
    meta["num_batches_tracked"] = str(int(state["bn1.num_batches_tracked"]))
    write_safetensors(path, dict(state), meta)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fixture":
        write_torch_file(sys.argv[2])
        return 0
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    outdir = Path(sys.argv[1])
    cases = sorted(outdir.glob("case_*.safetensors"))
    if not cases:
        print(f"FAIL ddp_torch.cases: no case_*.safetensors in {outdir}")
        return 1
    for path in cases:
        check_case(path, outdir)
    write_torch_file(outdir / "torch_written.safetensors")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
