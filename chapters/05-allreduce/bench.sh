#!/usr/bin/env bash
# bench.sh: chapter 5's benchmarks (run by `make bench`, BUILD in the environment).
#
# 1. Against the memory limit: the simulator's ring all-reduce of 64 MiB of
#    float32 on 4 ranks, against the time memcpy would need for the same memory
#    traffic, memcpy bandwidth measured in the same run. Target: within 2x.
# 2. Against Open MPI: chapters/05-allreduce/bench_mpi.sh, when present (the MPI
#    backend's own script: MPI_Allreduce with 4 processes, same size, same run).
# 3. Against nccl-tests' published figure: the simulator's modelled busbw for a
#    ring all-reduce on 8 H100 SXM (--hw=h100-sxm, one node, NVLink through
#    NVSwitch) at 1 GiB, against 370 GB/s, the busbw NCCL's ring reaches there
#    (NCCL_ALGO=RING: 450 GB/s line rate less ~20 % protocol overhead), Sylvain
#    Jeaugey (NVIDIA), NVIDIA/nccl-tests#212, 2024-05-06. Target: within
#    10 % (two verdicts: ratio >= 0.9 and <= 1.1). 1 GiB needs 8 ranks x 3
#    buffers = 24 GiB; where that does not fit in 60 % of MemAvailable, the
#    largest power of two that does, and the line says so.
# 4. Hierarchical against the flat ring at 2x8 and 8x8 H100 SXM (modelled,
#    --hw=h100-sxm's NVLink and 8 NDR ports a node): the simulated run's speedup
#    (ring time / hier time) against the alpha-beta model's predicted one, at
#    256 MiB or the largest power of two whose W x 3 buffers fit (8x8 does not
#    fit 256 MiB in 24 GiB: 64 x 3 x 256 MiB = 48 GiB). The simulator's time is
#    the same cost model plus each collective's arrivals, so the ratio checks
#    that the run paid what the model says (no skew, no lost collective), not
#    the model itself. Target: ratio >= 0.95.
# All end with the verdict line of tools/bench.sh. BENCH_QUICK=1: 1 MiB.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
. tools/bench.sh
size=64M
bench_quick && size=1M

echo "== chapter 5: all-reduce against the memory limit"
"$BUILD/chapter-5" --backend=sim --world=4 --max-bytes=$size --memory-bound

# ---- against Open MPI: provided by the MPI backend's script ---------------------
if [ -x chapters/05-allreduce/bench_mpi.sh ]; then
    echo "== chapter 5: all-reduce against Open MPI"
    BUILD=$BUILD chapters/05-allreduce/bench_mpi.sh
fi

# ---- modelled figures: the simulator's clock on --hw=h100-sxm -----------------
# the largest power of two <= $2 bytes whose $1 ranks x 3 buffers fit in 60 % of MemAvailable
fit_size() {
    awk -v w="$1" -v want="$2" '/^MemAvailable:/ { avail = $2 * 1024 * 0.6 }
        END { s = want; while (s > 1048576 && w * 3 * s > avail) s /= 2; printf "%d\n", s }' /proc/meminfo
}
mib() { awk -v b="$1" 'BEGIN { printf "%g MiB", b / 1048576 }'; }
# the one data row of a --hw run: out-of-place time (us), busbw, model time (us), #wrong
modelled_row() { # topology algo bytes
    "$BUILD/chapter-5" --backend=sim --hw=h100-sxm --topology="$1" --algo="$2" --min-bytes="$3" --max-bytes="$3" \
        --iters=1 --warmup=0 | awk '!/^#/ && NF >= 15 { print $6, $8, $(NF-1), $9 + $13; exit }'
}

echo "== chapter 5: modelled busbw, 8 x H100 SXM ring, against nccl-tests' published figure"
want=$((1 << 30))
bench_quick && want=$((1 << 20))
size=$(fit_size 8 $want)
note=""
[ "$size" != "$want" ] && note=" ($(mib $want) x 3 buffers x 8 ranks does not fit in this machine's memory: $(mib "$size"))"
read -r t bw model wrong <<<"$(modelled_row 1x8 ring "$size")"
if [ -z "${wrong:-}" ] || [ "$wrong" != 0 ]; then echo "bench: chapter 5: the 1x8 run gave no row or wrong elements" >&2; exit 1; fi
echo "# $(mib "$size") on 1x8: modelled time $t us, busbw $bw GB/s$note"
what="chapter 5 modelled busbw, ring, 8x H100 SXM NVLink, $(mib "$size")$note"
peer="nccl-tests all_reduce_perf busbw, NCCL_ALGO=RING, 8x H100 (NVIDIA/nccl-tests#212)"
bench_verdict "$what" "$bw" GB/s "$peer" 370 GB/s figure/peer '>=0.9'
bench_verdict "$what" "$bw" GB/s "$peer" 370 GB/s figure/peer '<=1.1'

echo "== chapter 5: hierarchical against flat ring, modelled H100 SXM nodes (8 NDR ports each)"
for topo in 2x8 8x8; do
    nodes=${topo%x*} gpus=${topo#*x}
    want=$((256 << 20))
    bench_quick && want=$((1 << 20))
    size=$(fit_size $((nodes * gpus)) $want)
    note=""
    [ "$size" != "$want" ] && note=" ($(mib $want) does not fit here: $((nodes * gpus)) ranks x 3 buffers)"
    read -r tr _ mr wr <<<"$(modelled_row "$topo" ring "$size")"
    read -r th _ mh wh <<<"$(modelled_row "$topo" hier "$size")"
    if [ -z "${wr:-}" ] || [ -z "${wh:-}" ] || [ "$wr" != 0 ] || [ "$wh" != 0 ]; then
        echo "bench: chapter 5: the $topo runs gave no row or wrong elements" >&2; exit 1
    fi
    run=$(awk -v r="$tr" -v h="$th" 'BEGIN { printf "%.2f", r / h }')
    pred=$(awk -v r="$mr" -v h="$mh" 'BEGIN { printf "%.2f", r / h }')
    echo "# $topo, $(mib "$size"): simulated run ring $tr us, hier $th us (x$run); model ring $mr us, hier $mh us (x$pred)$note"
    bench_verdict "hier vs flat ring, $topo H100 SXM (modelled), $(mib "$size"): speedup of the simulated run$note" \
        "$run" x "the alpha-beta model's predicted speedup" "$pred" x figure/peer '>=0.95'
done
