#!/usr/bin/python3
"""chapter6_torch: PyTorch's side of chapter 6's cross-checks
(tests/crosscheck/chapter6_torch.sh; Debian's python3-torch, 1.13).

    chapter6_torch.py init FILE SEED
        writes torch.manual_seed(SEED)'s 784-256-128-10 MLP as a model file:
        the initial parameters both sides train from (--init)
    chapter6_torch.py evaluate FILE CORRECT
        evaluates a model file build/chapter-6 --save wrote on the test set,
        in float64, and checks the CORRECT samples the program counted
    chapter6_torch.py steps INIT DIR WORLD BATCH LR MOMENTUM SEED
        DIR holds checkpoints of one build/chapter-6 run (SGD with momentum,
        WORLD ranks of BATCH), step-K.safetensors after K steps, INIT its
        initial parameters; for each K whose next checkpoint is there, one
        step from K's state on the union of the ranks' batches of step K
        (step_reference.py): the averaged gradient, the envelope it was
        allowed (bounded), and the update it made
    chapter6_torch.py power INIT DIR WORLD BATCH MOMENTUM SEED
        the same checkpoints, our gradient made wrong on purpose (a factor
        1 + 5e-4): the check must refuse it in every tensor, with the
        envelope as it is and widened
    chapter6_torch.py run INIT OURS WORLD BATCH STEPS LR SEED
        trains from INIT on the union of the ranks' batches for STEPS steps
        of plain SGD (no momentum), in float64, and compares the result with
        OURS, the parameters of build/chapter-6's WORLD-rank run
    Each prints PASS/FAIL lines and the errors it measured.

The data is what build/chapter-6 read: Fashion-MNIST from Debian's
dataset-fashion-mnist when installed, else the same synthetic records
(lib/dataset/dataset_synthetic.c, recomputed here: splitmix64).

Why the union: each rank's loss is the mean over its B samples, and DDP
averages the W ranks' gradients: (1/W) sum_r (1/B) sum_(i in r) g_i is the
gradient of the mean over all W x B samples, which is what one process
computes on the union.

Why step by step, and why a whole run only at a small learning rate: a ReLU
unit whose pre-activation is within rounding of 0 takes either side depending
on the order of the sums (OpenBLAS's kernels, the CPU, the ranks), the two
runs' gradients then differ by a percent in that unit's rows, and with SGD at
lr 0.05 and momentum 0.9 the runs part ways (1e-2 of a tensor's largest
element after 30 steps, measured) while both are right. step_reference.py
checks each step from our own state instead, with bounds that hold
whichever way each rounding fell. The whole run is compared where such a
flip stays small and is not carried on: plain SGD at lr 0.01
(RUN_TOLERANCE says how small).
"""
import gzip
import itertools
import struct
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ddp_torch import MLP, read_safetensors, write_safetensors  # noqa: E402
from step_reference import (EDGE_SIGMAS, GRAD_TOLERANCE, U, envelope_cover, envelope_refusals,  # noqa: E402
                            forward, gradient_errors, reference_step, reference_update, within)

FASHION = Path("/usr/share/datasets/fashion-mnist")
# The whole run (plain SGD, lr 0.01, 30 steps), against PyTorch in float64,
# relative to each tensor's largest element. Measured: 6e-7 (our float32
# rounding) on OpenBLAS's Haswell, Zen and Prescott kernels. A ReLU unit on
# its edge taken the other way at one step moves the run by up to 3e-4
# (measured in float64, flipping one at step 5): without momentum the change is
# not carried on, and at this rate it does not grow. 2e-3 allows several; an
# average that is a sum moves the run by 1e-1, one rank's gradient instead of
# the average by 7e-3 to 6e-2.
RUN_TOLERANCE = 2e-3
# power(): the check must refuse a gradient off by 5e-4 of itself (five times
# GRAD_TOLERANCE) with the envelope as it is and widened to 300 sigmas, over
# the run's first POWER_STEPS steps: there the widened envelope, were it not
# bounded, would hide it in fc1 at every step.
WRONG_AVERAGE = 5e-4
WIDE_SIGMAS = 300
POWER_STEPS = 7
M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class Synthetic:
    """dataset_synthetic.c's records of 784 bytes, labels 0..9."""

    def __init__(self, seed, n):
        self.seed, self.n = seed, n

    def __len__(self):
        return self.n

    def get(self, indices):
        rows, labels = [], []
        base = splitmix64((self.seed + 0x51ED270B27) & M64)
        for i in indices:
            state = base ^ i
            raw = b"".join(struct.pack("<Q", splitmix64((state + k) & M64)) for k in range(0, 784, 8))
            rows.append(raw[:784])
            labels.append(splitmix64(i ^ (~self.seed & M64)) % 10)
        x = torch.frombuffer(bytearray(b"".join(rows)), dtype=torch.uint8).reshape(len(rows), 784)
        return x, torch.tensor(labels, dtype=torch.int64)


