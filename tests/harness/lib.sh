# lib.sh: the vocabulary of the shell tests (tests/*.sh), sourced by each one.
#
# Shell tests drive the built programs the way a user does: flags, exit status,
# messages. Each check prints "PASS script.name" or "FAIL script.name: why";
# tests/run counts those lines. BUILD names the build directory to test.
#
#   t_ok   NAME CMD...                      exits 0
#   t_fail NAME STATUS NEEDLE CMD...        exits with STATUS (or "nonzero") and
#                                           stderr+stdout contain NEEDLE
#   t_out  NAME NEEDLE CMD...               exits 0 and output contains NEEDLE
#   t_said NAME NEEDLE                      the last command's output (after
#                                           t_out, t_fail, t_run) contains NEEDLE
#   t_lines NAME PREFIX REGEX               some line of the last command's
#                                           output starts with PREFIX, and every
#                                           such line, whole, matches REGEX
#                                           (grep -E): nothing before or after
#   t_ere TEXT                              prints TEXT as a grep -E pattern
#                                           matching it alone (a path in REGEX)
#   t_skip NAME WHY                         counted as passed, says why skipped
#   t_busy_start, t_busy_stop               two busy processes beside what
#                                           runs between them (a CPU hog per
#                                           core of a 2-core machine); stopped
#                                           on exit too
#   t_same_under_load NAME "FILE..." CMD... CMD run quietly, then beside
#                                           t_busy_start's hogs: the same
#                                           stdout (lines saying "(measured)"
#                                           aside) and the same bytes in each
#                                           FILE, which CMD writes under
#                                           $T_TMP/vt (modelled time: the
#                                           host's load shows in no figure)
#   t_python_expected NAME SCRIPT DIR       the expected side of a PyTorch
#                                           cross-check (see below)
#   t_case_compare ID WHAT EXPECTED CMD...  one rank of a configuration
#   t_case_verdicts PREFIX                  one verdict per configuration
#   t_signals_leave_no_tmp PREFIX GLOB RESET CMD...
#                                           no temporary file outlives a
#                                           signal (see below)
#   t_need_mpirun NAME                      mpirun jobs can run here, or
#                                           NAME is skipped saying why
#   t_need_gpu NAME [nccl]                  this build has CUDA (and NCCL)
#                                           and a GPU is visible, T_NGPU of
#                                           them; or NAME is skipped saying why
#   t_idx_bad_label PREFIX N K              an IDX training set of N black
#                                           28 x 28 images, PREFIX-images-idx3-ubyte
#                                           and its labels, all 0 but record K's:
#                                           200, past any 10-class model
BUILD=${BUILD:-build}
T_SCRIPT=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/ddp-sh-XXXXXX")
T_TIMEOUT=${T_TIMEOUT:-300}
trap 't_busy_stop; rm -rf "$T_TMP"' EXIT

t_pass() { echo "PASS $T_SCRIPT.$1"; }
t_failed() { local name=$1; shift; echo "FAIL $T_SCRIPT.$name: $*"; }
t_skip() { echo "PASS $T_SCRIPT.$1 (skipped: $2)"; }

