"""torch_loader: the PyTorch side of chapter 3's benchmark (bench.sh).

Loads Fashion-MNIST's training images the way a PyTorch user would: the IDX
gz files read with gzip + numpy into uint8 tensors, a TensorDataset returning
(image, label), and torch.utils.data.DataLoader with the given batch size and
num_workers (prefetch_factor=2, persistent workers, shuffle=True). One epoch
is run untimed first (worker start-up, page cache), then --epochs are timed.
Prints one line: "torch: workers=K batch=B epochs=E samples/s=X".

Run it with /usr/bin/python3 (Debian's python3-torch).
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def read_idx(path):
    """An IDX file (plain or .gz) as a numpy array: magic 0x00000 8 NDIMS, big-endian dims, bytes."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    ndims = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndims, offset=4)
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndims).reshape(tuple(int(d) for d in dims))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the images IDX file; labels are found beside it")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()

    images = torch.from_numpy(read_idx(a.data).copy())
    labels_path = os.path.join(os.path.dirname(a.data),
                               os.path.basename(a.data).replace("images-idx3", "labels-idx1"))
    labels = torch.from_numpy(read_idx(labels_path).astype(np.int64))
    ds = TensorDataset(images, labels)
    extra = {"prefetch_factor": 2, "persistent_workers": True} if a.workers > 0 else {}
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        generator=torch.Generator().manual_seed(0), **extra)

    def epoch():
        n = 0
        for x, y in loader:
            n += x.shape[0]
        return n

    epoch()  # warm-up: workers start, pages fault in
    t0 = time.perf_counter()
    samples = sum(epoch() for _ in range(a.epochs))
    dt = time.perf_counter() - t0
    print(f"torch: workers={a.workers} batch={a.batch} epochs={a.epochs} samples/s={samples / dt:.0f}")


if __name__ == "__main__":
    main()
