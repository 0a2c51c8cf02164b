#!/usr/bin/env bash
# bench_model.sh: one rank's training step on one thread against PyTorch, the
# CPU speed targets of chapter 6 (chapter 6's bench.sh runs it; it also runs
# alone). At batch 32, 64 and 256, build/bench/bench_model (our model,
# OpenBLAS) and bench_model.py (Debian's PyTorch 1.13 on the same OpenBLAS)
# train the same 784-256-128-10 MLP with SGD (momentum 0.9) on the same kind
# of batches, one thread each (OPENBLAS_NUM_THREADS=1 for both: torch's
# set_num_threads does not reach OpenBLAS), interleaved size by size, the best
# of 5 repetitions of 0.4 s each. Verdicts:
#   samples/s against PyTorch's: at least 1.3x at batch 32 and 64, 1.0x at 256;
#   the step time against its own time inside cblas_sgemm: at most 1.15x.
# Both sides use whatever kernels OpenBLAS picks for this CPU, printed first;
# OPENBLAS_CORETYPE=... in the environment reaches both. BUILD names the build.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BATCHES=${BATCHES:-32 64 256}
export OPENBLAS_NUM_THREADS=1
make -s BUILD="$BUILD" "$BUILD/bench/bench_model"
ours="$BUILD/bench/bench_model"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-model-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

field() { sed -n "s|.*[[:space:]]$1=\([0-9.]*\).*|\1|p"; } # KEY: the value of KEY=VALUE on stdin
# verdict WHAT FIGURE UNIT PEER PEER_FIGURE PEER_UNIT RATIO OP TARGET
verdict() {
    local ok
    ok=$(awk -v r="$7" -v t="$9" -v op="$8" 'BEGIN { print ((op == ">=" ? r >= t : r <= t) ? "PASS" : "MISS") }')
    printf 'bench: %s: %s %s | %s: %s %s | ratio %s | target %s %s | %s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "$ok"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
echo "== chapter 6 bench: one rank's training step, one thread, on ${model:-an unknown CPU} ($(nproc) cores)"
"$ours" --batch=32 --seconds=0.01 --repeats=1 | sed -n 's/^bench_model: blas /   OpenBLAS: /p'
have_torch=0
/usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1
for b in $BATCHES; do
    mine=$("$ours" --batch="$b")
    sps=$(field samples_per_s <<<"$mine")
    step=$(field step_us <<<"$mine")
    gemm=$(field gemm_us <<<"$mine")
    target=1.3
    [ "$b" -ge 256 ] && target=1.0
    if [ "$have_torch" = 1 ]; then
        theirs=$(/usr/bin/python3 chapters/06-ddp/bench_model.py --batch="$b" 2>"$tmp/torch.err") || {
            echo "bench_model.py failed: $(tail -n 3 "$tmp/torch.err")" >&2; exit 1; }
        tsps=$(field samples_per_s <<<"$theirs")
        verdict "training samples/s at batch $b" "$sps" "samples/s" "PyTorch 1.13, 1 thread" "$tsps" "samples/s" \
            "$(ratio "$sps" "$tsps")" ">=" "$target"
    else
        printf 'bench: training samples/s at batch %s: %s samples/s | PyTorch: not run: /usr/bin/python3 cannot import torch (apt-get install python3-torch)\n' "$b" "$sps"
    fi
    verdict "step time at batch $b" "$step" "us" "its own GEMM time" "$gemm" "us" "$(ratio "$step" "$gemm")" "<=" 1.15
done
