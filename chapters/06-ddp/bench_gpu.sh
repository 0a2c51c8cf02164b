#!/usr/bin/env bash
# bench_gpu.sh: chapter 6's benchmarks on a GPU, run by bench.sh (so by
# `make bench`) and by tools/gpu_reference.sh (BUILD in the environment).
# One verdict line per target; where this machine or build cannot measure,
# the same line says "not run" and why ("no GPU" first).
#
# 1. The training step against PyTorch on the same GPU: the same model and
#    step as bench.sh's item 3 (784-256-128-10, SGD lr 0.01 momentum 0.9,
#    batches from a pool of random bytes already on the GPU, so the model's
#    work alone), samples/s at batch 32, 256 and 4096: at least 1.0x. Ours:
#    build/chapter-6 --bench=model --device=cuda; PyTorch's:
#    bench_model.py --device=cuda, with a python3 whose torch sees the GPU
#    (tools/torch_python.sh), clocks read after torch.cuda.synchronize().
# 2. The whole path on the GPU against the model alone: a training run of
#    build/chapter-6 --device=cuda --backend=nccl --world=1 (sampler, loader
#    workers, pinned ring, copy stream, the same model and SGD, --test-data=none)
#    at batch 256, samples/s of its best epoch after the first (the first
#    pays for the GPU's start), against item 1's model alone at batch 256:
#    the data path may cost 5 % of the step (step times within 1.05x). Four
#    loader workers: one cannot make synthetic records (or copy Fashion-MNIST's)
#    as fast as the GPU trains on them (build/chapter-3 --bench says how fast).
# The GPU's copies are chapter 4's benchmarks (`make bench` runs them): pinned
# H2D against the PCIe limit the system reports, and the double-buffered step
# against max(copy, compute).
# BENCH_QUICK=1: seconds, figures that mean nothing.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
. tools/bench.sh
. tools/torch_python.sh
P=$BUILD/chapter-6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-ch6-gpu-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

field() { sed -n "s|.*[[:space:]]$1=\([0-9.]*\).*|\1|p"; } # KEY: the value of KEY=VALUE on stdin
why() { head -n 1 | tr '|' '/'; } # a program's message as a verdict's reason: one line, no '|'
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }'; }
batches="32 256 4096" torch_flags=() epochs=5
bench_quick && batches=256 torch_flags=(--seconds=0.02 --repeats=1) epochs=2
whole_batch=256
model_what() { echo "GPU training samples/s at batch $1, the model alone"; }
model_peer="PyTorch on the same GPU"
whole_what="GPU step of the whole path (loader, pinned ring, copy, model) at batch $whole_batch"
whole_peer="the model alone on the GPU"

# not_run WHY: every target's verdict, not run
not_run() {
    local b
    for b in $batches; do bench_not_run "$(model_what "$b")" "$model_peer" ">=1.0" "$1"; done
    bench_not_run "$whole_what" "$whole_peer" "<=1.05" "$1"
}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
if [ -z "$gpu" ]; then not_run "no GPU"; exit 0; fi
if ! grep -q 'HAVE_CUDA := 1' "$BUILD/config.mk" 2>/dev/null; then not_run "this build has no CUDA"; exit 0; fi
if ! "$P" --help 2>/dev/null | grep -q -- '--device='; then
    not_run "$P has no --device flag: the model has no GPU path in this build"
    exit 0
fi
echo "== chapter 6 on the GPU: $gpu"

# ours MODEL_OUT BATCH: the model alone on the GPU (--bench=model --device=cuda). 0 with
# its line in MODEL_OUT; 1, its reason in $tmp/why, when the chapter refuses (exit 2);
# a failed run ends the benchmark (it cannot measure)
ours() {
    local status=0
    "$P" --bench=model --device=cuda --batch="$2" > "$1" 2> "$tmp/err" || status=$?
    if [ $status = 2 ]; then
        echo "$P --bench=model --device=cuda refused: $(why < "$tmp/err")" > "$tmp/why"
        return 1
    elif [ $status != 0 ] || [ -z "$(field samples_per_s < "$1")" ]; then
        echo "$P --bench=model --device=cuda --batch=$2 failed (exit $status): $(tail -n 3 "$tmp/err")" >&2
        exit 1
    fi
}

# 1. the model alone against PyTorch's
py=$(torch_python --cuda || true)
declare -A model_sps
for b in $batches; do
    if [ -z "$py" ]; then
        bench_not_run "$(model_what "$b")" "$model_peer" ">=1.0" "no python3 here has a torch that sees the GPU"
        continue
    elif ! ours "$tmp/ours" "$b"; then
        bench_not_run "$(model_what "$b")" "$model_peer" ">=1.0" "$(cat "$tmp/why")"
        continue
    fi
    model_sps[$b]=$(field samples_per_s < "$tmp/ours")
    theirs=$("$py" chapters/06-ddp/bench_model.py --device=cuda --batch="$b" "${torch_flags[@]}" 2>"$tmp/torch.err") || {
        echo "bench_model.py --device=cuda failed: $(tail -n 3 "$tmp/torch.err")" >&2; exit 1; }
    tsps=$(field samples_per_s <<<"$theirs")
    bench_verdict "$(model_what "$b")" "${model_sps[$b]}" "samples/s" "$model_peer ($(sed -n \
        's/^bench_model_torch: torch \([^,]*\),.*/torch \1/p' <<<"$theirs"))" "$tsps" "samples/s" \
        "$(ratio "${model_sps[$b]}" "$tsps")" ">=1.0"
done

# 2. the whole path against the model alone, same batch and step
if [ -z "${model_sps[$whole_batch]:-}" ]; then
    ours "$tmp/ours" "$whole_batch" || { bench_not_run "$whole_what" "$whole_peer" "<=1.05" "$(cat "$tmp/why")"; exit 0; }
    model_sps[$whole_batch]=$(field samples_per_s < "$tmp/ours")
fi
size=()
bench_quick && size=(--train-size=$((whole_batch * 10)))
status=0
"$P" --device=cuda --backend=nccl --world=1 --data=synthetic --test-data=none --batch=$whole_batch --drop-last \
    "${size[@]}" --epochs=$epochs --workers=4 --optimizer=sgd --lr=0.01 --momentum=0.9 --schedule=constant \
    --out="$tmp/run" > "$tmp/run.log" 2>&1 || status=$?
if [ $status = 2 ]; then
    bench_not_run "$whole_what" "$whole_peer" "<=1.05" \
        "$P --device=cuda --backend=nccl refused: $(grep "^chapter-6: " "$tmp/run.log" | why)"
    exit 0
elif [ $status != 0 ]; then
    echo "the whole path's training run failed (exit $status): $(tail -n 3 "$tmp/run.log")" >&2
    exit 1
fi
whole_sps=$(awk -F, 'FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    FNR > 2 && $col["samples_per_s"] > best { best = $col["samples_per_s"] } END { print best + 0 }' "$tmp/run/epochs.csv")
if [ "$whole_sps" = 0 ]; then
    echo "the whole path's training run left no epoch after the first in $tmp/run/epochs.csv" >&2
    exit 1
fi
step_us() { awk -v b=$whole_batch -v s="$1" 'BEGIN { printf "%.1f", (s > 0 ? 1e6 * b / s : 0) }'; }
bench_verdict "$whole_what" "$(step_us "$whole_sps")" "us" "$whole_peer" "$(step_us "${model_sps[$whole_batch]}")" "us" \
    "$(ratio "${model_sps[$whole_batch]}" "$whole_sps")" "<=1.05"
