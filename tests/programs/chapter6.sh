# chapter6.sh: build/chapter-6 as a user drives it, on small runs (a slice of
# the training set, batches of 32): bad flags and bad input (a missing,
# foreign or misshapen --init, also under nn.Sequential's names, a missing
# or foreign --resume, --hidden=0, a batch larger than a rank's share, an
# unwritable checkpoint directory, a resume with another world, training set
# size, shuffle, drop_last or buckets, a header field edited, a position past
# --steps or --epochs), each a clear message and a non-zero exit; a save or
# checkpoint that fails on rank 0 ending every rank at once, naming rank 0
# and "saving", not the watchdog naming the wrong rank; a rank failing
# inside a step naming that step, 1-based; --init from
# our own file and from the same parameters as nn.Sequential's float64 (the
# same start, said in the banner); the replica check naming a flipped bit at
# any step, on any rank, by majority; a verdict every rank reaches (the
# replica check's, a damaged --resume) printed whole, no rank blamed for it;
# exact resume, bit for bit, from several
# stop points (mid-epoch included, loader workers on, bucket layouts rebuilt,
# BatchNorm with accumulation at 3 ranks); a kill -9 during a checkpoint's
# save leaving the last checkpoint loadable and the resumed run exact; the
# Chrome trace valid with every lane; the Gantt chart; and every failure demo
# ending as its story says.
. "$(dirname "$0")/../harness/lib.sh"
P=$BUILD/chapter-6
TD=$BUILD/tools/tensordiff
OUT=$T_TMP/out
# a small run: 2048 training records over 4 ranks, 16 steps an epoch, no evaluation
S=(--train-size=2048 --epochs=3 --batch=32 --test-data=none --out="$OUT")

t_out help "--checkpoint-every=N" $P --help
t_fail bad_flag 2 "chapter-6: unrecognized option '--frobnicate'" $P --frobnicate
t_fail hidden_zero 2 "--hidden: expected a comma-separated list of 1 to 65536, got '0'" $P --hidden=0
t_fail hidden_junk 2 "--hidden: expected a comma-separated list of 1 to 65536, got '1,,2' (an empty value)" $P --hidden=1,,2
t_fail checkpoint_every_needs_a_directory 2 "--checkpoint-every needs --checkpoint=DIR" $P --checkpoint-every=5
t_fail init_and_resume 2 "--init and --resume both give the starting parameters" $P --init=a --resume=b
t_fail demo_sets_its_own_runs 2 "--world does nothing with --demo or --bench" $P --demo=uneven --world=8
t_fail bench_model_batch_past_its_pool 1 "bench_model: a batch of 9000" $P --bench=model --batch=9000 --data=synthetic
t_fail torchrun_with_the_simulator 2 "a launcher (mpirun or torchrun) started this process as one of 2" env RANK=1 WORLD_SIZE=2 $P --train-size=1024 --epochs=1
# a stray RANK=1 once trained and exited 0 without the summary or --out's files (rank 1 writes none)
t_fail stray_rank 2 "RANK=1 is set but WORLD_SIZE is not (torchrun sets both)" \
    env -u WORLD_SIZE RANK=1 $P --train-size=1024 --epochs=1 --test-data=none --out="$T_TMP/stray"
t_fail launchers_disagree 2 "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 (mpirun) and RANK=0 WORLD_SIZE=1 (torchrun) disagree" \
    env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 RANK=0 WORLD_SIZE=1 $P --train-size=1024 --epochs=1 --test-data=none
t_fail model_past_memory 1 "model: its parameters, gradients and the buffers of a batch of 32768: needs" $P --batch=32768 --hidden=65536,65536,65536 --data=synthetic --epochs=1 --world=1 --test-data=none
t_fail fault_grammar 2 "--fault=KIND:R@K[:MS]: unknown kind 'explode' in 'explode:1@2'" $P --fault=explode:1@2
t_fail fault_rank_of_this_world 2 "--fault=flip:R@K: rank R must be 0 to 1 (the world has 2 ranks), got '2' in 'flip:2@3'" \
    $P --world=2 --fault=flip:2@3
t_fail batchnorm_batch_one 2 "--batch=1 with --batchnorm" $P --batchnorm --batch=1
t_fail momentum_is_sgds 2 "--momentum is SGD's" $P --momentum=0.5
t_fail weight_decay_below_any_double 2 "--weight-decay: '1e-400' is not 0, but closer to 0 than any double" \
    $P --weight-decay=1e-400
t_fail bench_out_only_for_scaling 2 "--out does nothing with --bench=model (of the benchmarks, only --bench=scaling" \
    $P --bench=model --out="$T_TMP/bench-out"
t_fail save_and_trace_one_file 2 "--save and --trace both write $T_TMP/m: the one written last would replace the other" \
    $P "${S[@]}" --save="$T_TMP/m" --trace="$T_TMP/./m"

# bad input at run time: one line naming the thing, exit 1, before any rank waits for another
t_fail world_of_models_past_memory 1 "--world=64 on the simulator: the ranks' parameters, gradients and adam state" \
    $P --world=64 --hidden=65536,65536 --data=synthetic --train-size=4096 --steps=1 --test-data=none --out="$OUT"
t_fail batch_larger_than_a_share 1 "--batch=600 is larger than each rank's share of the training set: 2048 records over 4 ranks give 512 each" \
    $P "${S[@]}" --batch=600
t_fail init_missing 1 "$T_TMP/none.safetensors: cannot open" $P "${S[@]}" --init="$T_TMP/none.safetensors"
echo "not a tensor file" > "$T_TMP/foreign.safetensors"
t_fail init_foreign 1 "$T_TMP/foreign.safetensors: " $P "${S[@]}" --init="$T_TMP/foreign.safetensors"
t_ok small_model_saved $P "${S[@]}" --steps=2 --hidden=128,64 --save="$T_TMP/small.safetensors" --out="$T_TMP/out-small"
t_fail init_wrong_shapes 1 "small.safetensors: fc1.weight has shape [128, 784], expected [256, 784]" \
    $P "${S[@]}" --init="$T_TMP/small.safetensors"
