#!/usr/bin/python3
"""bench_model.py: PyTorch's side of chapter 6's training-step benchmark.

    bench_model.py [--batch=32,64,256] [--seconds=0.4] [--repeats=5] [--device=cpu|cuda]

The same step as build/chapter-6 --bench=model: the 784-256-128-10 MLP
(nn.Linear + ReLU, PyTorch's init), SGD lr 0.01 momentum 0.9, batches of
random bytes from a pool of 8192 samples turned into floats by .div(255),
cross_entropy, zero_grad, backward, step; one thread (torch.set_num_threads(1);
bench.sh also sets OPENBLAS_NUM_THREADS=1, which torch does not). Prints
"bench_model_torch: batch=B samples_per_s=X" per batch size, the best of the
repetitions, after the torch version. Runs with Debian's /usr/bin/python3.

--device=cuda: the same step on the GPU (bench_gpu.sh, with a python3 whose
torch has CUDA): the pool, the model and the optimizer live there, so a step
is the model's work alone, no copy; float32 as ours (TF32 off: PyTorch's
default for matrix products, said here so that a changed default cannot
flatter it). The clock is read after torch.cuda.synchronize(), so a
repetition counts the steps the GPU finished, not the ones queued.
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", default="32,64,256")
    ap.add_argument("--seconds", type=float, default=0.4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device=cuda: this torch sees no GPU")
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(1)
    torch.manual_seed(0)
    pool = torch.randint(0, 256, (8192, 784), dtype=torch.uint8).to(dev)
    labels = torch.randint(0, 10, (8192,)).to(dev)
    where = torch.cuda.get_device_name() if a.device == "cuda" else f"{torch.get_num_threads()} thread"
    print(f"bench_model_torch: torch {torch.__version__}, {where}")
    for batch in (int(b) for b in a.batch.split(",")):
        if batch > 8192:
            ap.error(f"--batch: {batch} is more than the pool's 8192 samples")
        model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                    torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        at, best = 0, 0.0
        for rep in range(-1, a.repeats):  # rep -1 warms up
            limit = 0.1 if rep < 0 else a.seconds
            sync()
            steps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < limit:
                if at + batch > 8192:
                    at = 0
                x = pool[at:at + batch].float().div(255)
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), labels[at:at + batch])
                loss.backward()
                opt.step()
                at += batch
                steps += 1
            sync()
            if rep >= 0:
                best = max(best, steps * batch / (time.perf_counter() - t0))
        print(f"bench_model_torch: batch={batch} samples_per_s={best:.0f}", flush=True)


if __name__ == "__main__":
    main()
