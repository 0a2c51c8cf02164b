#!/usr/bin/env bash
# bench.sh: chapter 1's benchmarks, run by `make bench` (BUILD in the env).
# Every figure comes with its limit or peer measured in the same run, and the
# ratio: random reads from mmapped IDX against memcpy, and the JSONL index
# build against `wc -l` on the same file. The machine is printed first, since
# none of the numbers means anything without it.
# Each ends with the verdict line of tools/bench.sh. BENCH_QUICK=1: a JSONL
# file of 100 thousand lines instead of 4 million.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
. tools/bench.sh
echo "== chapter 1 (dataset) benchmarks on $(bench_machine)"
if bench_quick; then "$BUILD/chapter-1" --bench=all --lines=100000
else "$BUILD/chapter-1" --bench=all; fi
