#!/usr/bin/env bash
# run_benches.sh: `make bench`. Runs every chapter's bench.sh (chapters/NN-name/,
# found by folder, so a new chapter's is picked up), one after another, and
# keeps what they printed, with the date, the machine and the commit first, in
# BUILD/bench/last-run.txt: `make report` turns its verdict lines into the
# report's table (and copies it into notebooks-out/bench/, which only the
# report writes). BUILD names the build; BENCH_QUICK=1 passes on (each bench
# shrinks to seconds: figures that mean nothing, for checking).
#
# A MISS is a finding: it still exits 0. A benchmark that fails to run (exit
# status not 0) is named at the end and the exit status is 1; its output so far
# is kept.
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
. tools/bench.sh
out_dir=$BUILD/bench
log=$out_dir/last-run.txt
mkdir -p "$out_dir" || exit 1
tmp=$(mktemp "$log.tmp-XXXXXX") || exit 1
trap 'rm -f "$tmp"' EXIT
trap 'exit 130' INT TERM

commit=$(git describe --always --dirty 2>/dev/null || echo "not a git checkout")
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(bench_machine)"
    echo "memory: $(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)"
    echo "commit: $commit"
    [ "${BENCH_QUICK:-0}" = 1 ] && echo "mode: BENCH_QUICK=1 (tiny sizes: the figures mean nothing)"
    echo
} | tee "$tmp"

failed=()
for script in chapters/[0-9][0-9]-*/bench.sh; do
    [ -x "$script" ] || continue
    BUILD=$BUILD "$script" | tee -a "$tmp"
    status=${PIPESTATUS[0]}
    if [ "$status" != 0 ]; then
        failed+=("$script (exit $status)")
        echo "FAILED TO RUN: $script exited $status" | tee -a "$tmp"
    fi
done

counts=$(awk '/^bench: / { n++; if (/\| PASS$/) p++; else if (/\| MISS$/) m++; else if (/\| not run: /) s++ }
    END { printf "%d verdicts: %d PASS, %d MISS, %d not run", n, p, m, s }' "$tmp")
{ echo; echo "summary: $counts"; } | tee -a "$tmp"
chmod 0644 "$tmp" # mktemp made it 0600: the log is for everyone to read
mv "$tmp" "$log"
echo "saved in $log (make report shows it)"
if [ ${#failed[@]} -gt 0 ]; then
    echo "make bench: these benchmarks failed to run: ${failed[*]}" >&2
    exit 1
fi
