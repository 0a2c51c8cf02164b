# comm_mpi: the MPI backend under a real mpirun, at 2 and 4 processes on
# localhost (oversubscribed: CI machines may have 2 cores).
#
# build/tests/unit/test_comm_mpi holds the checks (see its header): each test runs
# as its own job, since a process may initialize MPI only once. A job passes
# when mpirun exits 0, which it does only when every rank passed. The timeout
# tests must instead end the job with MPI_Abort, after the waiting ranks
# named the rank that did not come, or the collective it went to instead; a
# rank that fails in its own code must end the others' waits at once, naming
# itself and its phase, with no MPI call on any rank after it freed the
# buffer of a collective it gave up; a rank stopped (SIGSTOP) before the job's start or
# after its last collective must not hold the others forever. Each of these
# runs under a time limit far below what a hang would take.
# Last, build/chapter-5 --backend=mpi --check must print nccl-tests' table with
# no wrong element, with the watchdog and without it (--timeout=0: blocking
# MPI_Allreduce).
. "$(dirname "$0")/../harness/lib.sh"

# Open MPI refuses to start as root unless told to (tests/run sets these too).
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

prog=$BUILD/tests/unit/test_comm_mpi

# A rank the tests stopped (SIGSTOP) is ended by the job's abort; should a
# regression leave it stopped, it is ended here, by the pid it wrote.
end_stopped() {
    if [ -s "$T_TMP/stopped.pid" ]; then kill -KILL "$(cat "$T_TMP/stopped.pid")" 2>/dev/null || true; fi
    rm -f "$T_TMP/stopped.pid"
}
if [ "${SUITE:-plain}" != plain ]; then
    t_skip mpirun "the $SUITE suite is built without MPI"
elif ! command -v mpirun >/dev/null 2>&1; then
    t_skip mpirun "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"
elif ! grep -q 'HAVE_MPI := 1' "$BUILD/config.mk" 2>/dev/null || [ ! -x "$prog" ]; then
    t_skip mpirun "this build has no MPI support"
