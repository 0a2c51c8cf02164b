# chapter6_mpi.sh: chapter 6 under a real mpirun, one process per rank
# (--backend=mpi, MPI on the CPU), at 2 and 4 processes on localhost
# (oversubscribed: CI machines may have 2 cores), against the simulator's run
# of the same job. Same data, sampler, initialisation and buckets; only the
# all-reduce differs (Open MPI's algorithm against the simulator's ring):
#   -np 2: the same bits. A sum of two floats is one correctly rounded
#          addition, the same whichever rank adds, and dividing by 2 is exact;
#          so every step's average, hence every parameter, is the same.
#   -np 4: a sum of four can be rounded in several orders, and Open MPI's
#          order is not the ring's. A last-bit difference can put a
#          pre-activation on the other side of ReLU, and with Adam the two
#          runs then part ways, both right (the simulator against itself on
#          OpenBLAS's Haswell and Prescott kernels: 1e-5 to 6e-3 apart after
#          these 40 steps). So at 4 the job is plain SGD at lr 0.01, where
#          such a flip moves the run by 3e-4 at most and is not carried on
#          (tests/crosscheck/chapter6_torch.py, RUN_TOLERANCE): within 2e-3
#          of each tensor's largest element (measured: 1.2e-7 to 1.7e-7).
# Also: the banner at 2 and 3 processes says the world, global batch and
# share mpirun gave; --world and --backend=sim are refused under mpirun, and
# --backend=mpi under torchrun, naming why; a verdict every rank reaches (a
# damaged --resume, the replica check's after --fault=flip) printed whole by
# every process, no rank blamed and no MPI_Abort; and when rank 0 cannot save,
# every process ends at once (well within --timeout), every line printed
# naming rank 0 and "saving", none blaming another rank; so does one where
# rank 1 fails inside a step while rank 0 has buckets in flight.
# MPI adds host memory, so every bucket goes through pinned host memory on
# the reducer's communication stream (a D2H copy before the all-reduce, an
# H2D copy after): the same bits as the simulator's in-place all-reduce (the
# np2 run above, and compressed below), and a left-out event named by the
# detector at the staging copy that reads the bucket. And its collectives
# take modelled time, as the simulator's: the same all-reduce bars, and the
# same trace under load.
. "$(dirname "$0")/../harness/lib.sh"
t_need_mpirun chapter6_mpirun || exit 0
P=$BUILD/chapter-6
TD=$BUILD/tools/tensordiff
job=(--train-size=2048 --epochs=2 --batch=32 --steps=40 --bucket-cap-mb=0.1 --first-bucket-kb=50 --workers=1)
for np in 2 4; do
    flags=("${job[@]}")
    if [ $np = 4 ]; then flags+=(--optimizer=sgd --lr=0.01 --momentum=0 --schedule=constant); fi
    t_ok "np$np.sim" $P "${flags[@]}" --world=$np --save="$T_TMP/sim$np.safetensors" --out="$T_TMP/sim"
    t_out "np$np.mpirun" "test accuracy: " mpirun --oversubscribe -np $np $P --backend=mpi --check "${flags[@]}" \
        --save="$T_TMP/mpi$np.safetensors" --out="$T_TMP/mpi"
done
t_out np2.same_bits "tensordiff: the same bits" "$TD" "$T_TMP/sim2.safetensors" "$T_TMP/mpi2.safetensors"
t_out np4.float32_tolerance "tensordiff: " "$TD" --tolerance=2e-3 "$T_TMP/sim4.safetensors" "$T_TMP/mpi4.safetensors"
# modelled time under mpirun (processes on simulated devices): each collective moves the ranks' modelled
# clocks as the simulator's communicator would. One bucket, launched by both ranks at once: its all-reduce
# bars last what the simulator's do (10.6 us for 940 KB on two A100s' NVLink), with the same links under them,
# and the trace is the same bytes run quietly and beside two busy processes
mt=(--data=synthetic --test-data=none --train-size=512 --batch=32 --epochs=1 --trace-steps=8)
t_ok modelled.sim $P "${mt[@]}" --world=2 --out="$T_TMP/msim" --trace="$T_TMP/msim/trace.json"
t_same_under_load modelled.same_under_load "trace.json" mpirun --oversubscribe -np 2 $P --backend=mpi --check \
    "${mt[@]}" --out="$T_TMP/vt" --trace="$T_TMP/vt/trace.json"
