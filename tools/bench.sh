# bench.sh: what every chapter's benchmark script (chapters/NN-name/bench.sh)
# sources first. `make bench` runs those scripts through tools/run_benches.sh.
#
# A comparison ends with one verdict line, the same in every chapter (the
# format is lib/base/verdict.h's, printed by build/tools/verdict):
#
#   bench_verdict WHAT FIGURE UNIT PEER PEER_FIGURE PEER_UNIT RATIO TARGET
#       RATIO is a number, or figure/peer (rates: ours over theirs) or
#       peer/figure (times: theirs over ours); TARGET is ">=T" or "<=T".
#       bench: WHAT: FIGURE UNIT | PEER: PEER_FIGURE PEER_UNIT | ratio R | target >= T | PASS|MISS
#   bench_not_run WHAT PEER TARGET WHY
#       a comparison that cannot run here ("no GPU", "PyTorch is not installed"):
#       bench: WHAT | PEER | target >= T | not run: WHY
#
# A MISS is a finding, not a failure: both exit 0. A benchmark that cannot
# measure (a crash, a wrong result) exits non-zero instead.
#
#   bench_quick   true under BENCH_QUICK=1: the benchmark shrinks its sizes
#                 and repetitions to seconds. Its figures then mean nothing;
#                 the tests use it to check that every benchmark runs and
#                 prints well-formed verdicts (tests/programs/bench_verdicts.sh).
#   bench_machine one line naming the machine: CPU, cores, kernel, load.
#
# C benchmarks print the same line with verdict_print() (lib/base/verdict.h).
BUILD=${BUILD:-build}

bench_verdict() {
    if [ $# != 8 ]; then
        echo "bench_verdict: expected 8 arguments (what figure unit peer peer-figure peer-unit ratio target), got $#" >&2
        return 2
    fi
    "$BUILD/tools/verdict" --what="$1" --figure="$2" --unit="$3" --peer="$4" --peer-figure="$5" \
        --peer-unit="$6" --ratio="$7" --target="$8"
}

bench_not_run() {
    if [ $# != 4 ]; then
        echo "bench_not_run: expected 4 arguments (what peer target why), got $#" >&2
        return 2
    fi
    "$BUILD/tools/verdict" --what="$1" --peer="$2" --target="$3" --not-run="$4"
}

bench_quick() { [ "${BENCH_QUICK:-0}" = 1 ]; }

bench_machine() {
    local model
    model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
    echo "${model:-an unknown CPU}, $(nproc) cores, $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
}
