# chapter3.sh: build/chapter-3 as a user drives it: --help, strict flags, a
# runtime error, --bench on synthetic data (its last line), a tiny experiment
# (its CSV consistent with itself), no training step, JSONL records.
. "$(dirname "$0")/../harness/lib.sh"
C3="$BUILD/chapter-3"

t_out help "--workers=LIST" "$C3" --help
t_fail unknown_flag 2 "unrecognized option '--bogus'" "$C3" --bogus
t_fail bad_workers 2 "--workers: expected a comma-separated list of 0 to 256, got 'two'" "$C3" --workers=two
t_fail bad_batch 2 "--batch: expected 1 to 1048576" "$C3" --bench --batch=0
t_fail bench_one_value 2 "--bench takes one --workers" "$C3" --bench --workers=1,2
t_fail stray_argument 2 "unexpected argument 'extra'" "$C3" extra
# the bench's verdict line written into a full disk is an error, not exit 0
t_fail bench_into_a_full_disk 1 "chapter-3: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$C3" --bench --data=synthetic --batch=64
# a flag the chosen run would ignore is refused, naming it
t_fail out_of_order_needs_bench 2 "--out-of-order does nothing without --bench" "$C3" --out-of-order
t_fail memcpy_needs_bench 2 "--memcpy does nothing without --bench" "$C3" --data=synthetic --memcpy
t_fail epochs_need_bench 2 "--epochs does nothing without --bench" "$C3" --epochs=3
t_fail plot_is_not_bench 2 "--plot does nothing with --bench" "$C3" --bench --plot
t_fail batches_are_not_bench 2 "--batches does nothing with --bench" "$C3" --bench --batches=3
t_fail batches_too_many 2 "--batches: expected 1 to 1073741824" "$C3" --batches=72057594037927936
t_fail missing_data 1 "chapter-3: --data: /nonexistent.idx" "$C3" --bench --data=/nonexistent.idx
# an IDX file with 0 images: refused by name, nothing to batch
printf '\x00\x00\x08\x03\x00\x00\x00\x00\x00\x00\x00\x1c\x00\x00\x00\x1c' > "$T_TMP/empty-images-idx3-ubyte"
T_TIMEOUT=30 t_fail empty_idx 1 "empty-images-idx3-ubyte: the dataset has 0 records" \
    "$C3" --bench --data="$T_TMP/empty-images-idx3-ubyte"
T_TIMEOUT=30 t_fail empty_idx_sweep 1 "the dataset has 0 records" "$C3" --data="$T_TMP/empty-images-idx3-ubyte"

t_run "$C3" --bench --data=synthetic --batch=64 --workers=2 --epochs=2
last=$(printf '%s\n' "$T_OUT" | tail -n 1)
if [ "$T_STATUS" = 0 ] && [[ $last == "loader bench: "*samples/s=*MB/s=*data-wait=* ]]; then t_pass bench_last_line
else t_failed bench_last_line "status $T_STATUS, last line: $last"; fi

t_out experiment_small "STARVING" "$C3" --data=synthetic --workers=0,2 --work-us=0,50 --batches=4 \
    --step-ms=2 --out="$T_TMP/out"
if [ -s "$T_TMP/out/loader_sweep.csv" ] && [ "$(wc -l < "$T_TMP/out/loader_sweep.csv")" = 5 ]; then t_pass experiment_csv
else t_failed experiment_csv "expected a header and 4 rows in $T_TMP/out/loader_sweep.csv"; fi
# Every row of the CSV agrees with itself: step = compute + wait, data-wait =
# wait / step, and the verdict is data-wait above 10 %.
bad=$(awk -F, 'NR > 1 { d = $6 - $9 - $10; f = $6 > 0 ? $10 / $6 - $7 : 0
    if (d < -0.001 || d > 0.001 || f < -0.001 || f > 0.001 || $12 != ($7 > 0.1)) print }' "$T_TMP/out/loader_sweep.csv")
if [ "$(head -n 1 "$T_TMP/out/loader_sweep.csv" | cut -d, -f6,9-12)" = "step_ms,compute_ms,wait_ms,nominal_step_ms,starving" ] &&
    [ -z "$bad" ]; then t_pass experiment_csv_consistent
else t_failed experiment_csv_consistent "header or rows disagree: $(head -n 1 "$T_TMP/out/loader_sweep.csv") $bad"; fi
t_out step_zero "no training step" "$C3" --data=synthetic --workers=0 --work-us=0 --batches=2 --step-ms=0 \
    --out="$T_TMP/out0"

# The indices come from chapter 2's DistributedSampler: rank R of W gets ceil(n / W) of them.
t_out sampler_share "15 steps of 1000 samples" "$C3" --data=synthetic --world=4 --rank=3 --batch=1000 --batches=100 \
    --workers=0 --work-us=0 --step-ms=0 --out="$T_TMP/outw"
t_fail rank_past_world 2 "--rank: 2 is not below --world=2" "$C3" --world=2 --rank=2
t_fail world_zero 2 "--world" "$C3" --world=0

# List flags: an empty value is a usage error, not skipped.
t_fail empty_list_value 2 "--work-us: expected a comma-separated list of 0 to 1000000, got '1,,2' (an empty value)" "$C3" --work-us=1,,2
t_fail trailing_comma 2 "--workers: expected a comma-separated list of 0 to 256, got '1,' (an empty value)" "$C3" --workers=1,

