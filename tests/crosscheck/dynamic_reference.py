# dynamic_reference.py: the expected side of tests/crosscheck/dynamic_reference.sh. An
# independent Python model of the token-budget batch sampler, written from
# its rules (chapters/02-sampler/README.md), not from lib/sampler/batch.c:
#   1. the order is torch.randperm(n) from a generator seeded with seed + epoch
#      (DistributedSampler's), or 0 .. n-1 without shuffle;
#   2. buffers of sort_size x W records of that order; in each, records longer
#      than max_token_length are skipped, the rest sorted by length (Python's
#      sort is stable, so ties keep the shuffled order);
#   3. a batch grows while longest x (count + 1) <= budget (count + 1 <= budget
#      for example batches) and count < max_samples; a buffer's last batch
#      closes with the buffer;
#   4. the list is padded to a multiple of W with batches picked by
#      random64() % (real batches) from an MT19937 seeded with seed + epoch
#      (random64: two 32-bit draws, the first as the high word);
#   5. batch g goes to rank g mod W as its step g / W; start_step drops steps.
# Writes one file per (configuration, rank), one batch per line, datasets as
# JSONL with a "len" field, and a manifest. Usage: /usr/bin/python3
# tests/crosscheck/dynamic_reference.py OUTDIR
import json
import os
import random
import sys

import torch


class MT19937:
    """The standard generator; seeded with the low 32 bits, as torch's CPU one."""

    def __init__(self, seed):
        self.mt = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            self.mt.append((1812433253 * (self.mt[-1] ^ (self.mt[-1] >> 30)) + i) & 0xFFFFFFFF)
        self.i = 624

    def random(self):
        if self.i == 624:
            for k in range(624):
                y = (self.mt[k] & 0x80000000) | (self.mt[(k + 1) % 624] & 0x7FFFFFFF)
                self.mt[k] = self.mt[(k + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            self.i = 0
        y = self.mt[self.i]
        self.i += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        return y ^ (y >> 18)

    def random64(self):
        hi = self.random()
        return (hi << 32) | self.random()


def batches(lengths, world, seed, epoch, sort_size, budget, max_samples, max_len, token, shuffle):
    n = len(lengths)
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        order = torch.randperm(n, generator=g).tolist()
    else:
        order = list(range(n))
    out = []
    for start in range(0, n, sort_size * world):
        kept = sorted((i for i in order[start:start + sort_size * world] if lengths[i] <= max_len),
                      key=lambda i: lengths[i])
        cur, longest = [], 0
        for i in kept:
            grown = max(longest, lengths[i])
            size = grown * (len(cur) + 1) if token else len(cur) + 1
            if cur and (size > budget or len(cur) >= max_samples):
                out.append(cur)
                cur, grown = [], lengths[i]
            cur.append(i)
            longest = grown
        if cur:
            out.append(cur)
    real = len(out)
    mt = MT19937(seed + epoch)
    while real and len(out) % world:
        out.append(out[mt.random64() % real])
    return out


outdir = sys.argv[1]
rnd = random.Random(20261121)  # the same configurations every run
with open(os.path.join(outdir, "manifest"), "w") as manifest:
    for case in range(40):
        n = rnd.choice([rnd.randrange(1, 30), rnd.randrange(30, 600), rnd.randrange(600, 5000)])
        lengths = [rnd.randrange(1, rnd.choice([20, 200, 1000])) for _ in range(n)]
        data = os.path.join(outdir, f"d{case}.jsonl")
        with open(data, "w") as f:
            f.writelines(json.dumps({"len": x, "text": "."}) + "\n" for x in lengths)
        world = rnd.randrange(1, 9)
        token = rnd.random() < 0.75
        budget = rnd.choice([max(lengths), 2 * max(lengths), 1000, 4096]) if token else rnd.randrange(1, 40)
        max_len = rnd.choice([budget, max(1, budget // 2)]) if token else rnd.choice([max(lengths), 100, 10])
        cfg = dict(seed=rnd.choice([0, 1, 7, 2**32 + 5, rnd.randrange(2**31)]), epoch=rnd.choice([0, 1, 3]),
                   sort=rnd.choice([1, 4, 100]), budget=budget, max_samples=rnd.choice([1, 3, 256]),
                   max_len=max_len, shuffle=rnd.random() < 0.85, start=rnd.choice([0, 0, 0, 1, 3]))
        got = batches(lengths, world, cfg["seed"], cfg["epoch"], cfg["sort"], budget, cfg["max_samples"],
                      max_len, token, cfg["shuffle"])
        for rank in range(world):
            name = f"c{case}r{rank}"
            with open(os.path.join(outdir, name), "w") as f:
                f.writelines(" ".join(map(str, b)) + "\n" for b in got[rank::world][cfg["start"]:])
            manifest.write(f"{name} {case} {data} {world} {rank} {cfg['seed']} {cfg['epoch']} {cfg['sort']} "
                           f"{budget} {cfg['max_samples']} {max_len} {'token' if token else 'example'} "
                           f"{int(cfg['shuffle'])} {cfg['start']}\n")
