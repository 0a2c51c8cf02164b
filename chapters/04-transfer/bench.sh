#!/usr/bin/env bash
# bench.sh: chapter 4's benchmarks (run by `make bench`, BUILD in the environment).
#
# build/chapter-4 --bench prints one verdict line per benchmark:
#   simulator: the copy engines' rates against the model's own formula
#              (within 2 %), the double-buffered training step against
#              max(copy, compute) (within 10 %), the engines' CPU per copied
#              GiB against memcpy measured in the same run (within 2x);
#   GPU:       pinned H2D of 256 MiB against the PCIe limit the system reports
#              (85 %), the double-buffered step against max(copy, compute)
#              (within 10 %); "not run: no GPU" when there is none.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}

echo "== chapter 4: pinned transfer"
"$BUILD/chapter-4" --bench