# Variable-length records (JSONL, as --help offers) batch with the padding collate.
for i in $(seq 1 40); do printf '{"text": "%*s"}\n' "$((i * 3))" x; done > "$T_TMP/small.jsonl"
t_out jsonl_experiment "-> 0 us/sample:" "$C3" --data="$T_TMP/small.jsonl" --workers=0,2 --work-us=0 --batches=3 \
    --batch=8 --step-ms=1 --out="$T_TMP/outj"
# One long record sizes every padded slot: the run says so, and --slot-bytes caps the slots; the
# batch that then needs more fails naming itself and the sample
for i in $(seq 0 199); do
    if [ "$i" = 77 ]; then printf '{"text": "%*s"}\n' 65536 x; else printf '{"text": "%*s"}\n' 20 x; fi
done > "$T_TMP/one-long.jsonl"
t_out padded_slots_are_said "slots sized for 64 records padded to the longest record (65548 bytes" \
    "$C3" --bench --data="$T_TMP/one-long.jsonl" --batch=64
t_fail slot_bytes_caps_and_names_the_batch 1 "sample 77" "$C3" --bench --data="$T_TMP/one-long.jsonl" --batch=64 \
    --slot-bytes=64K
# slots past the machine's memory: the remedy names the flag given, not the batch it overrides
t_fail slot_bytes_past_memory 1 "lower slot_bytes, workers or prefetch: loader: a ring of 2 slots of slot_bytes 1073741824000000" \
    "$C3" --bench --data=synthetic --slot-bytes=1000000G
t_fail slot_bytes_zero 2 "--slot-bytes: expected a size of 1 to 18446744073709551615 bytes" "$C3" --slot-bytes=0
t_run "$C3" --bench --data="$T_TMP/small.jsonl" --batch=8 --workers=2
last=$(printf '%s\n' "$T_OUT" | tail -n 1)
if [ "$T_STATUS" = 0 ] && [[ $last == "loader bench: data=jsonl:"*samples/s=*data-wait=* ]]; then t_pass jsonl_bench
else t_failed jsonl_bench "status $T_STATUS, last line: $last"; fi

# An --out no file can be written under is refused before the experiment prints any table.
t_fail experiment_error_no_table 2 "chapter-3: --out: /dev/null/out: /dev/null is a character device, not a directory" \
    "$C3" --data=synthetic --workers=0 --work-us=0 --batches=2 --out=/dev/null/out
if grep -q "steps of\|decode" <<<"$T_OUT"; then t_failed experiment_error_no_table_printed "printed: $T_OUT"
else t_pass experiment_error_no_table_printed; fi
# An --out whose name holds a quote and a command substitution is a name: the figure is drawn,
# nothing is run (the plot script counts the decode costs itself, no shell sees the path); one
# worker count alone draws without gnuplot's warning of an empty range.
if command -v gnuplot >/dev/null 2>&1; then
    odd="$T_TMP/x '\$(touch $T_TMP/ran)' y"
    t_run "$C3" --data=synthetic --workers=0,1 --work-us=0,10 --batches=2 --out="$odd"
    if [ "$T_STATUS" != 0 ] || [ ! -s "$odd/loader_sweep.png" ]; then t_failed plot_of_an_odd_name "$T_OUT"
    else t_pass plot_of_an_odd_name; fi
    if [ -e "$T_TMP/ran" ]; then t_failed plot_runs_no_name "the --out name was run by a shell"
    else t_pass plot_runs_no_name; fi
    t_run "$C3" --data=synthetic --workers=1 --work-us=0 --batches=2 --out="$T_TMP/one-worker"
    if [ "$T_STATUS" != 0 ] || grep -q "Warning" <<<"$T_OUT"; then t_failed plot_one_worker_quietly "$T_OUT"
    else t_pass plot_one_worker_quietly; fi
else
    t_skip plot_of_an_odd_name "gnuplot is not installed"
fi
# so is one where a plot file cannot be written (a directory in its place): before the sweep, no CSV left
mkdir -p "$T_TMP/svgdir/loader_sweep.svg"
t_fail experiment_plot_file_refused 2 "chapter-3: --out: $T_TMP/svgdir/loader_sweep.svg: a directory, not a regular file" \
    "$C3" --data=synthetic --workers=0 --work-us=0 --batches=2 --out="$T_TMP/svgdir"
if [ -e "$T_TMP/svgdir/loader_sweep.csv" ]; then t_failed experiment_plot_file_refused_no_csv "$(ls "$T_TMP/svgdir")"
else t_pass experiment_plot_file_refused_no_csv; fi
# --data in --out under the experiment's CSV name (a shard of it): it would be read, then replaced
mkdir "$T_TMP/same" && printf '\0\0\x08\x03\0\0\0\x01\0\0\0\x01\0\0\0\x01\x07' > "$T_TMP/same/loader_sweep.csv"
cp "$T_TMP/same/loader_sweep.csv" "$T_TMP/same.orig"
t_fail experiment_over_its_data 2 "which this run reads: it would be replaced" \
    "$C3" --data="$T_TMP/same.orig,$T_TMP/same/loader_sweep.csv" --workers=0 --work-us=0 --batches=2 --out="$T_TMP/same"
if cmp -s "$T_TMP/same/loader_sweep.csv" "$T_TMP/same.orig"; then t_pass experiment_over_its_data_left_alone
else t_failed experiment_over_its_data_left_alone "$(ls -l "$T_TMP/same")"; fi
