# chapter3.sh: build/chapter-3 as a user drives it: --help, strict flags, a
# runtime error, --bench on synthetic data (its last line), a tiny experiment.
source tests/lib.sh
C3="$BUILD/chapter-3"

t_out help "--workers=LIST" "$C3" --help
t_fail unknown_flag 2 "unknown or incomplete option '--bogus'" "$C3" --bogus
t_fail bad_workers 2 "--workers: expected a non-negative integer, got 'two'" "$C3" --workers=two
t_fail bad_batch 2 "--batch: expected 1 to 1048576" "$C3" --bench --batch=0
t_fail bench_one_value 2 "--bench takes one --workers" "$C3" --bench --workers=1,2
t_fail stray_argument 2 "unexpected argument 'extra'" "$C3" extra
t_fail missing_data 1 "chapter-3: /nonexistent.idx" "$C3" --bench --data=/nonexistent.idx

t_run "$C3" --bench --data=synthetic --batch=64 --workers=2 --epochs=2
last=$(printf '%s\n' "$T_OUT" | tail -n 1)
if [ "$T_STATUS" = 0 ] && [[ $last == bench:*samples/s=*MB/s=*data-wait=* ]]; then t_pass bench_last_line
else t_failed bench_last_line "status $T_STATUS, last line: $last"; fi

t_out experiment_small "STARVING" "$C3" --data=synthetic --workers=0,2 --work-us=0,50 --batches=4 \
    --step-ms=2 --out="$T_TMP/out"
if [ -s "$T_TMP/out/loader_sweep.csv" ] && [ "$(wc -l < "$T_TMP/out/loader_sweep.csv")" = 5 ]; then t_pass experiment_csv
else t_failed experiment_csv "expected a header and 4 rows in $T_TMP/out/loader_sweep.csv"; fi
