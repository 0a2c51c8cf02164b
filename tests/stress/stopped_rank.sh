# stopped_rank.sh: a rank that stops (SIGSTOP, as a frozen node does) under
# mpirun ends the job within the watchdog's timeout plus a bounded margin,
# every time, and is named wherever a rank can know it. `make stress` runs
# it: RUNS runs (default 50) of build/chapter-6 --backend=mpi at 4 processes
# with --timeout=5, under load (LOAD CPU hogs beside it, default 2: `yes >
# /dev/null`), each stopping one rank at one of these moments, in turn
# (MOMENTS='start end' chooses):
#
#   start  0 to 1 s after the 4 processes exist: MPI_Init_thread, the
#          opening of the communicator, the first collectives;
#   step   0.2 to 2 s after rank 0 prints the run's banner: in the middle of
#          training (inside a collective, or between two);
#   save   rank 0, while a checkpoint's temporary file exists (in its own code,
#          during a save, --checkpoint-every=1);
#   end    0 to 50 ms after the last epoch's line appears: the job's last
#          collectives, the final barrier of comm_close, MPI_Finalize (about
#          0.1 s in all).
#
# A run passes when mpirun ends within TIMEOUT + MARGIN seconds of the stop
# (the wait, the census of 1 s, MPI_Abort and mpirun's teardown on a loaded
# machine; MPI's own waits have a guard of at least 10 s) and says why: the
# stopped rank named by the others' census ("rank R: did not answer"), or,
# where no rank can name it, the guard of MPI's own waits ("rank 0 has
# waited 10 s in MPI_Init_thread ... some rank has not come": a stop before
# every rank joined the job; or MPI_Finalize's, after the job's final
# barrier).
#
# Two cases are counted apart, not failed, because no rank of the job is
# left when they happen, only mpirun:
#   after the end   the stop lands when every other rank has finished and
#                   exited, inside the stopped rank's own MPI_Finalize after
#                   its synchronization, or after it (rank 0 then writes the
#                   trace and the chart): mpirun waits for its child, as it
#                   would for any program (lib/comm/mpi/comm_mpi.c says why
#                   no rank can close that window);
#   mpirun hung     every rank has ended (the job aborted), yet mpirun does
#                   not return: Open MPI 4.1.4's mpirun can deadlock in its
#                   own PMIx_server_finalize when ranks end during their
#                   start (it also crashes there with SIGSEGV at times, after
#                   the job has ended: such a run ends in time and counts as
#                   it is).
# Each is said, and this script ends what is left (the stopped process, then
# mpirun), by pid. A stop that stops nothing (the rank had finished: kill
# succeeds on a process exiting or not yet reaped, and `end` can land there)
# is counted as missed.
#
# The few-run form (RUNS=4 LOAD=0) runs in the plain suite as tests/mpi/stopped_rank.sh.
. "$(dirname "$0")/../harness/lib.sh"
t_need_mpirun stopped_rank || exit 0
P=$BUILD/chapter-6
RUNS=${RUNS:-50}
LOAD=${LOAD:-2}
TIMEOUT=5
MARGIN=10
# Epochs of 64 steps: enough that training lasts past `step`'s 2 s (about 600
# steps a second here with 4 processes on 2 cores; 3 epochs were over in 0.3 s,
# and every `step` stop landed after the end)
EPOCHS=30

hogs=()
end_hogs() { for h in "${hogs[@]}"; do kill "$h" 2>/dev/null; done; rm -rf "$T_TMP"; }
trap end_hogs EXIT
for ((i = 0; i < LOAD; i++)); do
    yes > /dev/null &
    hogs+=($!)
done

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Sleeps a random time of $1 to $2 milliseconds.
sleep_ms_between() {
    local ms=$(($1 + RANDOM % ($2 - $1 + 1)))
    sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}

# The pid of rank $2 among the children of mpirun $1, from their launcher variable.
rank_pid() {
    local p
    for p in $(pgrep -P "$1"); do
        if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
    done
}

# Waits until rank $2 of mpirun $1 exists and prints its pid; nothing when the run ended first.
wait_for_rank() {
    local pid
    until pid=$(rank_pid "$1" "$2") && [ -n "$pid" ]; do
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.01
    done
    echo "$pid"
}

# Waits until the output file $1 holds a line matching $2, or the run $3 ended: 0 when it matched.
wait_for_line() {
    until grep -qE -- "$2" "$1"; do
        kill -0 "$3" 2>/dev/null || return 1
        sleep 0.01
    done
}

# Whether the stop sent to process $1 stopped it: 1 when the process had
# already ended (a zombie not yet reaped, or one exiting: kill succeeds on
# either and stops nothing), 0 once its state is T, or after 2 s in any other
# state (a stop still pending; the run is judged as any other).
stop_took() {
    local state i
    for ((i = 0; i < 200; i++)); do
        state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
        case $state in
        T*) return 0 ;;
        Z* | X*) return 1 ;;
        esac
        sleep 0.01
    done
}

