#!/usr/bin/env bash
# bench.sh: chapter 5's benchmarks (run by `make bench`, BUILD in the environment).
#
# 1. Against the memory limit: the simulator's ring all-reduce of 64 MiB of
#    float32 on 4 ranks, against the time memcpy would need for the same memory
#    traffic, memcpy bandwidth measured in the same run. Target: within 2x.
# 2. Against Open MPI: chapters/05-allreduce/bench_mpi.sh, when present (the MPI
#    backend's own script: MPI_Allreduce with 4 processes, same size, same run).
# Both end with the verdict line of tools/bench.sh. BENCH_QUICK=1: 1 MiB.
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
