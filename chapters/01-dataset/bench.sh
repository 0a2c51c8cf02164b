#!/usr/bin/env bash
# bench.sh: chapter 1's benchmarks, run by `make bench` (BUILD in the env).
# Every figure comes with its limit or peer measured in the same run, and the
# ratio: random reads from mmapped IDX against memcpy, and the JSONL index
# build against `wc -l` on the same file. The machine is printed first, since
# none of the numbers means anything without it.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
echo "== chapter 1 (dataset) benchmarks on ${model:-an unknown CPU}, $(nproc) cores, $(uname -sr)"
"$BUILD/chapter-1" --bench=all