why=$(python3 - "$T_TMP/msim/trace.json" "$T_TMP/vt/trace.json" <<'EOF'
import collections, json, sys
def bars(path):
    ev = json.load(open(path))["traceEvents"]
    comm = collections.Counter((e["pid"], round(e["dur"], 3), e["args"]["bytes"]) for e in ev if e.get("cat") == "comm")
    link = collections.Counter((e["name"], round(e["dur"], 3), e["args"]["share"]) for e in ev if e.get("cat") == "link")
    return comm, link
(sc, sl), (mc, ml) = bars(sys.argv[1]), bars(sys.argv[2])
if not sc or sc != mc:
    print("all-reduce bars: simulator %s, mpirun %s" % (sc.most_common(2), mc.most_common(2)))
elif not sl or sl != ml:
    print("links: simulator %d spans, mpirun %d" % (sum(sl.values()), sum(ml.values())))
EOF
)
if [ -z "$why" ] && grep -q "every time below is modelled, the mpi collectives' too" "$T_TMP/vt-quiet.txt"
then t_pass modelled.allreduce_as_the_simulator
else t_failed modelled.allreduce_as_the_simulator "${why:-no banner line: $(head -n 8 "$T_TMP/vt-quiet.txt")}"; fi
small=(--data=synthetic --test-data=none --train-size=512 --batch=32 --steps=3)
t_ok staged_fp16.sim $P "${small[@]}" --world=2 --compress=fp16 --batchnorm --save="$T_TMP/sim16.safetensors" --out="$T_TMP/sim"
t_ok staged_fp16.mpirun mpirun --oversubscribe -np 2 $P --backend=mpi "${small[@]}" --compress=fp16 --batchnorm \
    --save="$T_TMP/mpi16.safetensors" --out="$T_TMP/mpi"
t_out staged_fp16.same_bits "tensordiff: the same bits" "$TD" "$T_TMP/sim16.safetensors" "$T_TMP/mpi16.safetensors"
t_fail staged_drop_event 1 "to pinned 'reducer staging' from 'gradients', batch 0) on stream 'communication' reads device buffer 'gradients'" \
    mpirun --oversubscribe -np 2 $P --backend=mpi "${small[@]}" --drop-event=bucket-ready --out="$T_TMP/mpi"
# --same-bits: the same parameters at 1 simulated rank and under mpirun -np 2 and 4 (one global batch of 64;
# 2000 records leave a last global batch of 16, which cuts into 8 atoms too), and a -np 4 checkpoint
# resumed at -np 2, exactly
sb=(--same-bits --global-batch=64 --train-size=2000 --epochs=2 --steps=40 --test-data=none)
t_ok same_bits.sim1 $P "${sb[@]}" --world=1 --save="$T_TMP/sb1.safetensors" --out="$T_TMP/sim"
for np in 2 4; do
    t_ok same_bits.np$np mpirun --oversubscribe -np $np $P --backend=mpi "${sb[@]}" --save="$T_TMP/sbmpi$np.safetensors" \
        --out="$T_TMP/mpi"
    t_out same_bits.np$np.equals_one_rank "tensordiff: the same bits" "$TD" "$T_TMP/sb1.safetensors" \
        "$T_TMP/sbmpi$np.safetensors"
done
t_ok same_bits.np4_stops mpirun --oversubscribe -np 4 $P --backend=mpi "${sb[@]}" --steps=20 --checkpoint="$T_TMP/sbck" \
    --out="$T_TMP/mpi"
t_ok same_bits.np2_resumes mpirun --oversubscribe -np 2 $P --backend=mpi "${sb[@]}" --resume="$T_TMP/sbck" \
    --save="$T_TMP/sbres.safetensors" --out="$T_TMP/mpi"