read -r -a moments <<<"${MOMENTS:-start step save end}"
named=0 guarded=0 after_end=0 hung=0 missed=0 failed=0 worst=0
fail() { failed=$((failed + 1)); t_failed "$@"; }
for ((run = 1; run <= RUNS; run++)); do
    moment=${moments[$(((run - 1) % ${#moments[@]}))]}
    rank=$((RANDOM % 4))
    [ "$moment" = save ] && rank=0
    name=$(printf 'run%02d_%s_rank%d' "$run" "$moment" "$rank")
    out=$T_TMP/run.out ck=$T_TMP/ck
    rm -rf "$ck"
    : > "$out"
    extra=()
    [ "$moment" = save ] && extra=(--checkpoint="$ck" --checkpoint-every=1)
    mpirun --oversubscribe -np 4 "$P" --backend=mpi --train-size=8192 --epochs=$EPOCHS --batch=32 --test-data=none \
        --out="$T_TMP/out" --timeout=$TIMEOUT "${extra[@]}" > "$out" 2>&1 &
    mp=$!
    pid=$(wait_for_rank $mp "$rank")
    case $moment in
    start) sleep_ms_between 0 1000 ;;
    step) wait_for_line "$out" '^chapter 6: data-parallel training' $mp && sleep_ms_between 200 2000 ;;
    save) until compgen -G "$ck/checkpoint.safetensors.tmp-*" > /dev/null || ! kill -0 $mp 2>/dev/null; do :; done ;;
    end) wait_for_line "$out" "^ +$EPOCHS " $mp && sleep_ms_between 0 50 ;;
    esac
    if [ -z "$pid" ] || ! kill -0 $mp 2>/dev/null || ! kill -STOP "$pid" 2>/dev/null || ! stop_took "$pid"; then
        wait $mp
        missed=$((missed + 1))
        t_pass "$name (missed: rank $rank had finished, or was ending, before the stop landed; nothing to check)"
        continue
    fi
    stopped=$(now_ms)
    until ! kill -0 $mp 2>/dev/null || [ $(($(now_ms) - stopped)) -gt $(((TIMEOUT + MARGIN) * 1000)) ]; do sleep 0.1; done
    took=$(($(now_ms) - stopped))
    if kill -0 $mp 2>/dev/null; then
        # the other ranks still running (not ended, nor ended and waiting to be reaped)
        alive=$(ps -o pid=,stat= --ppid $mp | awk -v s="$pid" '$1 != s && $2 !~ /^Z/ { print $1 }')
        stopped_alive=$(ps -o stat= -p "$pid" | grep -v '^Z' || true)
        kill -KILL "$pid" 2>/dev/null
        for ((i = 0; i < 50; i++)); do kill -0 $mp 2>/dev/null || break; sleep 0.1; done
        mpirun_stuck=$(kill -0 $mp 2>/dev/null && echo 1 || true)
        [ -n "$mpirun_stuck" ] && kill -KILL $mp 2>/dev/null
        { wait $mp; } 2>/dev/null
        if [ -n "$alive" ]; then
            fail "$name" "still running $((TIMEOUT + MARGIN)) s after rank $rank was stopped: $(grep -E '^mpi:' "$out" | tail -n 4)"
        elif [ -n "$stopped_alive" ] && [ -z "$mpirun_stuck" ]; then
            after_end=$((after_end + 1))
            t_pass "$name (after the end: every other rank had finished and exited; mpirun waited for the stopped one)"
        else
            hung=$((hung + 1))
            t_pass "$name (mpirun hung: every rank had ended $((TIMEOUT + MARGIN)) s after the stop, mpirun did not return)"
        fi
        continue
    fi
    wait $mp
    status=$?
    [ $took -gt $worst ] && worst=$took
    guard=$(grep -oE 'has waited [0-9]+ s in MPI_[A-Za-z_]+' "$out" | head -n 1)
    if [ $status = 0 ]; then
        fail "$name" "exit 0 with rank $rank stopped"
    elif grep -qE "rank $rank: did not answer within" "$out"; then
        named=$((named + 1))
        t_pass "$name (ended $took ms after the stop, rank $rank named)"
    elif [ -n "$guard" ]; then
        guarded=$((guarded + 1))
        t_pass "$name (ended $took ms after the stop by the guard: $guard)"
    else
        fail "$name" "ended after $took ms (exit $status) without naming rank $rank: $(grep -E '^mpi:' "$out" | head -n 6)"
    fi
done
echo "stopped_rank: $RUNS runs under $LOAD CPU hogs, each ended within $(((TIMEOUT + MARGIN) * 1000)) ms of the stop" \
     "(the slowest $worst ms) or counted apart: $named named the stopped rank, $guarded ended by the guard of MPI's" \
     "own waits, $after_end stopped after the end, $hung with mpirun hung, $missed missed their moment, $failed failed"
[ $failed = 0 ]
