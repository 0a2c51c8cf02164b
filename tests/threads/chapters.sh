# chapters: the chapter programs whose ranks and workers are threads, run by
# the tsan suite (tests/run --suite=tsan, `make tsan`) on its ThreadSanitizer
# build, where the first data race stops a program (halt_on_error=1). The
# unit tests cover the modules; these cover what the chapters do with them on
# threads: chapter 5's sweep (every rank fits its own cost model) and fault
# demos, chapter 3's loader workers, chapter 2's rank threads, chapter 6's
# whole data path.
. "$(dirname "$0")/../harness/lib.sh"

# A race is reported only in a run where ThreadSanitizer records both accesses
# unordered; one short sweep caught the cost model's shared alpha one time in
# four to one in ten, depending on the machine and its load, so sixteen
# sweeps of 8 ranks and 3 algorithms each. Most of a sweep's time under
# ThreadSanitizer is its calibration (16 MiB copied and summed), not the sizes.
race_free_repeatedly() { # NAME RUNS CMD...
    local name=$1 runs=$2 i
    shift 2
    for i in $(seq "$runs"); do
        t_run "$@"
        if [ "$T_STATUS" != 0 ]; then
            t_failed "$name" "run $i of $runs: exit $T_STATUS from: $*; output: $( (grep -m1 -A6 'WARNING' <<<"$T_OUT" || tail -n 5 <<<"$T_OUT") | tr '\n' ' ')"
            return
        fi
    done
    t_pass "$name"
}
race_free_repeatedly chapter5_sweep_fits_the_model_per_rank 16 \
    "$BUILD/chapter-5" --world=8 --algo=all --min-bytes=4 --max-bytes=1K --step-factor=16 --iters=1 --warmup=0
# hierarchical all-reduce: three rings one after the other on shared channels, uneven slices (3x2)
race_free_repeatedly chapter5_hier_on_3x2 4 \
    "$BUILD/chapter-5" --topology=3x2 --algo=hier --min-bytes=28 --max-bytes=300K --step-factor=147 --iters=1 \
    --warmup=0 --check
t_fail chapter5_fault_demos 1 "rank 1's result differs from the other 3 ranks'" "$BUILD/chapter-5" --demo=all
t_fail chapter5_watchdog_wakes_a_sleeper 1 "rank 1: sleeping in an injected delay" \
    "$BUILD/chapter-5" --world=3 --fault=delay:1@2:600000 --timeout=1
t_out chapter3_workers "samples/s" "$BUILD/chapter-3" --bench --data=synthetic --workers=3 --batch=64 --epochs=1
t_ok chapter2_rank_threads "$BUILD/chapter-2" --size=1000 --world=4 --epochs=2
# chapter 6: the whole data path on 4 rank threads, each with its loader
# workers and device engines, running their queued collectives themselves: BatchNorm
# (broadcast_buffers), accumulation (no_sync), small buckets all-reduced under
# backward, the timeline; 8 batches per rank and epoch, so the loader's ring
# (4 slots) and the pinned slots are reused within an epoch and across two.
# Without the test set: evaluating 10000 images on every rank after each
# epoch cost 40% of the run, and the save-timeout demo's fix run evaluates
# on every rank.
t_out chapter6_training "replicas: every rank's parameters and buffers were the same bits at every step" \
    "$BUILD/chapter-6" --train-size=1024 --epochs=2 --batch=32 --workers=2 --bucket-cap-mb=0.1 --first-bucket-kb=50 \
    --batchnorm --accumulate=2 --test-data=none --trace="$T_TMP/trace.json" --out="$T_TMP/out"
# two failure demos, where the watchdog stops ranks in the middle of
# collectives: uneven, ranks in different collectives (the fingerprints
# disagree), its fix run without the test set (half the demo's time);
# save-timeout, rank 0 in its own code while the others wait, its fix run
# evaluating on every rank
t_out chapter6_demo_uneven "every broken run failed the way it should" "$BUILD/chapter-6" --demo=uneven --test-data=none
t_out chapter6_demo_save_timeout "every broken run failed the way it should" "$BUILD/chapter-6" --demo=save-timeout