t_fail resume_missing 1 "$T_TMP/nowhere: cannot open" $P "${S[@]}" --resume="$T_TMP/nowhere"
t_fail resume_foreign 1 "not a checkpoint of this program" $P "${S[@]}" --resume="$T_TMP/small.safetensors"
# the summary written into a full disk is an error, not exit 0
t_fail summary_into_a_full_disk 1 "chapter-6: writing the output failed" \
    bash -c 'exec "$0" "$@" > /dev/full' "$P" "${S[@]}" --epochs=1 --out="$T_TMP/out-full"
# an output refused when the flags are checked is a usage error (exit 2), as in every chapter
touch "$T_TMP/a-file"
t_fail checkpoint_unwritable 2 "--checkpoint: $T_TMP/a-file/ck: $T_TMP/a-file is a regular file, not a directory" \
    $P "${S[@]}" --checkpoint="$T_TMP/a-file/ck"
t_fail save_unwritable 2 "--save: $T_TMP/a-file/x.safetensors: $T_TMP/a-file is a regular file, not a directory" \
    $P "${S[@]}" --save="$T_TMP/a-file/x.safetensors"
t_fail trace_unwritable 2 "--trace: $T_TMP/a-file/t.json: $T_TMP/a-file is a regular file, not a directory" \
    $P "${S[@]}" --trace="$T_TMP/a-file/t.json"
t_fail trace_in_a_missing_directory 1 "--trace=$T_TMP/nowhere/t.json: cannot write it" \
    $P "${S[@]}" --trace="$T_TMP/nowhere/t.json"
mtu=/sys/class/net/lo/mtu # sysfs: a size of 4096 bytes, a few bytes to read
if [ -r "$mtu" ]; then
    t_fail init_shorter_than_its_size 1 "--init: $mtu: the file shrank while being read: $mtu: ends after" \
        $P "${S[@]}" --init="$mtu"
else t_skip init_shorter_than_its_size "no $mtu"; fi
long=$T_TMP/$(printf 'x%.0s' {1..300}) # one name past the 255 bytes a file name may have
t_fail trace_name_too_long 2 "--trace: $long: File name too long" $P "${S[@]}" --trace="$long"
cp "$T_TMP/small.safetensors" "$T_TMP/start.safetensors"
t_fail trace_over_init 2 "--trace would write over $T_TMP/start.safetensors, the file --init reads" \
    $P "${S[@]}" --hidden=128,64 --init="$T_TMP/start.safetensors" --trace="$T_TMP/start.safetensors"
