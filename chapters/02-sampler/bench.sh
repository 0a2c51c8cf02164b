#!/usr/bin/env bash
# bench.sh: chapter 2's benchmarks, run by `make bench` (BUILD names the build).
#
# 1. One rank's indices for one epoch, n = 10 million, W = 8: build/chapter-2
#    (PyTorch-exact mode) against torch.utils.data.DistributedSampler on this
#    machine in this run (`list(iter(sampler))`), best of 3 each; prints both
#    times and the ratio, and checks that the two lists are equal: DIFFERENT
#    lists are a correctness failure and exit 1 (a speed MISS does not).
# 2. n = 200 million (production scale): PyTorch-exact mode against the O(1)
#    Feistel mode, time and peak resident memory of one rank.
# CH2_BENCH_N and CH2_BENCH_LARGE_N change the sizes; BENCH_QUICK=1 makes
# them 100 thousand and 1 million (tools/bench.sh).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
. tools/bench.sh
ch2=$BUILD/chapter-2
if bench_quick; then n=${CH2_BENCH_N:-100000} large=${CH2_BENCH_LARGE_N:-1000000}
else n=${CH2_BENCH_N:-10000000} large=${CH2_BENCH_LARGE_N:-200000000}; fi
world=8
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ch2-bench-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== chapter 2 bench 1: one rank's epoch, n = $n, world $world, rank 0 ($(nproc) cores, $(uname -m))"
ours=$("$ch2" --bench --size="$n" --world="$world" --rank=0)
echo "$ours"
exact=$(awk '$1 == "pytorch-exact" { print $2 }' <<<"$ours")
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    torch_s=$(/usr/bin/python3 - "$n" "$world" "$tmp/torch.txt" <<'PY'
import resource, sys, time
import torch
from torch.utils.data import DistributedSampler
n, world, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sampler = DistributedSampler(range(n), num_replicas=world, rank=0, seed=0)
sampler.set_epoch(0)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
best = None
for _ in range(3):
    t = time.perf_counter()
    indices = list(iter(sampler))
    t = time.perf_counter() - t
    best = t if best is None else min(best, t)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with open(path, "w") as f:
    f.write("".join(f"{i}\n" for i in indices))
print(f"{best:.4f} {peak / 1024:.1f} {base / 1024:.1f} {torch.__version__}")
PY
)
    "$ch2" --print-indices --size="$n" --world="$world" --rank=0 > "$tmp/ours.txt"
    same=$(cmp -s "$tmp/ours.txt" "$tmp/torch.txt" && echo "identical" || echo "DIFFERENT")
    read -r tsec tpeak tbase tver <<<"$torch_s"
    printf '  %-14s %10s %16s %14s   (torch %s, list(iter(DistributedSampler)); %s MiB after import torch)\n' \
        "pytorch" "$tsec" "-" "$tpeak" "$tver" "$tbase"
    if [ "$same" != identical ]; then
        echo "chapter 2 bench: rank 0's indices differ from torch's DistributedSampler (n = $n, world $world)" >&2
        exit 1
    fi
    echo "  index lists identical"
    bench_verdict "one rank's epoch, n = $n, W = $world, PyTorch-exact mode" "$exact" s \
        "PyTorch $tver DistributedSampler, same indices" "$tsec" s peer/figure '>=10'
else
    bench_not_run "one rank's epoch, n = $n, W = $world, PyTorch-exact mode" "PyTorch DistributedSampler" '>=10' \
        "Debian's python3-torch is not installed for /usr/bin/python3"
fi

echo "== chapter 2 bench 2: one rank's epoch at scale, n = $large, world $world"
"$ch2" --bench --size="$large" --world="$world" --rank=0
