#!/usr/bin/python3
"""init_torch: what a PyTorch user hands to --init, written by torch
(tests/crosscheck/init_torch.sh; Debian's python3-torch, 1.13).

    init_torch.py DIR    write into DIR:
        init_f16.safetensors   nn.Sequential(Linear, ReLU, Linear, ReLU, Linear)
                               20-9-6-4, .half()
        init_bf16.safetensors  nn.Sequential(Flatten, Linear, BatchNorm1d, ReLU, ...)
                               20-9-6-4, .to(torch.bfloat16): numbered from 1
        init_f64.safetensors   nn.Sequential(Linear, BatchNorm1d, ReLU, ...)
                               20-9-6-4, .double()
        init_expected.safetensors
                               each of those state_dicts' tensors as
                               torch's .to(torch.float32) converts them, named
                               "<variant>.<our name>" (f16.fc1.weight,
                               bf16.bn1.running_var, ...)
        ch6_f64.safetensors    the 784-9-6-10 nn.Sequential .double(), for
                               build/chapter-6 --hidden=9,6 --init
        conversions.safetensors
                               every float16 and every bfloat16 bit pattern,
                               and 2^18 float64 values (random bits; random
                               float32 values plus exactly half an ulp, the
                               ties; magnitudes from 2^-160 to 2^130), each
                               beside its .to(torch.float32)
    init_torch.py --fixture DIR
                         the init_* files only (the committed copies are
                         tests/crosscheck/init_*.safetensors)

build/tests/unit/test_checkpoint checkpoint_init_takes_torch_files loads each
variant with --init's loader and compares every element, bit for bit, with
torch's conversion; build/tests/unit/test_safetensors
safetensors_read_f32_equals_torch does the same over conversions. The first
elements of one weight per variant are set to the values where conversions
differ: float16 and bfloat16 subnormals, infinities, quiet and signaling
NaNs; float64 halfway cases that round to even, values past float32's range,
below half its smallest subnormal, exactly half of it, signaling NaNs.
"""
import sys
from pathlib import Path

import torch

from ddp_torch import write_safetensors  # the format in a few lines (no safetensors package here)


def sequential(sizes, batchnorm, flatten):
    """The MLP as a PyTorch user writes it, and its modules' names in ours: {module index: "fc1", ...}."""
    layers, ours = ([torch.nn.Flatten()] if flatten else []), {}
    for i in range(len(sizes) - 1):
        ours[len(layers)] = f"fc{i + 1}"
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            if batchnorm:
                ours[len(layers)] = f"bn{i + 1}"
                layers.append(torch.nn.BatchNorm1d(sizes[i + 1]))
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    with torch.no_grad():  # running statistics as training leaves them: not the defaults 0 and 1
        for m in model:
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.num_batches_tracked.fill_(7)
    return model, ours


def bits(values, dtype):
    """A tensor of `dtype` from raw bit patterns."""
    wide = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float64: torch.int64}[dtype]
    width = torch.iinfo(wide).bits
    signed = [v - (1 << width) if v >= 1 << (width - 1) else v for v in values]
    return torch.tensor(signed, dtype=wide).view(dtype)


SPECIAL = {
    # float16: the smallest subnormal, the largest, the largest finite, -0, inf, -inf, a quiet NaN,
    # signaling NaNs (torch quiets them, keeping the payload)
    torch.float16: bits([0x0001, 0x03ff, 0x7bff, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfd55], torch.float16),
    # bfloat16: a shift into float32, signaling NaNs kept as they are
    torch.bfloat16: bits([0x0001, 0x007f, 0x7f7f, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffa5], torch.bfloat16),
    # float64: 1 + 2^-24 and 1 + 3 x 2^-24 (halfway, to even: down, then up), FLT_MAX + half an ulp
    # (halfway, to infinity), past the range, 2^-150 (half the smallest subnormal: to zero) and
    # 3 x 2^-150 (halfway between two subnormals), below that, -0, a signaling NaN
    torch.float64: torch.cat([
        torch.tensor([1 + 2 ** -24, 1 + 3 * 2 ** -24, 3.4028235677973366e38, 1e39, -1e300, 2.0 ** -150,
                      3 * 2.0 ** -150, 1e-50, -0.0], dtype=torch.float64),
        bits([0x7ff0000000000001, 0xfff8000000000123], torch.float64)]),
}

VARIANTS = [  # name, dtype, BatchNorm1d, a leading Flatten
    ("f16", torch.float16, False, False),
    ("bf16", torch.bfloat16, True, True),
    ("f64", torch.float64, True, False),
]


def write_variants(outdir):
    expected = {}
    for name, dtype, batchnorm, flatten in VARIANTS:
        torch.manual_seed(5)
        model, ours = sequential([20, 9, 6, 4], batchnorm, flatten)
        model = model.to(dtype)
        first = min(ours)  # the first Linear
        with torch.no_grad():
            w = model[first].weight.view(-1)
            w[:len(SPECIAL[dtype])] = SPECIAL[dtype]
        state = model.state_dict()
        write_safetensors(outdir / f"init_{name}.safetensors", state,
                          {"format": "pt", "hidden": "9,6", "batchnorm": str(int(batchnorm))})
        for key, t in state.items():
            module, what = key.split(".", 1)
            expected[f"{name}.{ours[int(module)]}.{what}"] = t.to(torch.float32) if t.is_floating_point() else t
    write_safetensors(outdir / "init_expected.safetensors", expected, {"format": "pt"})


def write_conversions(path):
    every16 = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    f32 = torch.randint(-2 ** 31, 2 ** 31, (1 << 16,), dtype=torch.int32).view(torch.float32)
    f32 = f32[torch.isfinite(f32)]
    up = torch.nextafter(f32, torch.full_like(f32, float("inf")))
    ties = (f32.double() + up.double()) / 2  # exact: halfway between two neighbouring float32 values
    scale = torch.pow(2.0, torch.randint(-160, 131, (1 << 16,)).double())
    f64 = torch.cat([torch.randint(-2 ** 63, 2 ** 63 - 1, (1 << 17,), dtype=torch.int64).view(torch.float64),
                     ties[torch.isfinite(ties)], torch.rand(1 << 16, dtype=torch.float64) * scale])[:1 << 18]
    tensors = {}
    for name, t in (("f16", every16.view(torch.float16)), ("bf16", every16.view(torch.bfloat16)), ("f64", f64)):
        tensors[name] = t
        tensors[name + ".as_f32"] = t.to(torch.float32)
    write_safetensors(path, tensors, {"format": "pt"})


def main():
    fixture = len(sys.argv) == 3 and sys.argv[1] == "--fixture"
    if not fixture and (len(sys.argv) != 2 or sys.argv[1].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    outdir = Path(sys.argv[-1])
    outdir.mkdir(parents=True, exist_ok=True)
    write_variants(outdir)
    if not fixture:
        torch.manual_seed(7)
        write_conversions(outdir / "conversions.safetensors")
        torch.manual_seed(6)
        model, _ = sequential([784, 9, 6, 10], False, False)
        write_safetensors(outdir / "ch6_f64.safetensors", model.double().state_dict(), {"format": "pt"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