else
    tests=$("$prog" --help | sed -n 's/^  \(comm_mpi_[a-z0-9_]*\)$/\1/p' | grep -v '^comm_mpi_timeout_aborts$')
    for np in 2 4; do
        for t in $tests; do
            t_ok "np$np.${t#comm_mpi_}" mpirun --oversubscribe -np "$np" "$prog" "$t"
        done
        # a rank that never arrives is named by the ranks that wait for it, as in the simulator
        COMM_MPI_TEST_ABORT=missing t_fail "np$np.timeout_names_the_missing_rank" nonzero \
            "rank 1: did not answer within 1 s: it is in no collective of this communicator" \
            mpirun --oversubscribe -np "$np" "$prog" comm_mpi_timeout_aborts
        # a rank in another collective says which (either side, at np 2)
        COMM_MPI_TEST_ABORT=other t_fail "np$np.timeout_names_a_rank_in_another_collective" nonzero \
            ") instead; last completed collective #1 (barrier)" \
            mpirun --oversubscribe -np "$np" "$prog" comm_mpi_timeout_aborts
        # a rank that closed its communicator early is named there (either side)
        COMM_MPI_TEST_ABORT=closed t_fail "np$np.timeout_names_a_rank_that_closed" nonzero \
            "comm_close's final barrier" mpirun --oversubscribe -np "$np" "$prog" comm_mpi_timeout_aborts
        # after the first timeout, the requests still posted are given up at once, not waited out again
        COMM_MPI_TEST_ABORT=pending t_fail "np$np.timeout_abandons_the_other_requests" nonzero \
            "collective #4 (allreduce sum, 16 x float32): abandoned: an earlier failure broke the communicator" \
            mpirun --oversubscribe -np "$np" "$prog" comm_mpi_timeout_aborts
        # A failure in a rank's own code: rank 1 says it, and rank 0, whose watchdog is 11 days long,
        # learns it at once from rank 1's notice, in collective #2; #3 when rank 1 had started #2 first,
        # which then completes (any failed check in the test says where). A collective that fails to
        # start on rank 1 alone is its own failure too, told like any other.
        for how in failed joined start-failed in-flight; do
            T_TIMEOUT=30 COMM_MPI_TEST_ABORT=$how t_run mpirun --oversubscribe -np "$np" "$prog" comm_mpi_timeout_aborts
            seq=$([ $how = joined ] && echo 3 || echo 2)
            said="rank 1 failed while saving a test file: test.bin: disk full"
            if [ $how = start-failed ]; then
                said="rank 1 failed while reducing too many elements: mpi: rank 1: collective #2 (allreduce sum, \
2147483648 x float32): MPI counts are int: at most 2147483647 elements per call"
            fi
            heard="rank 0 diagnosed: mpi: rank 0: collective #$seq (allreduce sum, 16 x float32): $said"
            if [ "$T_STATUS" = 124 ] || [ "$T_STATUS" = 137 ]; then t_failed "np$np.failure_told.$how" "timed out"
            elif grep -q "test_comm_mpi.c:[0-9]*: \|called after this rank freed" <<<"$T_OUT"; then
                t_failed "np$np.failure_told.$how" "$(grep "test_comm_mpi.c:[0-9]*: \|called after this rank freed" <<<"$T_OUT" | head -n 2)"
            elif ! grep -qF "mpi: $said" <<<"$T_OUT"; then
                t_failed "np$np.failure_told.$how" "rank 1 did not say its failure: $(tail -n 3 <<<"$T_OUT")"
            elif ! grep -qF "$heard" <<<"$T_OUT"; then
                t_failed "np$np.failure_told.$how" "rank 0 did not hear it: $(tail -n 3 <<<"$T_OUT")"
            else t_pass "np$np.failure_told.$how"; fi
        done
        # stopped after its last collective: named by the final barrier of comm_close, not awaited in MPI_Finalize
        T_TIMEOUT=30 COMM_MPI_TEST_ABORT=stop-end COMM_MPI_TEST_PIDFILE=$T_TMP/stopped.pid \
            t_fail "np$np.stopped_at_the_end_is_named" nonzero \
            "rank 1: did not answer within 1 s: it is in no collective of this communicator (running its own code, stopped" \
            mpirun --oversubscribe -np "$np" "$prog" comm_mpi_timeout_aborts
        end_stopped
        # stopped before MPI_Init_thread: the others' guard ends the job after 10 s (its floor, past the
        # test's 1 s timeout), each saying that it waits and what the rank it waits for may be doing
        T_TIMEOUT=40 COMM_MPI_TEST_ABORT=stop-start COMM_MPI_TEST_PIDFILE=$T_TMP/stopped.pid \
            t_fail "np$np.stopped_at_the_start_ends_the_job" nonzero "has waited 10 s in MPI_Init_thread" \
            mpirun --oversubscribe -np "$np" "$prog" comm_mpi_timeout_aborts
        end_stopped
        # (the test runner reports what the guard wrote, on the line of the test it ended)
        t_lines "np$np.stopped_at_the_start_whole_line" "FAIL test_comm_mpi.comm_mpi_timeout_aborts: " \
"FAIL test_comm_mpi\.comm_mpi_timeout_aborts: mpi: rank (0|[2-9]) has waited 10 s in MPI_Init_thread \(the longer \
of the timeout, 1 s, and 10 s\) for every rank of the job, and some rank has not come: still starting \(opening its \
data, on a slow disk or a loaded machine\), or stopped, frozen or dead; MPI does not say which\. Ending this \
process, and with it the job \[exited with status 1\]"
        # the chapter's benchmark under mpirun: nccl-tests' #wrong columns must
        # stay 0, counts 1 (fewer than W) to 64K, results compared across ranks
        t_out "np$np.chapter5_table" ": 0 OK" mpirun --oversubscribe -np "$np" "$BUILD/chapter-5" --backend=mpi \
            --check --min-bytes=4 --max-bytes=256K --step-factor=8 --iters=2 --warmup=1
        # without a watchdog (what make bench runs): blocking MPI_Allreduce, same results
        t_out "np$np.chapter5_table_untimed" "# Out of bounds values : 0 OK" mpirun --oversubscribe -np "$np" \
            "$BUILD/chapter-5" --backend=mpi --timeout=0 --check --min-bytes=4 --max-bytes=64K --step-factor=16 \
            --iters=2 --warmup=1
    done
    # MPI picks its own algorithm: --algo would be ignored, so it is refused
    t_fail algo_refused_with_mpi 2 "--algo does nothing with --backend=mpi" "$BUILD/chapter-5" --backend=mpi --algo=tree
    # --world belongs to thread backends; under mpirun a different one used to be ignored
    t_fail np2.world_flag_refused nonzero "--world=4: this process is one rank of a job its launcher started" \
        mpirun --oversubscribe -np 2 "$BUILD/chapter-5" --backend=mpi --world=4 --max-bytes=4K
fi
