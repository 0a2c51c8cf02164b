# bench_verdicts: every chapter's benchmark runs (in its quick mode,
# BENCH_QUICK=1: seconds, figures that mean nothing) and prints its verdicts in
# the one shared format (lib/base/verdict.h): each line starting "bench: "
# must parse, and each benchmark must print at least one. Nothing here looks
# at a figure or at PASS or MISS: no timed assertions.
. "$(dirname "$0")/../harness/lib.sh"

verdict=$BUILD/tools/verdict
if [ "${SUITE:-plain}" != plain ]; then
    t_skip all "runs in the plain suite only (the benchmarks are not sanitizer tests)"
    exit 0
fi
if [ ! -x "$verdict" ]; then t_failed built "$verdict is missing"; exit 0; fi

for script in chapters/[0-9][0-9]-*/bench.sh; do
    [ -x "$script" ] || continue
    name=$(basename "$(dirname "$script")")
    t_run env BENCH_QUICK=1 BUILD="$BUILD" "$script"
    if [ "$T_STATUS" != 0 ]; then
        t_failed "$name" "BENCH_QUICK=1 $script exited $T_STATUS: $(tail -n 5 <<<"$T_OUT")"
        continue
    fi
    count=$(grep -c '^bench: ' <<<"$T_OUT" || true)
    if [ "$count" = 0 ]; then
        t_failed "$name" "$script printed no verdict line (bench: ... | PASS|MISS, or ... | not run: why)"
    elif ! check=$("$verdict" --check <<<"$T_OUT" 2>&1); then
        t_failed "$name" "$script: a verdict line does not parse: $check"
    else
        t_pass "$name"
    fi
done

# tools/bench.sh itself: a verdict through it parses; a malformed call is refused.
t_out bench_sh_prints_a_verdict "| ratio 2.00 | target >= 1.5 | PASS" \
    bash -c ". tools/bench.sh; bench_verdict 'ours' 2 s 'theirs' 4 s peer/figure '>=1.5'"
t_out bench_sh_prints_not_run "bench: ours | theirs | target <= 2 | not run: no GPU" \
    bash -c ". tools/bench.sh; bench_not_run 'ours' 'theirs' '<=2' 'no GPU'"
t_fail bench_sh_refuses_a_missing_argument 2 "expected 8 arguments" \
    bash -c ". tools/bench.sh; bench_verdict 'ours' 2 s 'theirs' 4 s '>=1.5'"
t_fail check_names_a_bad_line 1 "line 2" \
    bash -c "printf 'table\nbench: ours: 2 s | theirs: 4 s | ratio 2.00 | target >= 1.5 | yes\n' | $verdict --check"
