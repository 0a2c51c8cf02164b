# chapter2.sh: build/chapter-2 as a user runs it: the default partition check
# passes for every sampler, the forgotten set_epoch() fails it with a warning,
# --help answers, and bad flags exit 2 with a message that names the flag.
. "$(dirname "$0")/../harness/lib.sh"
ch2="$BUILD/chapter-2"

t_out default_run_passes "PASS:" "$ch2"
t_out default_run_checks_the_dynamic_sampler_too "the token-budget batch sampler on 4 rank threads" "$ch2"
t_out feistel_passes "PASS:" "$ch2" --sampler=feistel --size=1001 --world=6 --drop-last
t_out dynamic_passes "PASS:" "$ch2" --sampler=dynamic --size=3000 --world=3 --epochs=2
t_out dynamic_example_batches_pass "PASS:" "$ch2" --sampler=dynamic --size=999 --world=5 --batch-type=example \
    --budget=8 --start-step=2
t_out drop_last_keeps_the_first_total "1000 distinct: the first 1000 of the order, 3 dropped" "$ch2" --size=1003 --world=4 \
    --drop-last --epochs=2
t_out padding_is_counted "the padding adds 2" "$ch2" --size=10 --world=4 --epochs=1
# an empty dataset passes both checks (under the asan suite, with no NULL handed to memcmp)
t_out empty_dataset_passes "PASS: 18 checks passed" "$ch2" --size=0
t_out no_shuffle_keeps_order "same order" "$ch2" --size=50 --world=3 --no-shuffle --epochs=2
t_fail forgotten_set_epoch_fails 1 "without set_epoch()" "$ch2" --size=100 --world=2 --no-set-epoch
t_out help "--print-indices" "$ch2" --help
t_out print_indices_golden "$(printf '1\n3\n8\n4')" "$ch2" --size=10 --world=3 --rank=1 --print-indices
t_out print_dynamic_batches " " "$ch2" --sampler=dynamic --size=100 --print-indices
t_out bench_small "feistel" "$ch2" --bench --size=100000 --world=8

t_fail bad_world 2 "--world" "$ch2" --world=0
t_fail bad_world_junk 2 "--world" "$ch2" --world=4x
t_fail bad_rank 2 "--rank" "$ch2" --world=2 --rank=2 --print-indices
t_fail bad_seed 2 "--seed" "$ch2" --seed=18446744073709551616 --print-indices
t_fail bad_sampler 2 "--sampler: unknown value 'random' (distributed, feistel or dynamic)" "$ch2" --sampler=random
t_fail bad_batch_type 2 "--batch-type: unknown value 'bytes' (token or example)" "$ch2" --sampler=dynamic --batch-type=bytes
t_fail bench_not_dynamic 2 "--bench: times the distributed and feistel modes" "$ch2" --bench --sampler=dynamic
t_fail bad_lengths 2 "--min-length" "$ch2" --sampler=dynamic --min-length=9 --max-length=3
t_fail bad_budget_zero 2 "--budget" "$ch2" --sampler=dynamic --budget=0
t_fail bad_sort_size 2 "--sort-size" "$ch2" --sampler=dynamic --sort-size=0
t_fail bad_max_samples 2 "--max-samples" "$ch2" --sampler=dynamic --max-samples=0
t_fail dynamic_has_no_drop_last 2 "--drop-last: the token-budget sampler has none" "$ch2" --sampler=dynamic --drop-last
t_fail batch_size_needs_print 2 "--batch-size: groups what --print-indices prints" "$ch2" --batch-size=4
t_fail batch_size_zero 2 "--batch-size: expected 1 to" "$ch2" --print-indices --batch-size=0
# a batch size near 2^64 (x 8 bytes wraps to 8) is one batch of the whole epoch, as in PyTorch
t_out batch_size_near_2_64 "$(printf '4 1 7 5 3 9 0 8 6 2')" "$ch2" --size=10 --world=1 --print-indices \
    --batch-size=2305843009213693953
t_out batch_size_2_64_minus_1 "$(printf '4 1 7 5 3 9 0 8 6 2')" "$ch2" --size=10 --world=1 --print-indices \
    --batch-size=18446744073709551615
# sizes past the machine are refused before anything is allocated, naming what needs the memory
t_fail check_size_past_the_machine 1 "partition: every rank's order and every epoch's shards: needs" \
    "$ch2" --size=1099511627776 --epochs=2
t_fail dynamic_size_wraps 1 "18446744073709551615 x 8 bytes overflows 64 bits" "$ch2" --sampler=dynamic \
    --size=18446744073709551615
t_fail print_size_past_the_machine 1 "sampler: the order of the epoch's indices: needs" "$ch2" --print-indices \
    --size=1099511627776 --world=1
