#!/usr/bin/python3
"""ddp_torch: PyTorch's side of the model/optimizer equivalence check
(tests/crosscheck/ddp_torch.sh; Debian's python3-torch, 1.13).

    ddp_torch.py DIR          check every DIR/case_*.safetensors that
                              build/tests/unit/test_torch_cases wrote, then write
                              DIR/torch_written.safetensors for the C side to load
    ddp_torch.py --fixture F  write that torch file to F (the committed copy is
                              tests/crosscheck/torch_written.safetensors)

A case holds our initial parameters, the batches, and our whole run: the state
before every step (parameters, BatchNorm's buffers, the optimizer's state),
every step's logits, loss and gradient, and the final state. Here
torch.manual_seed(seed) must give the same initial parameters bit for bit
(on a CPU where torch runs its AVX2 kernels: see init_bits), and then every
step is checked from the state our run reached, against PyTorch computing
that step in float64 (tests/crosscheck/step_reference.py: why, and the bounds
each quantity must lie within). The model file our checkpoint_save_model
wrote must load with load_state_dict(strict=True). Prints "PASS
ddp_torch.NAME" or "FAIL ddp_torch.NAME: why" per check, with the largest
error measured.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_reference import GRAD_TOLERANCE, gradient_errors, reference_step, reference_update, within  # noqa: E402

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "U8": torch.uint8}


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


def init_bits(ours, theirs):
    """torch's Tensor.uniform_(-b, b) computes x * (to - from) + from in
    float32; its AVX2 and AVX-512 kernels fuse that into one multiply-add, its
    default kernel (a CPU without AVX2, or ATEN_CPU_CAPABILITY=default) rounds
    the product first, and half the values then differ. Ours fuses
    (model_init): bit for bit where torch fuses. Else the product (below 2b)
    is off by half a unit in the last place of 2b, the sum by half of its own:
    within one unit in the last place of 2b (measured: one of b, 3.7e-9).
    Returns (same, why not)."""
    if "NO AVX" not in torch.__config__.show():
        return torch.equal(ours, theirs), "torch.manual_seed gives other initial parameters than ours"
    two_b = 2 * theirs.abs().max()
    ulp = torch.nextafter(two_b, torch.tensor(float("inf"))) - two_b
    return bool(((ours - theirs).abs() <= ulp).all()), \
        "torch.manual_seed's initial parameters (its kernel without AVX2) differ from ours by more than its rounding"


def check_case(path, outdir):
    t, meta = read_safetensors(path)
    case = path.stem[len("case_"):]
    sizes = [784] + [int(h) for h in meta["hidden"].split(",")] + [10]
    torch.manual_seed(int(meta["seed"]))
    model = MLP(sizes, meta["batchnorm"] == "1")
    named = dict(model.named_parameters())
    same = [init_bits(t["step0.param." + n], p.detach()) for n, p in named.items()]
    verdict(f"{case}.init_bit_for_bit", all(ok for ok, _ in same), next((why for ok, why in same if not ok), ""))
    kind = meta["optimizer"]
    hyper = {"lr": float(meta["lr"]), "momentum": float(meta["momentum"]), "dampening": 0.0,
             "nesterov": meta["nesterov"] == "1", "weight_decay": float(meta["weight_decay"]),
             "betas": (0.9, 0.999), "eps": 1e-8}
    states = ("exp_avg", "exp_avg_sq") if kind == "adam" else ("momentum_buffer",) if hyper["momentum"] else ()
    buffers = [n for n, b in model.named_buffers() if b.dtype == torch.float32]
    x, y = t["x"], t["y"]
    # worst[what]: the largest error over its bound (<= 1 passes), or for the gradient, its relative excess
    worst = {"logits": 0.0, "loss": 0.0, "grad": 0.0, "update": 0.0, "buffers": 0.0}
    taken, off_edge = 0, []
    for k in range(x.shape[0]):
        state = {n: t[f"step{k}.param.{n}"] for n in named}
        state.update({n: t[f"step{k}.buffer.{n}"] for n in buffers})
        masks = {i: t[f"step{k}.relu{i}"].bool() for i in range(1, len(sizes) - 1)}
        ref = reference_step(state, x[k], y[k], masks)
        f = ref.forward
        taken += sum(int((masks[i] != (z > 0)).sum()) for i, z in f.preactivations.items())
        off_edge += f.off_edge
        worst["logits"] = max(worst["logits"], within(t[f"step{k}.logits"], f.logits.detach(), f.logits_bound))
        worst["loss"] = max(worst["loss"], abs(t["loss"][k].item() - f.loss.item()) / f.loss_bound)
        ours = {n: t[f"step{k}.grad.{n}"] for n in named}
        worst["grad"] = max([worst["grad"]] + list(gradient_errors(ours, ref).values()))
        opt_state = {n: {s: t[f"step{k}.{s}.{n}"] for s in states} if k else {} for n in named}
        after, bounds = reference_update(kind, hyper, state, ours, opt_state, k)
        for n in named:
            for what, bound in bounds[n].items():
                mine = t[f"step{k + 1}.{what}.{n}"]
                worst["update"] = max(worst["update"], within(mine, after[n][what], bound))
        for n in buffers:
            worst["buffers"] = max(worst["buffers"], within(t[f"step{k + 1}.buffer.{n}"], f.buffers[n],
                                                            f.buffer_bounds[n]))
    verdict(f"{case}.relu_on_the_edge_only", not off_edge,
            f"our ReLU passed or cut {len(off_edge)} units (layer, sample, unit: {off_edge[:3]}) whose "
            "pre-activation is farther from 0 than float32 rounding can take it")
    for what, err in worst.items():
        limit = GRAD_TOLERANCE if what == "grad" else 1.0
        unit = ("of the tensor's scale" if what == "grad"
                else "of the float32 error bound")
        verdict(f"{case}.{what}", err <= limit, f"largest error {err:.3g} {unit}, tolerance {limit:g}")
    print(f"  {case}: {x.shape[0]} steps, {taken} ReLU inputs on the other side of 0 than in float64 (within "
          "rounding of it); largest error over its bound: "
          + ", ".join(f"{k} {v:.2g}" for k, v in worst.items() if k != "grad")
          + f"; gradient {worst['grad']:.2g} of its scale")
    # the file --save writes loads into torch as a state_dict, strictly
    final = x.shape[0]
    saved, _ = read_safetensors(outdir / f"model_{case}.safetensors")
    fresh = MLP(sizes, meta["batchnorm"] == "1")
    try:
        fresh.load_state_dict(saved, strict=True)
        same = all(torch.equal(v, t[f"step{final}.param.{n}" if n in named else f"step{final}.buffer.{n}"])
                   for n, v in fresh.state_dict().items() if v.dtype == torch.float32)
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