class Idx:
    """A gzipped IDX images file and the labels beside it, whole in memory."""

    def __init__(self, images, labels):
        raw = gzip.open(images).read()
        n = struct.unpack(">I", raw[4:8])[0]
        self.x = torch.frombuffer(bytearray(raw[16:]), dtype=torch.uint8).reshape(n, 784)
        self.y = torch.frombuffer(bytearray(gzip.open(labels).read()[8:]), dtype=torch.uint8).to(torch.int64)

    def __len__(self):
        return len(self.y)

    def get(self, indices):
        idx = torch.tensor(indices, dtype=torch.int64)
        return self.x[idx], self.y[idx]


def dataset(split):
    if (FASHION / "train-images-idx3-ubyte.gz").exists():
        prefix = "train" if split == "train" else "t10k"
        return Idx(FASHION / f"{prefix}-images-idx3-ubyte.gz", FASHION / f"{prefix}-labels-idx1-ubyte.gz")
    # build/chapter-6's stand-ins: the training set with seed 0, the test set with seed 1
    return Synthetic(0, 60000) if split == "train" else Synthetic(1, 10000)


def load_model(path):
    tensors, _ = read_safetensors(path)
    model = MLP([784, 256, 128, 10], False)
    model.load_state_dict(tensors, strict=True)
    return model


def evaluate(path, ours):
    """Our count of right answers on the test set against PyTorch's, in
    float64: they may differ only in the samples whose two largest logits are
    closer than our float32 rounding can move them (EDGE_SIGMAS times their
    scale as sums of independent roundings, as for ReLU's edges:
    step_reference.py)."""
    torch.set_num_threads(1)
    state, _ = read_safetensors(path)
    data = dataset("test")
    correct = undecided = 0
    with torch.no_grad():
        for start in range(0, len(data), 1000):
            x, y = data.get(list(range(start, min(start + 1000, len(data)))))
            f = forward({n: t.double() for n, t in state.items()}, {}, x, y, train=False)
            top = f.logits.topk(2, 1)
            gap = top.values[:, 0] - top.values[:, 1]
            bound = EDGE_SIGMAS * f.logits_sigma.gather(1, top.indices).sum(1)
            # argmax keeps the first largest, as the C model counts
            correct += (f.logits.argmax(1) == y).sum().item()
            undecided += (gap <= bound).sum().item()
    ok = abs(ours - correct) <= undecided
    what = (f"we counted {ours} of {len(data)} right, torch (float64) {correct}; {undecided} samples undecided "
            "by rounding")
    print(f"PASS chapter6_torch.torch_evaluates_the_saved_model ({what})" if ok
          else f"FAIL chapter6_torch.torch_evaluates_the_saved_model: {what}")
    return not ok