# a flag the chosen run would ignore is refused, naming it
t_fail epochs_not_printed 2 "--epochs does nothing with --print-indices" "$ch2" --print-indices --epochs=2
t_fail rank_not_checked 2 "--rank does nothing in the partition check" "$ch2" --rank=1
t_fail budget_needs_dynamic 2 "--budget is for the token-budget sampler" "$ch2" --sampler=distributed --budget=10
t_fail bench_takes_no_data 2 "--data does nothing with --bench" "$ch2" --bench --data=synthetic
t_fail bench_takes_no_sampler 2 "--bench: times the distributed and feistel modes" "$ch2" --bench --sampler=feistel
t_fail randperm_needs_shuffle 2 "--randperm does nothing with --no-shuffle" "$ch2" --no-shuffle --randperm=swap
t_fail randperm_not_for_feistel 2 "--randperm does nothing with --sampler=feistel" "$ch2" --sampler=feistel \
    --randperm=swap --size=10
t_fail size_not_with_a_file 2 "--size does nothing with --data=FILE" "$ch2" --data=/etc/hostname --size=5

# --batch-size: the batches DataLoader(batch_size=B, sampler=DistributedSampler(...)) gives, as
# torch's BatchSampler makes them (plain suite, when Debian's torch is there)
if [ "${SUITE:-plain}" = plain ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    for cfg in "10 3 1 3 0 0" "1001 4 3 32 5 1" "7 8 6 2 1 0"; do
        read -r n w r b e drop <<<"$cfg"
        want=$(/usr/bin/python3 -c "
from torch.utils.data import DistributedSampler, BatchSampler
s = DistributedSampler(range($n), num_replicas=$w, rank=$r, seed=0, drop_last=bool($drop)); s.set_epoch($e)
for batch in BatchSampler(s, $b, False): print(' '.join(map(str, batch)))")
        flags=(--size="$n" --world="$w" --rank="$r" --epoch="$e" --print-indices --batch-size="$b")
        [ "$drop" = 1 ] && flags+=(--drop-last)
        t_run "$ch2" "${flags[@]}"
        if [ "$T_STATUS" = 0 ] && [ "$T_OUT" = "$want" ]; then t_pass "batches_equal_torch.n$n.w$w.b$b"
        else t_failed "batches_equal_torch.n$n.w$w.b$b" "chapter-2 ${flags[*]} gave '$(head -c 200 <<<"$T_OUT")', torch '$(head -c 200 <<<"$want")'"; fi
    done
else
    t_skip batches_equal_torch "needs Debian's python3-torch, plain suite"
fi
t_fail bad_epochs 2 "--epochs" "$ch2" --epochs=0
t_fail too_many_threads 2 "--world" "$ch2" --world=5000
t_fail unknown_flag 2 "--frobnicate" "$ch2" --frobnicate
t_fail missing_value 2 "--size" "$ch2" --size
t_out small_budget_caps_length "PASS:" "$ch2" --sampler=dynamic --size=500 --budget=600 --epochs=1
t_fail bad_budget 2 "--max-token-length" "$ch2" --sampler=dynamic --budget=100 --max-token-length=101
t_fail missing_data 1 "no-such-file" "$ch2" --data=no-such-file.jsonl

# --length-field: five records of 5 tokens and five of 500 by their "n" field (by bytes the
# second five are the shorter ones); with a budget of 100 the long ones are skipped.
for i in 0 1 2 3 4; do echo '{"n": 5, "text": "aaaa"}'; done > "$T_TMP/lengths.jsonl"
for i in 5 6 7 8 9; do echo '{"n": 500, "text": "b"}'; done >> "$T_TMP/lengths.jsonl"
t_out length_field_batches_by_field "0 1 2 3 4" "$ch2" --sampler=dynamic --data="$T_TMP/lengths.jsonl" \
    --length-field=n --budget=100 --world=1 --no-shuffle --print-indices
t_out length_field_check_passes "PASS:" "$ch2" --sampler=dynamic --data="$T_TMP/lengths.jsonl" --length-field=n \
    --budget=100 --world=2 --epochs=2
t_fail length_field_needs_data 2 "--length-field" "$ch2" --length-field=n
t_fail length_field_not_for_distributed 2 "--length-field is for the token-budget sampler (--sampler=dynamic)" \
    "$ch2" --sampler=distributed --data="$T_TMP/lengths.jsonl" --length-field=n
t_fail length_field_on_synthetic_refused 1 'synthetic: a length field ("n") is a field of JSONL records' \
    "$ch2" --sampler=dynamic --data=synthetic --length-field=n --budget=100 --world=1
printf '\0\0\x08\x03\0\0\0\x02\0\0\0\x01\0\0\0\x01\x07\x08' > "$T_TMP/two-images-idx3-ubyte"
t_fail length_field_on_idx_refused 1 'two-images-idx3-ubyte: a length field ("n") is a field of JSONL records; IDX records have none' \
    "$ch2" --sampler=dynamic --data="$T_TMP/two-images-idx3-ubyte" --length-field=n --budget=100 --world=1
t_fail bad_seed_text 2 "expected an integer from -2^63 to 2^64-1 (negative allowed), got 'abc'" "$ch2" --seed=abc
t_out negative_seed_printed_signed "seed -1, shuffled" "$ch2" --seed=-1 --size=100 --epochs=1

# --plot: the padding experiment. Its CSV has a row per budget (1 to 64 longest records); a plain batch
# of one record has no padding, and from 2 records on the token budget pads less and carries more
# real tokens at the same memory. Without --out it writes under build/out/ of where it runs (there,
# never over the report's notebooks-out/), plot.gp found from there as from the repository root.
t_out plot_runs "wrote $T_TMP/plot/padding.csv" "$ch2" --plot --size=3000 --out="$T_TMP/plot"
csv=$T_TMP/plot/padding.csv
if [ ! -f "$csv" ]; then t_failed plot_csv "no $csv"
else
    problems=$(awk -F, 'NR == 1 { if ($0 != "budget_tokens,plain_batch,plain_padding_pct,budget_padding_pct,plain_real_per_step,budget_real_per_step") print "header: " $0; next }
        { rows++ }
        $2 == 1 && $3 != 0 { print "B = 1 pads " $3 "%" }
        $2 >= 2 && !($4 < $3 && $6 > $5) { print "budget " $1 ": token budget not better: " $0 }
        END { if (rows != 7) print rows " rows, not 7" }' "$csv")
    if [ -z "$problems" ]; then t_pass plot_csv; else t_failed plot_csv "$(tr '\n' ' ' <<<"$problems")"; fi
fi
if command -v gnuplot >/dev/null 2>&1; then
    if [ -s "$T_TMP/plot/padding.svg" ] && [ -s "$T_TMP/plot/padding.png" ]; then t_pass plot_drawn
    else t_failed plot_drawn "no padding.svg and .png in $T_TMP/plot"; fi
else
    t_skip plot_drawn "gnuplot is not installed"
fi
repo=$(pwd)
mkdir -p "$T_TMP/cwd" && ln -s "$repo/chapters" "$T_TMP/cwd/chapters"
t_ok plot_default_out bash -c "cd '$T_TMP/cwd' && '$repo/$ch2' --plot --size=500"
if [ -f "$T_TMP/cwd/build/out/chapter-2/padding.csv" ]; then t_pass plot_default_out_is_build_out
else t_failed plot_default_out_is_build_out "no build/out/chapter-2/padding.csv where it ran: $(cd "$T_TMP/cwd" && find . -name '*.csv')"; fi
t_out plot_length_field "| padding" "$ch2" --plot --data="$T_TMP/lengths.jsonl" --length-field=n --world=1 \
    --out="$T_TMP/plot-field"
t_fail plot_refuses_budget 2 "--budget does nothing with --plot" "$ch2" --plot --budget=100
t_fail plot_refuses_print 2 "--print-indices does nothing with --plot" "$ch2" --plot --print-indices
t_fail out_needs_plot 2 "--out does nothing without --plot" "$ch2" --out="$T_TMP/x"
# a plot file that cannot be written (a FIFO in its place) is refused before the samplers run, no CSV left
mkdir "$T_TMP/pngfifo" && mkfifo "$T_TMP/pngfifo/padding.png"
T_TIMEOUT=60 t_fail plot_file_refused 2 "chapter-2: --out: $T_TMP/pngfifo/padding.png: a FIFO, not a regular file" \
    "$ch2" --plot --size=3000 --out="$T_TMP/pngfifo"
if [ -e "$T_TMP/pngfifo/padding.csv" ]; then t_failed plot_file_refused_no_csv "$(ls "$T_TMP/pngfifo")"
else t_pass plot_file_refused_no_csv; fi
# --data in --out under the plot's CSV name: reading it, then writing the CSV over it, is refused
mkdir "$T_TMP/same" && printf '\0\0\x08\x03\0\0\0\x01\0\0\0\x01\0\0\0\x01\x07' > "$T_TMP/same/padding.csv"
cp "$T_TMP/same/padding.csv" "$T_TMP/same.orig"
t_fail plot_over_its_data 2 "chapter-2: --out: $T_TMP/same/padding.csv is $T_TMP/same/padding.csv, which this run reads" \
    "$ch2" --plot --data="$T_TMP/same/padding.csv" --out="$T_TMP/same"
if cmp -s "$T_TMP/same/padding.csv" "$T_TMP/same.orig"; then t_pass plot_over_its_data_left_alone
else t_failed plot_over_its_data_left_alone "$(ls -l "$T_TMP/same")"; fi