t_out same_bits.resumed_on_2_equals_one_rank "tensordiff: the same bits" "$TD" "$T_TMP/sb1.safetensors" \
    "$T_TMP/sbres.safetensors"
# a checkpoint written under mpirun resumes there, exactly
t_ok np2.checkpoint mpirun --oversubscribe -np 2 $P --backend=mpi "${job[@]}" --steps=13 --checkpoint="$T_TMP/ck" \
    --out="$T_TMP/mpi"
t_ok np2.resume mpirun --oversubscribe -np 2 $P --backend=mpi "${job[@]}" --resume="$T_TMP/ck" \
    --save="$T_TMP/mpi2-resumed.safetensors" --out="$T_TMP/mpi"
t_out np2.resume_exact "tensordiff: the same bits" "$TD" "$T_TMP/mpi2.safetensors" "$T_TMP/mpi2-resumed.safetensors"
# A verdict every rank reaches is the job's: every process prints it whole, as itself, no rank blamed
# for it ("rank 1 failed while ..."), and the job ends without MPI_Abort: a damaged --resume that every
# rank refuses before training, and the replica check's (a bit flipped on rank 1 after step 5)
mkdir -p "$T_TMP/ck-edited"
LC_ALL=C sed 's/"step":"13"/"step":"14"/' "$T_TMP/ck/checkpoint.safetensors" > "$T_TMP/ck-edited/checkpoint.safetensors"
t_fail np2.resume_edited_alone nonzero "does not match its checksum" mpirun --oversubscribe -np 2 $P --backend=mpi \
    "${job[@]}" --resume="$T_TMP/ck-edited" --out="$T_TMP/mpi"
re_dir=$(t_ere "$T_TMP/ck-edited")
t_lines np2.resume_edited_alone_whole_line "chapter-6: " \
    "chapter-6: --resume: $re_dir/checkpoint\\.safetensors: metadata \"step\" \\(\"14\"\\) does not match its checksum.*"
said_alone() { # NAME: the last job's processes blamed no rank, and none called MPI_Abort
    local blamed
    blamed=$(grep "MPI_ABORT was invoked\|failed while" <<<"$T_OUT" || true)
    if [ -n "$blamed" ]; then t_failed "$1" "$(head -n 2 <<<"$blamed")"; else t_pass "$1"; fi
}
said_alone np2.resume_edited_alone_no_abort
t_fail np3.replica_verdict_alone nonzero "step 5: rank 1 differs" mpirun --oversubscribe -np 3 $P --backend=mpi \
    --check --train-size=2048 --epochs=1 --batch=32 --test-data=none --out="$T_TMP/mpi" --fault=flip:1@5
t_lines np3.replica_verdict_alone_whole_line "chapter-6: " \
    'chapter-6: step 5: rank 1 differs from the other 2 ranks in fc3\.bias\[5\]: [-0-9.e+]+ on rank 1, [-0-9.e+]+ on the others'
said_alone np3.replica_verdict_alone_no_abort
t_fail np2.fault_kill_refused 2 "--fault=kill:1@3: kill, delay and skip are the simulator's" \
    mpirun --oversubscribe -np 2 $P --backend=mpi --fault=kill:1@3
# the banner and the summary say what the launcher gave, not --world's default of 4
for np in 2 3; do
    t_out "np$np.banner_world" "chapter 6: data-parallel training, $np ranks (mpi: one process per rank, started by mpirun)" \
        mpirun --oversubscribe -np $np $P --backend=mpi --train-size=1536 --epochs=1 --steps=2 --test-data=none \
        --out="$T_TMP/mpi"
    share=$(( (1536 + np - 1) / np ))
    t_said "np$np.banner_global_batch" "batch 32 per rank ($((32 * np)) global)"
    t_said "np$np.banner_share" "each rank: $share samples, $(( (share + 31) / 32 )) batches of 32"
    t_said "np$np.summary_samples" "2 steps, $((2 * 32 * np)) samples in"