def union_batches(n, world, batch, seed, steps):
    """Each step's union of the ranks' batches: DistributedSampler(shuffle,
    seed), epoch 0, padded to a multiple of world, strided split."""
    g = torch.Generator()
    g.manual_seed(seed)
    order = torch.randperm(n, generator=g).tolist()
    total = -(-n // world) * world
    order += order[: total - n]
    shares = [order[r:total:world] for r in range(world)]
    return [[i for r in range(world) for i in shares[r][s * batch:(s + 1) * batch]] for s in range(steps)]


def step_records(init, folder, world, batch, momentum, seed, edge_sigmas=EDGE_SIGMAS):
    """One step at a time along our run, from the checkpoints it left: for
    each K whose next checkpoint is there, (K, our state, PyTorch's step from
    it with the envelope of the units within edge_sigmas of their edge, our
    gradient, what deriving it cost, our optimizer state, our state after).
    Our gradient is not in a checkpoint: with momentum mu and dampening 0 our
    buffer went from M to M' = mu M + g (float32, two roundings), so g is M' -
    mu M, known to within u (|M'| + |mu M|), which the check allows on top."""
    torch.set_num_threads(1)
    saved = sorted(int(p.stem[len("step-"):]) for p in Path(folder).glob("step-*.safetensors"))
    todo = [k for k in [0] + saved if k + 1 in saved]
    data = dataset("train")
    batches = union_batches(len(data), world, batch, seed, max(todo) + 1)
    first, _ = read_safetensors(init)
    mu32 = torch.tensor(momentum, dtype=torch.float32).item()
    names = list(first)
    for k in todo:
        before = read_safetensors(Path(folder) / f"step-{k}.safetensors")[0] if k else first
        after = read_safetensors(Path(folder) / f"step-{k + 1}.safetensors")[0]
        x, y = data.get(batches[k])
        state = {n: before[n] for n in names}
        ref = reference_step(state, x, y, edge_sigmas=edge_sigmas)
        buf = {n: after[f"optimizer.{n}.momentum_buffer"].double() for n in names}
        if k == 0:  # the buffer starts as the first gradient
            grad, slack, opt_state = buf, None, {}
        else:
            old = {n: before[f"optimizer.{n}.momentum_buffer"].double() for n in names}
            grad = {n: buf[n] - mu32 * old[n] for n in names}
            slack = {n: U * (buf[n].abs() + (mu32 * old[n]).abs()) for n in names}
            opt_state = {n: {"momentum_buffer": old[n]} for n in names}
        yield k, state, ref, grad, slack, opt_state, after


def steps(init, folder, world, batch, lr, momentum, seed):
    """Each step of our run from its checkpoint (step_records): the averaged
    gradient, the envelope it was allowed (its bounds over the run:
    envelope_refusals), and the update it made. The update is checked on the
    parameters (the buffer after the step is where our gradient was read
    from, so it checks nothing more)."""
    hyper = {"lr": lr, "momentum": momentum, "dampening": 0.0, "nesterov": False, "weight_decay": 0.0}
    worst_grad = worst_update = 0.0
    edges, covers, bad_grad, bad_update = 0, {}, [], []
    for k, state, ref, grad, slack, opt_state, after in step_records(init, folder, world, batch, momentum, seed):
        errors = gradient_errors(grad, ref, slack)
        new, bounds = reference_update("sgd", hyper, state, grad, opt_state, k)
        update = max(within(after[n], new[n]["param"], bounds[n]["param"]) for n in grad)
        edges += len(ref.forward.edges)
        covers[k] = envelope_cover(ref, slack)
        if max(errors.values()) > GRAD_TOLERANCE:
            bad_grad.append(f"{k} ({', '.join(n for n, e in errors.items() if e > GRAD_TOLERANCE)})")
        if update > 1:
            bad_update.append(str(k))
        worst_grad, worst_update = max(worst_grad, max(errors.values())), max(worst_update, update)
    refused = envelope_refusals(covers)
    what = f"{len(covers)}_steps_from_our_states"
    if bad_grad:
        print(f"FAIL chapter6_torch.{what}.gradient: at steps {', '.join(bad_grad)}: largest difference "
              f"{worst_grad:.2e} of the tensor's largest element beyond the envelope of the ReLU units on their "
              f"edge, tolerance {GRAD_TOLERANCE:g}")
    for n, why in refused.items():
        print(f"FAIL chapter6_torch.{what}.envelope: {n}: the envelope of the ReLU units on their edge is too wide "
              f"to check it: {'; '.join(why.values())}")
    if bad_update:
        print(f"FAIL chapter6_torch.{what}.update: at steps {', '.join(bad_update)}: the parameters after the "
              f"step are up to {worst_update:.3g} times the float32 error bound away from torch.optim.SGD's "
              "step from the same state and gradient")
    if not bad_grad and not refused and not bad_update:
        print(f"PASS chapter6_torch.{what} (steps {', '.join(map(str, covers))})")
    share, at, name = max((c[n][0], k, n) for k, c in covers.items() for n in c)
    print(f"   (gradient: largest difference {worst_grad:.2e} of the tensor's largest element beyond the envelope "
          f"of {edges} ReLU units on their edge, which covers at most {100 * share:.0f}% of a tensor ({name} at "
          f"step {at}); update: {worst_update:.2f} of its float32 error bound)")
    return len(bad_grad) + len(refused) + len(bad_update)


def power(init, folder, world, batch, momentum, seed):
    """The gradient check's own test, on the same checkpoints: our gradient
    off by a factor 1 + WRONG_AVERAGE (an average whose divisor is off by
    that much) must be refused in every tensor, by the comparison or by the
    envelope's bounds, with the envelope of EDGE_SIGMAS and widened to
    WIDE_SIGMAS, where it swallows most of fc1: there each bound must refuse
    on its own every tensor the comparison let through."""
    failed = 0
    for sigmas in (EDGE_SIGMAS, WIDE_SIGMAS):
        caught, covers = set(), {}
        records = step_records(init, folder, world, batch, momentum, seed, sigmas)
        for k, _, ref, grad, slack, _, _ in itertools.islice(records, POWER_STEPS):
            errors = gradient_errors({n: g * (1 + WRONG_AVERAGE) for n, g in grad.items()}, ref, slack)
            caught |= {n for n, e in errors.items() if e > GRAD_TOLERANCE}
            covers[k] = envelope_cover(ref, slack)
        refused = envelope_refusals(covers)
        missed = [n for n in covers[k] if n not in caught and n not in refused]
        both = {"share", "hidden"}  # each bound must refuse on its own what the comparison let through
        one_bound = [n for n in covers[k] if n not in caught and n in refused and set(refused[n]) != both]
        what = f"chapter6_torch.wrong_average_refused_at_{sigmas:g}_sigmas"
        if missed:
            failed += 1
            print(f"FAIL {what}: our gradient off by a factor 1 + {WRONG_AVERAGE:g} passed for "
                  f"{', '.join(missed)} over {len(covers)} steps, the envelope of the units within {sigmas:g} "
                  "sigmas of their edge allowed")
        elif one_bound:
            failed += 1
            print(f"FAIL {what}: the comparison let our gradient off by a factor 1 + {WRONG_AVERAGE:g} through for "
                  f"{', '.join(one_bound)}, and only the {' and '.join(refused[one_bound[0]])} bound refused the "
                  f"envelope of {one_bound[0]}: each bound must refuse it on its own")
        else:
            print(f"PASS {what} (our gradient off by a factor 1 + {WRONG_AVERAGE:g}, over {len(covers)} steps: "
                  f"{len(caught)} tensors beyond the envelope, {len(refused)} with their envelope refused)")
    return failed


def run(init, ours, world, batch, steps_, lr, seed):
    """The whole run, plain SGD, in float64 (our float32 rounding is then all
    the difference)."""
    torch.set_num_threads(1)
    model = load_model(init).double()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    data = dataset("train")
    for indices in union_batches(len(data), world, batch, seed, steps_):
        x, y = data.get(indices)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x.double().div(255)), y).backward()
        opt.step()
    mine, _ = read_safetensors(ours)
    failed = 0
    for name, t in model.state_dict().items():
        err = (mine[name].double() - t).abs().max().item() / (t.abs().max().item() or 1.0)
        ok = err <= RUN_TOLERANCE
        failed += not ok
        what = (f"largest difference {err:.2e} of the tensor's largest element, tolerance {RUN_TOLERANCE:g}, "
                f"after {steps_} steps at lr {lr:g}")
        print(f"PASS chapter6_torch.run_of_{world}_ranks.{name} ({what})" if ok
              else f"FAIL chapter6_torch.run_of_{world}_ranks.{name}: {what}")
    return failed


def main():
    a = sys.argv
    cmd = a[1] if len(a) > 1 else ""
    if cmd == "init" and len(a) == 4:
        torch.manual_seed(int(a[3]))
        model = MLP([784, 256, 128, 10], False)
        write_safetensors(a[2], model.state_dict(), {"format": "pt"})
    elif cmd == "evaluate" and len(a) == 4:
        sys.exit(1 if evaluate(a[2], int(a[3])) else 0)
    elif cmd == "steps" and len(a) == 9:
        sys.exit(1 if steps(a[2], a[3], int(a[4]), int(a[5]), float(a[6]), float(a[7]), int(a[8])) else 0)
    elif cmd == "power" and len(a) == 8:
        sys.exit(1 if power(a[2], a[3], int(a[4]), int(a[5]), float(a[6]), int(a[7])) else 0)
    elif cmd == "run" and len(a) == 9:
        sys.exit(1 if run(a[2], a[3], int(a[4]), int(a[5]), int(a[6]), float(a[7]), int(a[8])) else 0)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
