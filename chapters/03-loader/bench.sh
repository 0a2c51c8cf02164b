#!/usr/bin/env bash
# bench.sh: chapter 3's benchmarks (`make bench`), each against a named peer or limit.
#
# (a) build/chapter-3 --bench against PyTorch's DataLoader (torch_loader.py,
#     run by /usr/bin/python3 with Debian's python3-torch) on the same
#     Fashion-MNIST training images, batch 256, shuffled, workers 0 1 2 4, one
#     untimed warm-up epoch then 3 timed ones on both sides. Target: ours is at
#     least 10x PyTorch's samples/s at every worker count.
# (b) 64 KiB records (a generated raw IDX file of 1024 x 256x256 bytes), no
#     decode work: the loader's bytes/s against one thread's memcpy of as many
#     records of that size, in the same order, from a copy in memory into a
#     batch buffer, measured by the same binary in the same run. Best of 3
#     such pairs for each (this shared machine swings 2x between runs).
#     Target: at least 0.5 of memcpy.
# BUILD names the build directory (default build). BENCH_QUICK=1 (tools/bench.sh)
# runs seconds instead: Fashion-MNIST's 10000 test images, workers 0 and 2,
# one timed epoch, one trial.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
. tools/bench.sh
C3="$BUILD/chapter-3"
if bench_quick; then
    FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz}
    EPOCHS=${EPOCHS:-1} workers_a="0 2" workers_b="0 2" trials=1
else
    FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz}
    EPOCHS=${EPOCHS:-3} workers_a="0 1 2 4" workers_b="0 1 2" trials=3
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ch3-bench-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

field() { sed -n "s|.*[[:space:]]$1=\([0-9.]*\).*|\1|p"; } # KEY: the value of KEY=VALUE on stdin
millions() { awk -v x="$1" 'BEGIN { printf "%.6g", x / 1e6 }'; }

echo "== chapter 3 bench (a): loader vs PyTorch DataLoader ($(nproc) CPU cores)"
what_a() { echo "loader, Fashion-MNIST batches of 256, $1 worker(s)"; }
if [ ! -f "$FMNIST" ] || ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    why="/usr/bin/python3 cannot import torch (apt-get install python3-torch)"
    [ -f "$FMNIST" ] || why="$FMNIST is not installed (apt-get install dataset-fashion-mnist)"
    for k in $workers_a; do bench_not_run "$(what_a $k)" "PyTorch DataLoader, $k worker(s)" '>=10' "$why"; done
else
    echo "data: $FMNIST, batch 256, shuffled, 1 warm-up + $EPOCHS timed epochs"
    for k in $workers_a; do
        ours=$("$C3" --bench --data="$FMNIST" --batch=256 --workers=$k --warmup=1 --epochs="$EPOCHS" | tail -n 1 | field 'samples/s')
        torch=$(/usr/bin/python3 chapters/03-loader/torch_loader.py --data="$FMNIST" --batch=256 --workers=$k \
            --epochs="$EPOCHS" 2>"$tmp/torch.err" | field 'samples/s') || true
        if [ -z "$torch" ]; then
            echo "torch_loader.py failed with $k workers: $(tail -n 3 "$tmp/torch.err")" >&2
            exit 1
        fi
        bench_verdict "$(what_a $k)" "$(millions "$ours")" "M samples/s" "PyTorch DataLoader, $k worker(s)" \
            "$(millions "$torch")" "M samples/s" figure/peer '>=10'
    done
fi

echo
echo "== chapter 3 bench (b): 64 KiB records, no decode: loader bytes/s vs memcpy"
big="$tmp/big-images-idx3-ubyte"
# IDX header: magic 0x00000803 (unsigned bytes, 3 dims), then 1024 x 256 x 256, big-endian.
{ printf '\x00\x00\x08\x03\x00\x00\x04\x00\x00\x00\x01\x00\x00\x00\x01\x00'; head -c $((1024 * 65536)) /dev/urandom; } > "$big"
echo "data: 1024 records of 65536 bytes (64 MiB), batch 64, 1 warm-up + $EPOCHS timed epochs, best of $trials run(s)"
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 > b + 0 ? a : b) }'; }
for k in $workers_b; do
    ours=0 mem=0
    for ((trial = 1; trial <= trials; trial++)); do
        line=$("$C3" --bench --data="$big" --batch=64 --workers=$k --warmup=1 --epochs="$EPOCHS" --memcpy | tail -n 1)
        ours=$(best "$ours" "$(field 'MB/s' <<<"$line")")
        mem=$(best "$mem" "$(field 'memcpy-MB/s' <<<"$line")")
    done
    bench_verdict "loader, 64 KiB records, no decode, $k worker(s)" "$ours" MB/s \
        "memcpy of the same records, same run" "$mem" MB/s figure/peer '>=0.5'
done