done
# torchrun's processes with the MPI backend: each would be an MPI world of 1 training alone
t_fail torchrun_with_mpi 1 "torchrun started this process as one of 2, but its mpi communicator sees a world of 1" \
    env RANK=0 WORLD_SIZE=2 $P --backend=mpi --train-size=1536 --epochs=1 --test-data=none --out="$T_TMP/mpi"
t_fail np2.world_refused nonzero "--world=4: this process is one rank of a job mpirun started" \
    mpirun --oversubscribe -np 2 $P --backend=mpi --world=4
t_fail np2.sim_refused nonzero "a launcher (mpirun or torchrun) started this process as one of 2" \
    mpirun --oversubscribe -np 2 $P --world=2

# Rank 1 fails in step 5's forward (record 257's label is 200: the first sample of its fifth batch, with
# --no-shuffle at 2 ranks) while rank 0 has step 5's buckets in flight: rank 0 hears it in the first
# bucket's wait, gives the others up, frees them, and the job ends in rank 1's MPI_Abort, every line
# naming rank 1 and its step, no rank calling MPI after freeing a bucket (tests/mpi/comm_mpi.sh checks
# that with MPI's profiling interface), and at once: the watchdog is 60 s, the time limit 30
bad=$T_TMP/badlabel
t_idx_bad_label "$bad" 2048 257
T_TIMEOUT=30 t_fail np2.step_failure_with_buckets_in_flight nonzero "rank 1 failed while training step 5" \
    mpirun --oversubscribe -np 2 $P --backend=mpi --data="$bad-images-idx3-ubyte" --test-data=none --no-shuffle \
    --batch=32 --epochs=1 --bucket-cap-mb=0.1 --first-bucket-kb=50 --timeout=60 --out="$T_TMP/mpi"
t_lines np2.step_failure_with_buckets_in_flight_whole_lines "mpi: rank " \
    'mpi: rank (1 failed while|0: aborting the MPI job after: rank 1 failed while) training step 5: model: sample 0 of the batch has label 200, outside 0\.\.9'
t_said np2.step_failure_heard_by_rank_0 "mpi: rank 0: aborting the MPI job after: rank 1 failed while training step 5"

# Rank 0's checkpoint fails at step 4 (over the file-size limit: ulimit -f, SIGXFSZ ignored). The watchdog is
# 60 s and the job must end within 30: only rank 0's notice ends the others' waits. TCP between the ranks:
# Open MPI's shared-memory transport sizes a file of its own, which the limit would refuse.
T_TIMEOUT=30 t_run mpirun --oversubscribe --mca btl self,tcp -np 4 bash -c 'ulimit -f 256 && trap "" XFSZ && exec "$@"' \
    _ $P --backend=mpi --data=synthetic --train-size=2048 --batch=32 --test-data=none --out="$T_TMP/mpi-limited" \
    --timeout=60 --steps=8 --checkpoint="$T_TMP/ck-limited" --checkpoint-every=4
said=$(grep -E "^mpi: rank [0-9]" <<<"$T_OUT" || true)
first=$(head -n 1 <<<"$said")
others=$(grep -E "^mpi: rank [1-3]: " <<<"$said" || true)
want="rank 0 failed while saving a checkpoint to $T_TMP/ck-limited at step 4: "
if [ "$T_STATUS" = 124 ] || [ "$T_STATUS" = 137 ]; then t_failed np4.save_failure_ends_every_rank "timed out: $said"
elif [ "$T_STATUS" = 0 ]; then t_failed np4.save_failure_ends_every_rank "exit 0"
elif ! grep -qF -- "$want" <<<"$first"; then t_failed np4.save_failure_ends_every_rank "the first error does not name rank 0 saving: $first"
elif [ -z "$others" ] || grep -vqF -- "$want" <<<"$others"; then
    t_failed np4.save_failure_ends_every_rank "the other ranks do not all name rank 0 saving: $others"
else t_pass np4.save_failure_ends_every_rank; fi
