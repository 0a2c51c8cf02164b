# gpu_nccl: the NCCL backend on real GPUs (make test-gpu only). Every way of
# starting the ranks, on all the GPUs of this machine (N):
#   threads    build/chapter-5 --backend=nccl --world=N --check: nccl-tests'
#              table with #wrong = 0, counts from 1 element (fewer than N) up;
#   world 1    the same on one GPU, which must say the all-reduce is a copy;
#   mpirun     the process-rank tests (tests/unit/test_comm_mpi.c) with
#              COMM_TEST_BACKEND=nccl under mpirun -np N, one job per test
#              (the unique id travels over MPI), and the chapter's table;
#   torchrun   N processes with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
#              MASTER_PORT (the id travels over the TCP rendezvous);
# and the failures: a rank that never comes (rendezvous timeout), one rank too
# many for the GPUs. NCCL wants one GPU per rank, so on a one-GPU machine
# every multi-rank check is skipped with that reason, never passed at world 1.
# Written without a GPU at hand: see the chapter's
# chapters/05-allreduce/README.md ("What has NOT been run") for what has run where.
. "$(dirname "$0")/../harness/lib.sh"
. tools/torch_python.sh

if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
prog=$BUILD/chapter-5
table=(--backend=nccl --check --min-bytes=4 --max-bytes=64M --step-factor=4 --iters=5 --warmup=2)

t_need_gpu nccl nccl || exit 0
ngpu=$T_NGPU

one_gpu="this machine has 1 GPU: NCCL wants one per rank, and a world of 1 only copies"
t_out threads.world1_is_a_copy "only a copy" "$prog" "${table[@]}" --world=1
if [ "$ngpu" -ge 2 ]; then t_out threads.world$ngpu ": 0 OK" "$prog" "${table[@]}" --world="$ngpu"
else t_skip threads.world_of_several "$one_gpu"; fi

if command -v mpirun >/dev/null 2>&1 && grep -q 'HAVE_MPI := 1' "$BUILD/config.mk"; then
    if [ "$ngpu" -ge 2 ]; then
        tests=$("$BUILD/tests/unit/test_comm_mpi" --help | sed -n 's/^  \(comm_mpi_[a-z0-9_]*\)$/\1/p')
        for t in $tests; do
            COMM_TEST_BACKEND=nccl COMM_MPI_TEST_ABORT=1 t_ok "mpirun.np$ngpu.${t#comm_mpi_}" \
                mpirun -np "$ngpu" "$BUILD/tests/unit/test_comm_mpi" "$t"
        done
    else
        t_skip mpirun.collectives "$one_gpu (timeouts, aborts and fingerprints need 2 ranks)"
    fi
    t_out mpirun.np$ngpu.chapter5_table ": 0 OK" mpirun -np "$ngpu" "$prog" "${table[@]}"
    t_fail mpirun.one_rank_too_many nonzero "this node has $ngpu" \
        mpirun --oversubscribe -np $((ngpu + 1)) "$prog" "${table[@]}" --timeout=10
else
    t_skip mpirun "needs mpirun and an MPI build"
fi

# torchrun-style: one process per GPU, the environment torchrun would give
port=$((20000 + RANDOM % 20000))
pids=()
for ((r = 0; r < ngpu; r++)); do
    RANK=$r WORLD_SIZE=$ngpu LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout -k 5 "$T_TIMEOUT" "$prog" "${table[@]}" > "$T_TMP/rank$r.out" 2>&1 &
    pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
if [ $status = 0 ] && grep -qF ": 0 OK" "$T_TMP/rank0.out"; then t_pass torchrun.world$ngpu
else t_failed torchrun.world$ngpu "exit $status; rank 0 said: $(tail -n 5 "$T_TMP/rank0.out")"; fi

# the same under a real torchrun, when this machine has torch (its agent holds
# MASTER_PORT: the rendezvous must step aside, see lib/comm/rendezvous.h)
if py=$(torch_python); then
    # --redirects/--tee for a local rank that does not exist: see tests/mpi/launch_torchrun.sh
    t_out torchrun.real.world$ngpu ": 0 OK" "$py" -m torch.distributed.run --no_python \
        --redirects=9:1 --tee=9:1 \
        --nproc_per_node="$ngpu" --master_port=$((port + 2)) "$prog" "${table[@]}"
else
    t_skip torchrun.real "no python3 here imports torch"
fi

# a rank that never comes: rank 0 of 2 alone waits at the rendezvous, then says who is missing
t_fail torchrun.missing_rank 1 "rank(s) 1 of 2 never connected" \
    env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 1)) \
    "$prog" "${table[@]}" --timeout=3