T_BUSY=()
t_busy_start() {
    local _
    for _ in 1 2; do
        (while :; do :; done) &
        T_BUSY+=($!)
    done
}
t_busy_stop() {
    if [ ${#T_BUSY[@]} -gt 0 ]; then
        kill "${T_BUSY[@]}" 2>/dev/null || true
        wait "${T_BUSY[@]}" 2>/dev/null || true
    fi
    T_BUSY=()
}

t_same_under_load() { # NAME "FILE..." CMD...
    local name=$1 files=$2 quiet=0 busy=0 why="" f
    shift 2
    rm -rf "$T_TMP/vt" "$T_TMP/vt-quiet"
    timeout -k 5 "$T_TIMEOUT" "$@" > "$T_TMP/vt-quiet.txt" 2>&1 || quiet=$?
    cp -r "$T_TMP/vt" "$T_TMP/vt-quiet" 2>/dev/null || true
    rm -rf "$T_TMP/vt"
    t_busy_start
    timeout -k 5 "$T_TIMEOUT" "$@" > "$T_TMP/vt-busy.txt" 2>&1 || busy=$?
    t_busy_stop
    grep -v '(measured)' "$T_TMP/vt-quiet.txt" > "$T_TMP/vt-quiet.modelled" || true
    grep -v '(measured)' "$T_TMP/vt-busy.txt" > "$T_TMP/vt-busy.modelled" || true
    if [ "$quiet" != 0 ] || [ "$busy" != 0 ]; then
        why="exit $quiet quiet, $busy busy: $(tail -n 3 "$T_TMP/vt-busy.txt")"
    elif ! cmp -s "$T_TMP/vt-quiet.modelled" "$T_TMP/vt-busy.modelled"; then
        why="stdout differs: $(diff "$T_TMP/vt-quiet.modelled" "$T_TMP/vt-busy.modelled" | head -n 6)"
    fi
    for f in $files; do
        if [ -z "$why" ] && ! cmp -s "$T_TMP/vt-quiet/$f" "$T_TMP/vt/$f"; then
            why="$f differs: $(diff "$T_TMP/vt-quiet/$f" "$T_TMP/vt/$f" 2>&1 | head -n 6 | cut -c 1-300)"
        fi
    done
    if [ -n "$why" ]; then t_failed "$name" "$why"; else t_pass "$name"; fi
}

t_run() { # runs CMD with a time limit; sets T_STATUS and T_OUT
    set +e
    T_OUT=$(timeout -k 5 "$T_TIMEOUT" "$@" 2>&1)
    T_STATUS=$?
    set -e
}

t_ok() {
    local name=$1; shift
    t_run "$@"
    if [ "$T_STATUS" = 0 ]; then t_pass "$name"
    else t_failed "$name" "expected exit 0, got $T_STATUS from: $*; output: $(printf '%s' "$T_OUT" | tail -n 5)"; fi
}

t_out() {
    local name=$1 needle=$2; shift 2
    t_run "$@"
    if [ "$T_STATUS" != 0 ]; then t_failed "$name" "expected exit 0, got $T_STATUS from: $*; output: $(printf '%s' "$T_OUT" | tail -n 5)"
    elif ! grep -qF -- "$needle" <<<"$T_OUT"; then t_failed "$name" "expected output containing '$needle', got: $(printf '%s' "$T_OUT" | tail -n 5)"
    else t_pass "$name"; fi
}

t_said() {
    if grep -qF -- "$2" <<<"$T_OUT"; then t_pass "$1"
    else t_failed "$1" "expected output containing '$2', got: $(printf '%s' "$T_OUT" | head -n 8)"; fi
}

t_lines() {
    local name=$1 prefix=$2 regex=$3 said other
    said=$(awk -v p="$prefix" 'index($0, p) == 1' <<<"$T_OUT")
    other=$(grep -Evx -- "$regex" <<<"$said" || true)
    if [ -z "$said" ]; then t_failed "$name" "no line starts with '$prefix': $(printf '%s' "$T_OUT" | tail -n 3)"
    elif [ -n "$other" ]; then t_failed "$name" "expected every line starting '$prefix' to be /$regex/, got: $(head -n 2 <<<"$other")"
    else t_pass "$name"; fi
}

t_ere() { sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"$1"; }

t_fail() {
    local name=$1 want=$2 needle=$3; shift 3
    t_run "$@"
    if [ "$T_STATUS" = 124 ] || [ "$T_STATUS" = 137 ]; then t_failed "$name" "timed out after $T_TIMEOUT s: $*"
    elif [ "$T_STATUS" -ge 128 ]; then t_failed "$name" "crashed (status $T_STATUS, a signal): $*; output: $(printf '%s' "$T_OUT" | tail -n 5)"
    elif [ "$want" = nonzero ] && [ "$T_STATUS" = 0 ]; then t_failed "$name" "expected a non-zero exit, got 0 from: $*"
    elif [ "$want" != nonzero ] && [ "$T_STATUS" != "$want" ]; then t_failed "$name" "expected exit $want, got $T_STATUS from: $*; output: $(printf '%s' "$T_OUT" | tail -n 3)"
    elif ! grep -qF -- "$needle" <<<"$T_OUT"; then t_failed "$name" "expected a message containing '$needle', got: $(printf '%s' "$T_OUT" | tail -n 3)"
    else t_pass "$name"; fi
}

# The PyTorch cross-checks (sampler_torch.sh, dynamic_reference.sh) replay
# configurations a Python script wrote the expected answers of. They run in
# the plain suite only, with Debian's torch (only /usr/bin/python3 has it).
# t_python_expected runs SCRIPT DIR; it returns 1, having said why, when the
# check cannot or did not get its expected side.
t_python_expected() {
    local name=$1 script=$2 dir=$3
    if [ "${SUITE:-plain}" != plain ]; then t_skip "$name" "runs in the plain suite only"; return 1; fi
    if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        t_skip "$name" "Debian's python3-torch is not installed"; return 1
    fi
    mkdir -p "$dir"
    if ! /usr/bin/python3 "$script" "$dir" 2>"$T_TMP/py.log"; then
        t_failed "$name" "$script failed: $(tail -n 3 "$T_TMP/py.log")"; return 1
    fi
}

# Runs CMD unless configuration ID already differs; records in bad[ID] (as
# "WHAT: ...") that it failed or that its output is not the file EXPECTED.
t_case_compare() {
    local id=$1 what=$2 expected=$3; shift 3
    [ -n "${bad[$id]:-}" ] && return 0
    if ! "$@" > "$T_TMP/got" 2>"$T_TMP/err"; then
        bad[$id]="$what: ${*#"$BUILD/"} failed: $(head -c 300 "$T_TMP/err")"
    elif ! cmp -s "$T_TMP/got" "$expected"; then
        bad[$id]="$what: ${*#"$BUILD/"} differs: $(diff "$T_TMP/got" "$expected" | head -n 4 | tr '\n' ' ')"
    fi
}

# One PASS or FAIL per configuration: the caller fills the array `cases` with
# "ID:description" and the associative array `bad` with ID -> what differed.
t_case_verdicts() {
    local prefix=$1 c id
    for c in "${cases[@]}"; do
        id=${c%%:*}
        if [ -n "${bad[$id]:-}" ]; then t_failed "${prefix}_$id" "${c#*:}: ${bad[$id]}"
        else t_pass "${prefix}_$id"; fi
    done
}

# t_signals_leave_no_tmp PREFIX GLOB RESET CMD...: CMD writes a file through a
# temporary one matching GLOB (fsutil.h); RESET is a command that removes what
# CMD built, so that CMD writes again. Sends SIGINT, then SIGTERM, to CMD while
# its temporary file exists: each must leave no file matching GLOB. Then
# SIGKILL, which must leave one (it cannot be caught), and CMD run again, which
# must sweep it. CMD must write long enough to be caught mid-write.
t_signals_leave_no_tmp() {
    local prefix=$1 glob=$2 reset=$3 sig pid tries status left
    shift 3
    for sig in INT TERM KILL; do
        $reset
        # env: a script's background job starts with SIGINT ignored; give it the default back
        env --default-signal=INT "$@" > /dev/null 2>&1 &
        pid=$! tries=0
        until compgen -G "$glob" > /dev/null || [ $tries -ge 20000 ]; do tries=$((tries + 1)); done
        kill -"$sig" $pid 2>/dev/null
        { wait $pid; } 2>/dev/null && status=0 || status=$? # (braces: no "Killed" notice from the shell)
        left=$(compgen -G "$glob" || true)
        if [ "$status" = 0 ]; then t_failed "${prefix}_sig$sig" "the write ended before the signal: give it more to write"
        elif [ $sig = KILL ] && [ -z "$left" ]; then t_failed "${prefix}_sigKILL_leaves_one" "nothing left: the sweep proves nothing"
        elif [ $sig != KILL ] && [ -n "$left" ]; then t_failed "${prefix}_sig$sig" "status $status, left behind: $left"
        else t_pass "${prefix}_sig$sig"; fi
    done
    t_ok "${prefix}_next_run" "$@"
    left=$(compgen -G "$glob" || true)
    if [ -z "$left" ]; then t_pass "${prefix}_stale_swept"; else t_failed "${prefix}_stale_swept" "still there: $left"; fi
}

# t_need_mpirun NAME: returns 0 when this suite and build can run mpirun jobs
# (and lets mpirun start as root, as tests/run does); else says why NAME is
# skipped and returns 1. The gpu suite tests the plain build, MPI and all.
t_need_mpirun() {
    if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
    if [ "${SUITE:-plain}" != plain ] && [ "$SUITE" != gpu ]; then
        t_skip "$1" "the $SUITE suite is built without MPI"; return 1
    elif ! command -v mpirun > /dev/null 2>&1; then
        t_skip "$1" "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"; return 1
    elif ! grep -q 'HAVE_MPI := 1' "$BUILD/config.mk" 2>/dev/null; then
        t_skip "$1" "this build has no MPI support"; return 1
    fi
}

# t_need_gpu NAME [nccl]: returns 0, with T_NGPU set to how many GPUs
# nvidia-smi lists, when this build has CUDA (and NCCL, when asked) and there
# is a GPU; else says why NAME is skipped and returns 1.
t_need_gpu() {
    T_NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    if ! grep -q 'HAVE_CUDA := 1' "$BUILD/config.mk" 2>/dev/null; then
        t_skip "$1" "this build has no CUDA (the toolkit was not found at build time)"; return 1
    elif [ "${2:-}" = nccl ] && ! grep -q 'HAVE_NCCL := 1' "$BUILD/config.mk" 2>/dev/null; then
        t_skip "$1" "this build has no NCCL (it was not found beside CUDA at build time)"; return 1
    elif [ "${T_NGPU:-0}" -lt 1 ]; then
        t_skip "$1" "no NVIDIA GPU visible (nvidia-smi -L lists none)"; return 1
    fi
}

t_idx_bad_label() {
    local prefix=$1 n=$2 k=$3 count
    count=$(printf '%08x' "$n" | sed 's/../\\x&/g') # big-endian, as IDX counts are
    { printf '\0\0\x08\x03%b\0\0\0\x1c\0\0\0\x1c' "$count"; head -c $((n * 784)) /dev/zero; } > "$prefix-images-idx3-ubyte"
    { printf '\0\0\x08\x01%b' "$count"; head -c "$k" /dev/zero; printf '\xc8'; head -c $((n - k - 1)) /dev/zero; } \
        > "$prefix-labels-idx1-ubyte"
}
