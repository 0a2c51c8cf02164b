#!/usr/bin/env bash
# bench.sh: chapter 6's benchmarks (run by `make bench`, BUILD in the environment).
#
# 1. Accuracy (build/chapter-6 --bench=accuracy): the default recipe on 4
#    simulated ranks must reach a test accuracy of 0.89 (test error at most
#    the target's 11 %), and its curve at 1, 2 and 8 ranks, same global batch,
#    must stay within 0.5 points of the 4-rank one after every epoch.
# 2. DDP's overhead (--bench=overhead): the step time of 4 simulated ranks
#    with buckets overlapping backward, against the same 4 ranks training
#    alone on the same per-rank work: within 15 %.
# 3. Speed on the CPU (--bench=model): one rank, one thread, training
#    samples/s at batch 32, 64 and 256 against Debian's PyTorch 1.13 on the
#    same OpenBLAS (bench_model.py: same model, batch, SGD), interleaved size by
#    size, the best of 5 repetitions of 0.4 s each: at least 1.3x at 32 and 64,
#    1.0x at 256; and the step against its own time inside cblas_sgemm: within
#    15 % of it. OPENBLAS_NUM_THREADS=1 for both (torch's set_num_threads does
#    not reach OpenBLAS); OPENBLAS_CORETYPE=... in the environment reaches both.
# 4. On a GPU (bench_gpu.sh, which says how; "not run: no GPU" without one):
#    the model's step against PyTorch's on the same GPU at batch 32, 256 and
#    4096 (at least 1.0x), and the whole path (loader, pinned ring, copy,
#    model) against the model alone (within 5 %). The GPU's copies are
#    chapter 4's benchmarks. tools/gpu_reference.sh records a GPU's run under
#    notebooks-out/reference/.
# BENCH_QUICK=1: seconds, figures that mean nothing.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
. tools/bench.sh
export OPENBLAS_NUM_THREADS=1
P=$BUILD/chapter-6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-ch6-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$P" --bench=accuracy
"$P" --bench=overhead

field() { sed -n "s|.*[[:space:]]$1=\([0-9.]*\).*|\1|p"; } # KEY: the value of KEY=VALUE on stdin
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }'; }
batches="32 64 256" torch_flags=()
bench_quick && batches=64 torch_flags=(--seconds=0.02 --repeats=1)
echo "== chapter 6: one rank's training step, one thread, on $(bench_machine)"
have_torch=0
/usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1
for b in $batches; do
    mine=$("$P" --bench=model --batch="$b")
    [ "$b" = "${batches%% *}" ] && sed -n 's/^bench_model: blas /   OpenBLAS: /p' <<<"$mine"
    sps=$(field samples_per_s <<<"$mine")
    step=$(field step_us <<<"$mine")
    gemm=$(field gemm_us <<<"$mine")
    target=">=1.3"
    [ "$b" -ge 256 ] && target=">=1.0"
    if [ "$have_torch" = 1 ]; then
        theirs=$(/usr/bin/python3 chapters/06-ddp/bench_model.py --batch="$b" "${torch_flags[@]}" 2>"$tmp/torch.err") || {
            echo "bench_model.py failed: $(tail -n 3 "$tmp/torch.err")" >&2; exit 1; }
        tsps=$(field samples_per_s <<<"$theirs")
        bench_verdict "training samples/s at batch $b, 1 thread" "$sps" "samples/s" "PyTorch 1.13, 1 thread" \
            "$tsps" "samples/s" "$(ratio "$sps" "$tsps")" "$target"
    else
        bench_not_run "training samples/s at batch $b, 1 thread" "PyTorch, 1 thread" "$target" \
            "/usr/bin/python3 cannot import torch (apt-get install python3-torch)"
    fi
    bench_verdict "training step at batch $b" "$step" "us" "its own time inside cblas_sgemm" "$gemm" "us" \
        "$(ratio "$step" "$gemm")" "<=1.15"
done
chapters/06-ddp/bench_gpu.sh