if [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then t_failed failed_runs_write_nothing "they left: $(ls "$OUT")"
else t_pass failed_runs_write_nothing; fi

# --init says where the run started; a PyTorch user's file (nn.Sequential's names, float64) is the same start
t_out init_banner "initial parameters from $T_TMP/small.safetensors" \
    $P "${S[@]}" --steps=2 --hidden=128,64 --init="$T_TMP/small.safetensors" --save="$T_TMP/from-ours.safetensors"
if ! command -v python3 > /dev/null; then t_skip init_sequential_f64 "python3 is not installed"
else
    python3 - "$T_TMP/small.safetensors" "$T_TMP/seq64.safetensors" <<'PY'
import array, json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
header.pop("__metadata__", None)
out, blobs, offset = {}, [], 0
for name, e in header.items():  # fc<k>.<what> -> <2(k - 1)>.<what>, float32 -> float64
    b, end = e["data_offsets"]
    blob = array.array("d", array.array("f", data[b:end])).tobytes()
    layer, what = name[2:].split(".", 1)
    out[f"{2 * (int(layer) - 1)}.{what}"] = {"dtype": "F64", "shape": e["shape"],
                                             "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
text = json.dumps(out).encode()
text += b" " * ((8 - (8 + len(text)) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
    note="nn.Sequential names 0, 2, 4 read as fc1, fc2, fc3; F64 converted to float32, rounding to nearest even"
    t_out init_sequential_f64 "initial parameters from $T_TMP/seq64.safetensors ($note)" \
        $P "${S[@]}" --steps=2 --hidden=128,64 --init="$T_TMP/seq64.safetensors" --save="$T_TMP/from-seq64.safetensors"
    t_ok init_sequential_f64_same_start "$TD" --quiet "$T_TMP/from-ours.safetensors" "$T_TMP/from-seq64.safetensors"
    t_fail init_sequential_wrong_shapes 1 "seq64.safetensors: 0.weight has shape [128, 784], expected [64, 784]" \
        $P "${S[@]}" --hidden=64,64 --init="$T_TMP/seq64.safetensors"
fi

# A rank that fails says so at once, to every rank: when rank 0 cannot save, the job ends with its error,
# naming rank 0 and the phase, long before the watchdog (--timeout=60, and the run must end within 30 s).
# A file larger than the file-size limit allows (ulimit -f, SIGXFSZ ignored: the write fails with EFBIG)
# fails only when the save writes, after training, never at the start's probe; synthetic data, so no
# dataset cache is written under the limit.
mkdir -p "$T_TMP/a-dir"
T_TIMEOUT=30 t_fail save_to_a_directory_ends_at_once 2 "$T_TMP/a-dir" \
    $P "${S[@]}" --steps=2 --timeout=60 --save="$T_TMP/a-dir"
limited=(bash -c 'ulimit -f 256 && trap "" XFSZ && exec "$@"' _ $P --data=synthetic --train-size=2048 --batch=32
         --test-data=none --out="$T_TMP/out-limited" --timeout=60)
T_TIMEOUT=30 t_fail save_failure_names_rank_0_saving 1 \
    "chapter-6: rank 0 failed while saving the model to $T_TMP/big.safetensors: " \
    "${limited[@]}" --steps=2 --save="$T_TMP/big.safetensors"
T_TIMEOUT=30 t_fail checkpoint_failure_names_rank_0_saving 1 \
    "chapter-6: rank 0 failed while saving a checkpoint to $T_TMP/ck-limited at step 4: " \
    "${limited[@]}" --steps=8 --checkpoint="$T_TMP/ck-limited" --checkpoint-every=4

# A rank's own failure inside a step names the step as --fault and the checkpoints count it (1-based):
# record 257 of an IDX set whose label is 200 is rank 1's 65th sample (--no-shuffle, 4 ranks), the
# first of its third batch, so rank 1 fails in step 3's forward, after step 2's replica check.
bad=$T_TMP/badlabel
t_idx_bad_label "$bad" 2048 257
t_fail step_failure_names_its_step 1 "failed while training step 3" \
    $P --data="$bad-images-idx3-ubyte" --test-data=none --no-shuffle --batch=32 --epochs=1 --out="$OUT"
t_lines step_failure_names_its_step_whole_line "chapter-6: " \
    'chapter-6: rank 1 failed while training step 3: model: sample 0 of the batch has label 200, outside 0\.\.9'

# a run: the table, the breakdown, replicas compared every step
t_run $P --train-size=2048 --epochs=1 --batch=32 --out="$OUT"
if [ "$T_STATUS" != 0 ]; then t_failed small_run "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif ! grep -q "where a step's .* went (mean over ranks and steps): data wait .*, copy .*, forward .*, backward" <<<"$T_OUT" ||
     ! grep -q "exposed communication .*, optimizer " <<<"$T_OUT"; then t_failed small_run "no time breakdown: $T_OUT"
elif ! grep -q "replicas: every rank's parameters were the same bits at every step" <<<"$T_OUT"; then
    t_failed small_run "no replica verdict: $T_OUT"
else t_pass small_run; fi
# the banner says the world the run has: --world's ranks, their global batch and share
t_out banner_sim_world "chapter 6: data-parallel training, 3 ranks (the simulator: threads of this process, --world=3)" \
    $P --world=3 --train-size=1536 --epochs=1 --steps=2 --test-data=none --out="$OUT"
t_said banner_sim_global_batch "batch 32 per rank (96 global)"
t_said banner_sim_share "each rank: 512 samples, 16 batches of 32"
t_said summary_sim_samples "2 steps, 192 samples in"
# the replica check is real: a bit flipped in a rank's parameters after step K is named at step K, with the
# rank the majority disagrees with (rank 0 too), the tensor and the element (fc3.bias[K mod 10]); at any K
# (the table of ranks and steps in the plain suite; under a sanitizer, where it costs a minute, its two
# ends: the first step on rank 0, the last on rank 3)
L=(--train-size=2048 --epochs=4 --batch=32 --test-data=none --out="$OUT")   # 64 steps
if [ "${SUITE:-plain}" = plain ]; then
    flips=(); for k in 1 5 7 10 12 20 50 64; do flips+=("0@$k" "3@$k"); done
else flips=(0@1 3@64); fi
for flip in "${flips[@]}"; do
    r=${flip%@*} k=${flip#*@}
    t_fail "replica_check_names_flip_${r}_at_$k" 1 \
        "step $k: rank $r differs from the other 3 ranks in fc3.bias[$((k % 10))]: " $P "${L[@]}" --fault=flip:$flip
done
# The replica check's verdict is every rank's, so it is the job's: the whole line is the verdict, no
# rank blamed for it ("rank 1 failed while training step 6: ..." or "rank 1: ..." before it)
t_fail replica_verdict_alone 1 "step 5: rank 3 differs" $P "${L[@]}" --fault=flip:3@5
t_lines replica_verdict_alone_whole_line "chapter-6: " \
    'chapter-6: step 5: rank 3 differs from the other 3 ranks in fc3\.bias\[5\]: [-0-9.e+]+ on rank 3, [-0-9.e+]+ on the others'
t_fail replica_check_names_rank_0_of_3 1 "step 6: rank 0 differs from the other 2 ranks in fc3.bias[6]: " \
    $P "${L[@]}" --world=3 --fault=flip:0@6
t_fail replica_check_two_ranks_cannot_vote 1 "step 9: rank 0 and rank 1 hold different fc3.bias, first in fc3.bias[9]: " \
    $P "${L[@]}" --world=2 --fault=flip:1@9
if grep -qF "with two ranks there is no majority to tell which one is wrong" <<<"$T_OUT"; then
    t_pass replica_check_two_ranks_say_why
else t_failed replica_check_two_ranks_say_why "$(tail -n 1 <<<"$T_OUT")"; fi
t_fail flip_past_the_run 1 "--fault=flip:1@65: this run takes optimizer steps 1 to 64, so the bit would never flip" \
    $P "${L[@]}" --fault=flip:1@65
t_fail flip_past_steps 1 "--fault=flip:2@11: this run takes optimizer steps 1 to 10" \
    $P "${L[@]}" --steps=10 --fault=flip:2@11
t_fail flip_from_zero 2 "--fault=flip:R@K: K must be 1 to 18446744073709551615 (K counts from 1: collective K, or for \
chapter 6's flip optimizer step K), got '0' in 'flip:0@0'" $P "${L[@]}" --fault=flip:0@0
# ranks flipped at one step differ from each other, as independent faults do: two of three flipped is no
# majority (the healthy rank 0 is not blamed), two of five are both named; one flip given twice is refused
t_fail flips_of_two_of_three 1 "step 6: rank 0 and rank 1 hold different fc3.bias, first in fc3.bias[6]: " \
    $P "${L[@]}" --world=3 --fault=flip:1@6,flip:2@6
t_said flips_of_two_of_three_no_majority "no copy of fc3.bias is shared by a majority of the 3 ranks"
t_fail flips_of_two_of_five 1 "step 6: ranks 1 and 2 differ from the other 3 ranks in fc3.bias, rank 1 first in \
fc3.bias[6]: " $P "${L[@]}" --world=5 --fault=flip:1@6,flip:2@6
t_fail flip_twice 2 "--fault=flip:R@K: 'flip:3@6' is given twice: one flip per rank and K" \
    $P "${L[@]}" --fault=flip:3@6,flip:3@6

# exact resume: stopped at step K with a checkpoint, resumed to step 40: the same bits as never stopped
resume_case() { # NAME K FLAGS...
    local name=$1 k=$2; shift 2
    local ck=$T_TMP/ck-$name
    rm -rf "$ck"
    if ! $P "${S[@]}" "$@" --steps=40 --save="$T_TMP/$name-whole.safetensors" > "$T_TMP/log" 2>&1; then
        t_failed "$name" "the uninterrupted run failed: $(tail -n 2 "$T_TMP/log")"; return
    fi
    if ! $P "${S[@]}" "$@" --steps="$k" --checkpoint="$ck" > "$T_TMP/log" 2>&1 ||
       ! $P "${S[@]}" "$@" --steps=40 --resume="$ck" --save="$T_TMP/$name-resumed.safetensors" > "$T_TMP/log" 2>&1; then
        t_failed "$name" "the stopped or the resumed run failed: $(tail -n 2 "$T_TMP/log")"; return
    fi
    t_ok "$name" "$TD" --quiet "$T_TMP/$name-whole.safetensors" "$T_TMP/$name-resumed.safetensors"
}
small_buckets=(--bucket-cap-mb=0.1 --first-bucket-kb=50 --workers=2)
resume_case resume_after_step_1 1 "${small_buckets[@]}"           # before the buckets' rebuild
resume_case resume_mid_epoch 7 "${small_buckets[@]}"
resume_case resume_at_epoch_end 16 "${small_buckets[@]}"
resume_case resume_mid_epoch_2 23 "${small_buckets[@]}" --augment=flip
resume_case resume_batchnorm_accumulate_world3 11 --world=3 --batchnorm --accumulate=3 --workers=2
# resuming another run is refused, saying why
rm -rf "$T_TMP/ck-other" && $P "${S[@]}" --steps=3 --checkpoint="$T_TMP/ck-other" > /dev/null 2>&1
t_fail resume_other_world 1 "written by a world of 4 ranks of 32 samples a batch (a global batch of 128); this run has 2 of 32 (64)" \
    $P "${S[@]}" --resume="$T_TMP/ck-other" --world=2
t_fail resume_other_buckets 1 "The buckets decide which gradients each all-reduce sums together" \
    $P "${S[@]}" --resume="$T_TMP/ck-other" --bucket-cap-mb=1
t_fail resume_other_train_size 1 "written with 2048 training records; this run has 3000" \
    $P "${S[@]}" --resume="$T_TMP/ck-other" --train-size=3000
t_fail resume_other_shuffle 1 "written with the sampler shuffling; this run has --no-shuffle" \
    $P "${S[@]}" --resume="$T_TMP/ck-other" --no-shuffle
t_fail resume_other_drop_last 1 "written without --drop-last; this run has --drop-last" \
    $P "${S[@]}" --resume="$T_TMP/ck-other" --drop-last
t_fail flip_before_the_resume 1 "--fault=flip:1@2: this run takes optimizer steps 4 to 48, so the bit would never flip" \
    $P "${S[@]}" --resume="$T_TMP/ck-other" --fault=flip:1@2
# a header field edited in place ("step":"3" -> "4"): the checksum names it
edited() { # FIELD FROM TO: a copy of ck-other with that field's value changed, its directory printed
    local dir=$T_TMP/ck-edited-$1
    mkdir -p "$dir"
    LC_ALL=C sed "s/\"$1\":\"$2\"/\"$1\":\"$3\"/" "$T_TMP/ck-other/checkpoint.safetensors" \
        > "$dir/checkpoint.safetensors"
    echo "$dir"
}
for edit in "step 3 4" "optimizer_steps 3 4" "batch 3 4" "epoch 0 1" "world 4 2"; do
    read -r field from to <<<"$edit"
    t_fail "resume_edited_$field" 1 "metadata \"$field\" (\"$to\") does not match its checksum" \
        $P "${S[@]}" --resume="$(edited "$field" "$from" "$to")"
done
# every rank refuses the damaged file alike: the job's verdict, said as itself, no rank blamed for it
t_fail resume_edited_alone 1 "does not match its checksum" $P "${S[@]}" --resume="$T_TMP/ck-edited-step"
re_dir=$(t_ere "$T_TMP/ck-edited-step")
t_lines resume_edited_alone_whole_line "chapter-6: " \
    "chapter-6: --resume: $re_dir/checkpoint\\.safetensors: metadata \"step\" \\(\"4\"\\) does not match its checksum.*"
# a position this run does not reach: fewer --steps than the checkpoint's, an epoch past --epochs
t_fail resume_past_steps 1 "the checkpoint is at step 3, past this run's --steps=2" \
    $P "${S[@]}" --resume="$T_TMP/ck-other" --steps=2
# (a constant learning rate: a cosine schedule's length is the optimizer's, and its change refused for that)
rm -rf "$T_TMP/ck-late" && $P "${S[@]}" --steps=20 --schedule=constant --checkpoint="$T_TMP/ck-late" > /dev/null 2>&1
t_fail resume_past_epochs 1 "metadata \"epoch\" is 1: this run's epochs are 0 to 0 (--epochs=1)" \
    $P "${S[@]}" --schedule=constant --resume="$T_TMP/ck-late" --epochs=1

# A kill -9 in the middle of a save: the last complete checkpoint loads, and the
# run resumed from it ends with the bits of a run never interrupted. The kill
# lands mid-save by construction, not by timing: stop_before_rename (an
# LD_PRELOAD library) stops the program at its third checkpoint's rename, when
# step 3's file is written beside step 2's and not yet in place.
ck=$T_TMP/ck-kill
long=(--train-size=8192 --epochs=1 --batch=32 --test-data=none --out="$OUT" --steps=40)
stopper=$T_TMP/stop_before_rename.so
$P "${long[@]}" --save="$T_TMP/long-whole.safetensors" > /dev/null 2>&1
if ! ${CC:-cc} -shared -fPIC -o "$stopper" tests/harness/preload/stop_before_rename.c -ldl 2> "$T_TMP/cc.log"; then
    t_failed kill_mid_save "cannot build tests/harness/preload/stop_before_rename.c: $(tail -n 3 "$T_TMP/cc.log")"
else
    # the sanitizers' runtime would refuse a library loaded before it
    env LD_PRELOAD="$stopper" ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
        STOP_BEFORE_RENAME=/checkpoint.safetensors STOP_BEFORE_RENAME_AT=3 \
        $P "${long[@]}" --checkpoint="$ck" --checkpoint-every=1 > "$T_TMP/kill.log" 2>&1 &
    pid=$! state=
    for _ in $(seq 6000); do # waits for the stop, at most ten minutes: a hang guard, not a window
        state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || break
        [ "$state" = T ] && break
        sleep 0.1
    done
    kill -KILL $pid 2>/dev/null
    { wait $pid; } 2>/dev/null && status=0 || status=$?
    if [ "$state" != T ] || [ "$status" != 137 ]; then
        t_failed kill_mid_save "the run did not stop at its third checkpoint (state '$state', exit $status): $(tail -n 3 "$T_TMP/kill.log")"
    elif ! compgen -G "$ck/checkpoint.safetensors.tmp-*" > /dev/null; then
        t_failed kill_mid_save "stopped before the rename, but no temporary file beside the checkpoint: $(ls "$ck")"
    else
        t_pass kill_mid_save
        t_out kill_mid_save_keeps_step_2 "after step 2" $P "${long[@]}" --resume="$ck" --checkpoint="$ck" --save="$T_TMP/long-resumed.safetensors"
        t_ok kill_mid_save_resumes_exactly "$TD" --quiet "$T_TMP/long-whole.safetensors" "$T_TMP/long-resumed.safetensors"
        left=$(compgen -G "$ck/checkpoint.safetensors.tmp-*" || true)
        if [ -z "$left" ]; then t_pass kill_mid_save_stale_swept; else t_failed kill_mid_save_stale_swept "left: $left"; fi
    fi
fi

# the Chrome trace: valid JSON, one process per rank, every lane, all-reduces with sequence number, size and
# bucket; and the links (modelled) each all-reduce kept busy, inside its bar (one node: NVLink, no network)
t_run $P "${S[@]}" --steps=6 --bucket-cap-mb=0.1 --first-bucket-kb=50 --trace="$T_TMP/trace.json" --trace-steps=6
# ... and what overlap bought, bucket by bucket, over the traced steps after the first
for check in "said:overlap with backward, mean over steps 1 to 5 of every rank" \
             "bucket0:bucket 0: its all-reduce (" "bucket1:bucket 1: its all-reduce ("; do
    needle=${check#*:}
    if grep -qF -- "$needle" <<<"$T_OUT"; then t_pass "trace_overlap_${check%%:*}"
    else t_failed "trace_overlap_${check%%:*}" "no \"$needle\" in: $(tail -n 5 <<<"$T_OUT")"; fi
done
if [ "$T_STATUS" != 0 ]; then t_failed trace "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif ! command -v python3 > /dev/null; then t_skip trace_valid "python3 is not installed"
else
    why=$(python3 - "$T_TMP/trace.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
ranks = {p for p, n in procs.items() if n.startswith("rank ")}
lanes = {}
for e in ev:
    if e.get("name") == "thread_name":
        lanes.setdefault(e["pid"], set()).add(e["args"]["name"])
want = {"data wait", "copy", "forward", "backward", "exposed communication", "optimizer", "replica check",
        "all-reduce bucket 0", "all-reduce bucket 1"}
bad = []
if ranks != {0, 1, 2, 3}:
    bad.append("processes %s, expected ranks 0-3" % sorted(ranks))
for r in sorted(ranks):
    if not want <= lanes.get(r, set()):
        bad.append("rank %d lacks lanes %s" % (r, sorted(want - lanes.get(r, set()))))
ar = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "comm"]
if not ar or any(not {"seq", "bytes", "bucket", "step"} <= set(e["args"]) for e in ar):
    bad.append("all-reduce events without seq, bytes, bucket and step")
if any(e["dur"] < 0 or e["ts"] < 0 for e in ev if e.get("ph") == "X"):
    bad.append("negative times")
links = [p for p, n in procs.items() if n == "links (modelled)"]
if links != [4] or lanes.get(4) != {"GPU links in a node", "GPUs adding received chunks"}:
    bad.append("links: process %s, lanes %s" % (links, sorted(lanes.get(4, set()))))
bars = {e["args"]["seq"]: e for e in ar if e["pid"] == 0}
spans = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "link"]
out = [e for e in spans if e["args"]["seq"] not in bars or e["ts"] < bars[e["args"]["seq"]]["ts"] - 1e-3 or
       e["ts"] + e["dur"] > bars[e["args"]["seq"]]["ts"] + bars[e["args"]["seq"]]["dur"] + 1e-3]
if not spans or out:
    bad.append("%d link spans, %d outside their all-reduce's bar" % (len(spans), len(out)))
print("; ".join(bad))
EOF
)
    if [ -n "$why" ]; then t_failed trace_valid "$why"; else t_pass trace_valid; fi
fi
# modelled time (DESIGN.md, "Virtual time"): the trace, the Gantt chart's data and the epochs' table are
# the same bytes run quietly and beside two busy processes, and so is stdout but for the line of the run's
# measured wall seconds; two loader workers (which thread claims a batch must not matter), two buckets, an
# epoch's end and its statistics' all-reduce (t_same_under_load, with --out at $T_TMP/vt)
t_same_under_load timeline_same_bytes_under_load "trace.json gantt.csv epochs.csv" $P \
    --data=synthetic --test-data=none --train-size=2048 --epochs=2 --steps=20 --batch=32 --workers=2 \
    --bucket-cap-mb=0.1 --first-bucket-kb=50 --trace-steps=20 --out="$T_TMP/vt" --trace="$T_TMP/vt/trace.json"
# with 32 micro-batches a step leaves over 160 bars: every traced step keeps all of its own
t_run $P "${S[@]}" --steps=4 --accumulate=32 --batch=4 --trace="$T_TMP/trace8.json" --trace-steps=4
if [ "$T_STATUS" != 0 ]; then t_failed trace_accumulate "exit $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif grep -q "the timeline dropped" <<<"$T_OUT"; then t_failed trace_accumulate "$(grep 'the timeline dropped' <<<"$T_OUT")"
elif ! command -v python3 > /dev/null; then t_skip trace_accumulate "python3 is not installed"
else
    why=$(python3 - "$T_TMP/trace8.json" <<'EOF'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
bars = collections.Counter((e["pid"], e["args"]["step"]) for e in ev if e.get("ph") == "X" and "step" in e.get("args", {}))
# each micro-batch leaves at least its data wait, copy, forward and backward
bad = ["rank %d step %d: %d bars, fewer than 32 micro-batches leave" % (r, s, bars[(r, s)])
       for r in range(4) for s in range(4) if bars[(r, s)] < 4 * 32]
print("; ".join(bad))
EOF
)
    if [ -n "$why" ]; then t_failed trace_accumulate "$why"; else t_pass trace_accumulate; fi
fi
if command -v gnuplot > /dev/null; then
    if [ -s "$OUT/gantt.png" ] && [ -s "$OUT/gantt.svg" ] && [ -s "$OUT/gantt.csv" ]; then t_pass gantt_rendered
    else t_failed gantt_rendered "missing in $OUT: $(ls "$OUT")"; fi
    # titled by what it shows: the run (4 ranks of batch 4, the last run above), the steps, the buckets
    if grep -q ">4 ranks, batch 4 each, all-reduce overlapping backward<" "$OUT/gantt.svg" &&
        grep -q ">steps 0 to 3 of every rank; buckets: the first up to [^<]*, then up to [^<]*<" "$OUT/gantt.svg"
    then t_pass gantt_titled
    else t_failed gantt_titled "$OUT/gantt.svg: $(grep -o '<text>[^<]*<' "$OUT/gantt.svg" | grep -v '>rank [0-9]' | head -n 3 | tr '\n' ' ')"; fi
    # the accuracy figure counts its columns itself: a CSV under a name a shell would run is drawn, not run
    odd="$T_TMP/x '\$(touch $T_TMP/ran)' y"
    mkdir -p "$odd"
    printf 'epoch,4 ranks x batch 32,1 rank x batch 128\n1,0.80,0.81\n2,0.85,0.852\n' > "$odd/acc.csv"
    quoted=${odd//\'/\'\'}
    t_run gnuplot -e "csv='$quoted/acc.csv'; out='$quoted/acc'" chapters/06-ddp/accuracy.gp
    if [ "$T_STATUS" != 0 ] || [ ! -s "$odd/acc.png" ] || [ -e "$T_TMP/ran" ]; then
        t_failed accuracy_plot_of_an_odd_name "status $T_STATUS, $(ls "$odd" "$T_TMP/ran" 2>&1 | tr '\n' ' '): $T_OUT"
    else t_pass accuracy_plot_of_an_odd_name; fi
else
    t_skip gantt_rendered "gnuplot is not installed"
fi

# the failure demos: each broken run fails as its story says, naming the rank and the collective; each fix works
T_TIMEOUT=120
# on modelled time (the save-timeout story's watchdog included): the same bytes beside two busy
# processes, the lines with measured seconds and the checkpoint's temporary directory aside
t_same_under_load demos_same_bytes_under_load "slower-no-overlap.csv slower-overlap.csv" \
    bash -c '"$1" --demo=all --out="$2" | sed -E "s|ddp-chapter6-demo-[A-Za-z0-9]+|ddp-chapter6-demo-X|g"
             exit "${PIPESTATUS[0]}"' _ "$P" "$T_TMP/vt"
t_run $P --demo=all --out="$OUT"
if [ "$T_STATUS" != 0 ]; then t_failed demos "exit $T_STATUS: $(grep -E 'UNEXPECTED|====' <<<"$T_OUT" | head -n 5)"
else
    t_pass demos
    n=0
    for needle in "fingerprint mismatch before collective #" "rank 0 called #" \
                  "rank 0: running its own code (saving a checkpoint to" "timed out after 1 s" \
                  "rank 3 called #" "4 GPUs, batch 16 each (global 64), tiny buckets, no overlap" \
                  "its timeline: $OUT/slower-no-overlap.png" "verdict: with the same global batch, 4 GPUs are SLOWER than 1" \
                  "((1e8 + 1) + -1e8) + 1 = 1   one rank" "(1e8 + -1e8) + (1 + 1) = 2" \
                  "(other bits)" "8 ranks x batch  8: test accuracy"; do
        n=$((n + 1))
        if grep -qF -- "$needle" <<<"$T_OUT"; then t_pass "demos_say_$n"
        else t_failed "demos_say_$n" "no \"$needle\" in the demos' output"; fi
    done
    # the world-size story: the default mode's 2, 4 and 8 ranks end in other bits than 1 rank's, --same-bits in one
    same=$(sed -n '/^  --same-bits, 2 epochs/,/lesson/p' <<<"$T_OUT" | grep -c "(the same bits)" || true)
    other=$(sed -n '/^  DDP as PyTorch sums/,/^  --same-bits/p' <<<"$T_OUT" | grep -c "(the same bits)" || true)
    if [ "$same" = 3 ] && [ "$other" = 0 ]; then t_pass demos_world_size_story
    else t_failed demos_world_size_story "--same-bits rows the same as 1 rank's: $same of 3; default rows: $other of 0"; fi
    # the slower story's claims, read off its rows (the demo checks them too): one global batch split
    # over 4 GPUs is slower than 1 GPU, bigger buckets with overlap help, a batch of 64 per GPU is faster
    ratios=$(sed -n '/^==== demo slower/,/verdict/p' <<<"$T_OUT" | grep -oE "[0-9.]+x 1 GPU's, (SLOWER|faster)" |
        sed -E "s/x 1 GPU's, / /" | tr '\n' ' ')
    if awk -v r="$ratios" 'BEGIN { n = split(r, f, " "); exit !(n == 6 && f[1] < 1 && f[2] == "SLOWER" &&
            f[3] > f[1] && f[4] == "SLOWER" && f[5] > 1 && f[6] == "faster") }'
    then t_pass demos_slower_story
    else t_failed demos_slower_story "the ratios to 1 GPU (no overlap, overlap, batch 64 each): $ratios"; fi
    # the slower story's two timelines: their data always, their charts where gnuplot is
    for f in slower-no-overlap slower-overlap; do
        if [ ! -s "$OUT/$f.csv" ]; then t_failed "demos_timeline_$f" "no $OUT/$f.csv"
        elif command -v gnuplot > /dev/null 2>&1 && [ ! -s "$OUT/$f.svg" ]; then t_failed "demos_timeline_$f" "no $OUT/$f.svg"
        else t_pass "demos_timeline_$f"; fi
    done
    # each titled by its own run, its steps and its buckets: no two timelines under one title
    if command -v gnuplot > /dev/null 2>&1; then
        titles=$(for f in gantt slower-no-overlap slower-overlap; do grep -o '<text>[^<]*<' "$OUT/$f.svg"; done)
        if grep -qF "demo slower, 4 GPUs, batch 16 each (global 64), tiny buckets, no overlap<" <<<"$titles" &&
            grep -qF "demo slower, 4 GPUs, batch 16 each (global 64), 64/256 KiB buckets, overlap<" <<<"$titles" &&
            [ "$(grep -c 'of every rank; buckets: the first up to' <<<"$titles")" = 3 ]
        then t_pass demos_timelines_titled
        else t_failed demos_timelines_titled "titles: $(grep 'of every rank' <<<"$titles" | tr '\n' ' ')"; fi
    fi
fi

# The three events of a step, each left out in turn (--drop-event): the simulated device's detector
# names the operation, the buffer, both streams and the batch, on the first step.
D=(--data=synthetic --train-size=512 --steps=3 --batch=32 --world=2 --test-data=none --out="$OUT")
t_fail drop_event_copy 1 "'input' (batch 0) on stream 'compute' reads device buffer 'batch buffer 0', which copy #" \
    $P "${D[@]}" --drop-event=copy
t_fail drop_event_bucket_ready 1 "'all-reduce' (batch 0) on stream 'communication' reads device buffer 'gradients', which kernel #" \
    $P "${D[@]}" --drop-event=bucket-ready
t_fail drop_event_bucket_done 1 "'average a bucket' (batch 0) on stream 'compute' reads device buffer 'gradients', which kernel #" \
    $P "${D[@]}" --drop-event=bucket-done
t_fail drop_event_bucket_ready_fp16 1 "on stream 'communication' reads device buffer 'a bucket's 16-bit copy'" \
    $P "${D[@]}" --drop-event=bucket-ready --compress=fp16
t_fail drop_event_bucket_done_bf16 1 "'widen a bucket' (batch 0) on stream 'compute' reads device buffer 'a bucket's 16-bit copy'" \
    $P "${D[@]}" --drop-event=bucket-done --compress=bf16
t_ok events_kept $P "${D[@]}" --compress=fp16 --accumulate=2
# where the model computes: refusals in one line, naming the flag
t_fail nccl_on_the_simulated_device 2 "--backend=nccl with --device=sim: NCCL all-reduces GPU memory" \
    $P "${D[@]}" --backend=nccl --device=sim
t_fail device_unknown 2 "--device: unknown value 'tpu' (sim or cuda)" $P "${D[@]}" --device=tpu
# --write-check: the device itself says which detector watched the loader slots' copies; either trains
# the same (the same epochs.csv, bytes for bytes); an unknown one is named
t_out write_check_trap "copies, by a write trap on their pages (--write-check=trap)" \
    $P "${D[@]}" --write-check=trap --out="$T_TMP/wc-trap"
t_out write_check_bytes "copies, by their bytes (--write-check=bytes)" \
    $P "${D[@]}" --write-check=bytes --out="$T_TMP/wc-bytes"
if cmp -s "$T_TMP/wc-trap/epochs.csv" "$T_TMP/wc-bytes/epochs.csv"; then t_pass write_check_same_training
else t_failed write_check_same_training "epochs.csv differs between --write-check=trap and bytes"; fi
t_fail write_check_unknown 2 "--write-check: unknown value 'page' (bytes or trap)" $P "${D[@]}" --write-check=page
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    # "no GPU found" in a CUDA build, "this build has no CUDA support" in one without
    t_fail device_cuda_without_a_gpu 2 "--device=cuda: device: " $P "${D[@]}" --device=cuda
    t_fail nccl_without_a_gpu 2 "--device=cuda (what --backend=nccl needs): device: " $P "${D[@]}" --backend=nccl
else
    t_skip device_cuda_without_a_gpu "this machine has a GPU (tests/gpu/chapter6.sh runs it)"
fi

# --hw: the simulated device's link is that GPU system's PCIe host link (the banner names it), the
# default is unchanged, and --hw is refused where it would change nothing or be overridden
H=(--world=2 --train-size=256 --epochs=1 --batch=32 --data=synthetic --test-data=none --out="$T_TMP/hw")
t_out default_link "  simulated device on PCIe Gen4 x16: 28.81 GB/s, 5.0 us per copy (modelled)" $P "${H[@]}"
t_out hw_link "  simulated device on PCIe Gen5 x16 (H100 SXM5 80GB): 57.61 GB/s, 5.0 us per copy (modelled)" \
    $P "${H[@]}" --hw=h100-sxm
t_out hw_list "a100       A100 SXM4 80GB: FP32 19.5 TFLOP/s peak (GEMMs at 75 % of it), HBM2e 2039 GB/s" $P --hw=list
t_fail unknown_hw 2 "chapter-6: --hw: unknown hardware profile 'h200' (known: h100-sxm, h100-pcie, a100, rtx4090)" \
    $P --hw=h200
t_fail hw_with_drop_event_copy 2 "--hw with --drop-event=copy: the story sets its own congested link" \
    $P "${H[@]}" --hw=a100 --drop-event=copy
t_fail hw_with_demo 2 "--hw does nothing with --demo or --bench" $P --demo=uneven --hw=a100

# --topology and --algo: the simulator's modelled cluster; the banner names the nodes, the network
# and the algorithm, hier keeps the replicas identical, and the flags are refused where they would
# model nothing
HT=(--train-size=256 --epochs=1 --batch=32 --data=synthetic --test-data=none --out="$T_TMP/hw")
t_out topology_banner "  2 nodes of 2 GPUs, joined by 8x InfiniBand NDR: 400.0 GB/s a node, 14.0 us a hop; all-reduce: hier" \
    $P "${HT[@]}" --topology=2x2 --algo=hier --hw=h100-sxm
t_out topology_hier_replicas "replicas: every rank's parameters were the same bits at every step" \
    $P "${HT[@]}" --topology=2x2 --algo=hier
# the modelled all-reduce of the one bucket (940 KB) on 2 nodes of 4 H100s: the flat ring crosses the
# network on every one of its 14 steps, hier only in its middle phase (the figures are modelled: exact)
HN=(--train-size=512 --epochs=1 --batch=32 --data=synthetic --test-data=none --topology=2x4 --hw=h100-sxm)
t_out topology_ring_crosses_nodes "bucket 0: its all-reduce (230 us)" $P "${HN[@]}" --out="$T_TMP/hw"
t_out topology_hier_inside_first "bucket 0: its all-reduce (57 us)" $P "${HN[@]}" --algo=hier --out="$T_TMP/hw"
# ... and the trace says which link: per all-reduce the ring's 14 steps each hold 1 of a node's 8 network
# ports, hier's 2 steps across nodes hold 4 (one ring a GPU); the Gantt chart's last rows are the links'
if command -v python3 > /dev/null; then
    for algo in ring hier; do
        t_run $P "${HN[@]}" --algo=$algo --out="$T_TMP/hw" --trace="$T_TMP/hw/$algo.json" --trace-steps=4
        got=$(python3 - "$T_TMP/hw/$algo.json" <<'EOF'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
net = [e for e in ev if e.get("cat") == "link" and e["name"] == "network between nodes"]
per = collections.Counter(e["args"]["seq"] for e in net)
print(sorted(set(per.values())), sorted({e["args"]["share"] for e in net}))
# every rank launches the one bucket at once: its bar is the collective, and the links fill it end to end
bars = {e["args"]["seq"]: e for e in ev if e.get("cat") == "comm" and e["pid"] == 0}
for seq, bar in bars.items():
    ls = [e for e in ev if e.get("cat") == "link" and e["args"]["seq"] == seq]
    if abs(min(e["ts"] for e in ls) - bar["ts"]) > 0.01 or \
       abs(max(e["ts"] + e["dur"] for e in ls) - bar["ts"] - bar["dur"]) > 0.01:
        print("all-reduce #%d: links from %.3f to %.3f us, its bar from %.3f to %.3f" % (
            seq, min(e["ts"] for e in ls), max(e["ts"] + e["dur"] for e in ls), bar["ts"], bar["ts"] + bar["dur"]))
EOF
)
        want=$([ $algo = ring ] && echo "[14] [0.125]" || echo "[2] [0.5]")
        if [ "$T_STATUS" = 0 ] && [ "$got" = "$want" ] && grep -q '^8,[0-9]*,10,links: network between nodes,' "$T_TMP/hw/gantt.csv"
        then t_pass "topology_links_$algo"
        else t_failed "topology_links_$algo" "exit $T_STATUS; network spans per all-reduce and shares: $got, want $want"; fi
    done
else
    t_skip topology_links "python3 is not installed"
fi
# --same-bits: one global batch of 64 on 1, 2, 4 and 8 ranks gives the same parameters, bit for bit (4000
# records: 62 full global batches and a last one of 32, which cuts into the 8 atoms too); the default mode
# does not (the rounding order changes with W); a checkpoint of 4 ranks resumes on 2 and on 8 to the same
# end; outside the mode another world resumes with a warning; each refusal names the flag and why
SB=(--same-bits --global-batch=64 --train-size=4000 --epochs=2 --test-data=none --out="$T_TMP/sb")
for w in 1 2 4 8; do
    t_ok same_bits.w$w $P "${SB[@]}" --world=$w --save="$T_TMP/sb$w.safetensors"
done
for w in 2 4 8; do
    t_out same_bits.w$w.equals_w1 "tensordiff: the same bits" "$BUILD/tools/tensordiff" "$T_TMP/sb1.safetensors" \
        "$T_TMP/sb$w.safetensors"
done
DM=(--global-batch=64 --train-size=4000 --epochs=2 --test-data=none --out="$T_TMP/sb")
for w in 1 4; do
    t_ok default_mode.w$w $P "${DM[@]}" --world=$w --save="$T_TMP/default$w.safetensors"
done
t_fail default_mode.w4_differs_from_w1 1 "tensordiff: " "$BUILD/tools/tensordiff" "$T_TMP/default1.safetensors" \
    "$T_TMP/default4.safetensors"
t_ok same_bits.w4_stops $P "${SB[@]}" --world=4 --steps=70 --checkpoint="$T_TMP/sbck"
for w in 2 8; do
    t_ok same_bits.resume_w$w $P "${SB[@]}" --world=$w --resume="$T_TMP/sbck" --save="$T_TMP/sbres$w.safetensors"
    t_out same_bits.resumed_on_w$w.equals_uninterrupted "tensordiff: the same bits" "$BUILD/tools/tensordiff" \
        "$T_TMP/sb1.safetensors" "$T_TMP/sbres$w.safetensors"
done
t_ok default_mode.w4_stops $P "${DM[@]}" --world=4 --steps=70 --checkpoint="$T_TMP/dmck"
t_out default_mode.resume_w2_warns "the ranks' gradients are summed in another order, so the bits will differ" \
    $P "${DM[@]}" --world=2 --resume="$T_TMP/dmck"
t_fail same_bits.resume_without_the_mode 1 "written with --same-bits; this run has it off" \
    $P "${DM[@]}" --world=2 --resume="$T_TMP/sbck"
t_fail default_mode.resume_other_global_batch 1 "another world can continue only with the same global batch: resume with --global-batch=64" \
    $P --batch=64 --train-size=4000 --epochs=2 --test-data=none --world=2 --resume="$T_TMP/dmck"
SR=(--epochs=1 --train-size=4000 --test-data=none)
t_fail same_bits.world3 1 "--same-bits with 3 ranks: every global batch is cut into 8 atoms" \
    $P "${SR[@]}" --same-bits --global-batch=48 --world=3
t_fail same_bits.global_batch_20 1 "--same-bits: a global batch of 20 samples (10 a rank on 2) does not cut into 8 atoms" \
    $P "${SR[@]}" --same-bits --global-batch=20 --world=2
t_fail same_bits.train_size 1 "--same-bits: 4004 training records: use a training size that 8 divides" \
    $P "${SR[@]}" --same-bits --global-batch=64 --world=2 --train-size=4004
t_fail same_bits.batchnorm 1 "--same-bits with --batchnorm: BatchNorm1d normalises by each rank's batch" \
    $P "${SR[@]}" --same-bits --global-batch=64 --world=2 --batchnorm
t_fail same_bits.compress 1 "--same-bits with --compress: the 16-bit rounding" \
    $P "${SR[@]}" --same-bits --global-batch=64 --world=2 --compress=bf16
t_fail same_bits.accumulate 1 "--same-bits with --accumulate=2" \
    $P "${SR[@]}" --same-bits --global-batch=64 --world=2 --accumulate=2
t_fail global_batch_and_batch 2 "--batch and --global-batch both give the batch" $P "${SR[@]}" --global-batch=64 --batch=32
t_fail global_batch_world3 2 "--global-batch=64 on 3 ranks: the batch per rank is G / W" $P "${SR[@]}" --global-batch=64 --world=3
t_fail topology_with_world 2 "--world=2 with --topology=2x2, which is 4 ranks: give one of them" \
    $P "${H[@]}" --topology=2x2
t_fail topology_bad 2 "chapter-6: --topology: topology '2x'" $P --topology=2x
t_fail topology_too_big 2 "--topology: topology '9x8': 72 ranks, more than --world's 64" $P --topology=9x8
t_fail algo_unknown 2 "chapter-6: --algo: unknown value 'naive' (ring, tree or hier)" $P --algo=naive
t_fail algo_not_sim 2 "--topology and --algo model the simulator's cluster: under --backend=mpi" \
    $P --backend=mpi --algo=hier
