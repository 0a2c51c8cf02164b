# sampler_torch.py: the expected side of tests/crosscheck/sampler_torch.sh. Writes, for
# many configurations, what torch.utils.data.DistributedSampler hands every
# rank, one file per (configuration, rank), and a manifest the shell test
# replays against `build/chapter-2 --print-indices`. One process, so torch is
# imported once. Usage: /usr/bin/python3 tests/crosscheck/sampler_torch.py OUTDIR
import os
import random
import sys

from torch.utils.data import DistributedSampler

out = sys.argv[1]
rnd = random.Random(20261121)  # fixed: the same configurations every run
seeds = [0, 1, -1, 2**32 + 5, 2**63 - 1, -(2**63)]
configs = []
# The edges: n = 0, n < W, padding larger than n, W = 1.
for n, w in [(0, 1), (0, 3), (1, 1), (1, 16), (2, 5), (3, 16), (5, 16), (7, 3), (10, 3), (10, 4), (15, 16), (16, 16)]:
    for drop_last in (False, True):
        configs.append((n, w, rnd.choice(seeds), rnd.choice([0, 1, 5]), True, drop_last))
# Random sizes and worlds, every shuffle / drop_last combination.
for _ in range(40):
    n = rnd.choice([rnd.randrange(0, 50), rnd.randrange(50, 5000), rnd.randrange(5000, 100000)])
    configs.append((n, rnd.randrange(1, 17), rnd.choice(seeds + [rnd.randrange(2**32)]),
                    rnd.choice([0, 1, 2, 7, 123]), rnd.random() < 0.8, rnd.random() < 0.5))
# Near a million, every rank.
configs += [(999_983, 16, 2**32 + 5, 3, True, False), (1_000_000, 7, -1, 1, True, True),
            (1_000_003, 8, 0, 0, False, False)]

with open(os.path.join(out, "manifest"), "w") as manifest:
    for case, (n, w, seed, epoch, shuffle, drop_last) in enumerate(configs):
        for rank in range(w):
            s = DistributedSampler(range(n), num_replicas=w, rank=rank, shuffle=shuffle, seed=seed,
                                   drop_last=drop_last)
            s.set_epoch(epoch)
            name = f"c{case}r{rank}"
            with open(os.path.join(out, name), "w") as f:
                f.write("".join(f"{i}\n" for i in s))
            manifest.write(f"{name} {case} {n} {w} {rank} {seed} {epoch} {int(shuffle)} {int(drop_last)}\n")
