# program_shape.sh: every chapter program has the one shape lib/base/cli.h
# describes, checked on whatever build/chapter-N exist (a new chapter is
# checked the day it is built):
#   --help                    usage on stdout, nothing on stderr, exit 0
#   an unknown flag, a stray argument, a flag without its value, a value
#   that is not one (for every --flag=VALUE its --help lists, except paths,
#   directories, free names and specs)
#                             exit 2, stdout empty, one line on stderr:
#                             "chapter-N: ..." naming the flag
#   --data=/nonexistent/...   (where the program reads data) exit 1, one line
#   --flag= (an empty value)  exit 2 naming the flag, for every flag that takes one
# and, for the chapters and build/tools/*, every numeric flag's bad values
# from the table below: a leading space, a trailing space, an empty value,
# and each value past its range (2^64 among them): exit 2, one line naming
# the flag and quoting the value. Every numeric flag a program's --help lists
# must have its row, so a new flag cannot go unchecked. Under a sanitizer
# (the asan suite) only a few rows run, one per kind of number (see
# sanitized_rows). The programs run in a scratch directory: one that took a
# bad value and ran writes nothing here.
# Last, the unit tests' harness refuses a CHECK_TIMEOUT that is not 1 to 86400.
. "$(dirname "$0")/../harness/lib.sh"
T_TIMEOUT=60
mkdir -p "$T_TMP/cwd"

# Runs CMD in the scratch directory, keeping stdout and stderr apart:
# T_STATUS, T_STDOUT, T_STDERR.
run_split() {
    set +e
    (cd "$T_TMP/cwd" && exec timeout -k 5 "$T_TIMEOUT" "$@") > "$T_TMP/out" 2> "$T_TMP/err"
    T_STATUS=$?
    set -e
    T_STDOUT=$(cat "$T_TMP/out")
    T_STDERR=$(cat "$T_TMP/err")
}

# usage_error NAME PROG NEEDLES ARGS...: exit 2, no stdout, one stderr line
# "PROGNAME: ..." that contains each line of NEEDLES.
usage_error() {
    local name=$1 prog=$2 needles=$3 needle missing=""; shift 3
    local progname; progname=$(basename "$prog")
    run_split "$prog" "$@"
    while IFS= read -r needle; do
        grep -qF -- "$needle" <<<"$T_STDERR" || missing=$needle
    done <<<"$needles"
    local lines; lines=$(printf '%s' "$T_STDERR" | grep -c '' || true)
    if [ "$T_STATUS" != 2 ]; then t_failed "$name" "$progname $*: expected exit 2, got $T_STATUS: $(tail -n 2 "$T_TMP/err")"
    elif [ -n "$T_STDOUT" ]; then t_failed "$name" "$progname $*: printed on stdout: $(head -c 200 "$T_TMP/out")"
    elif [ "$lines" != 1 ]; then t_failed "$name" "$progname $*: $lines lines on stderr, expected one: $T_STDERR"
    elif [[ $T_STDERR != "$progname: "* ]]; then t_failed "$name" "$progname $*: the line does not start with '$progname: ': $T_STDERR"
    elif [ -n "$missing" ]; then t_failed "$name" "$progname $*: the line does not name '$missing': $T_STDERR"
    else t_pass "$name"; fi
}

# A flag's values in a --help text: "--flag=VALUE" (the first of each flag
# wins, sorted), one per line.
help_values() { grep -oE -- '--[a-z][a-z0-9-]*=[^] [,;)]*' <<<"$1" | sort -u; }

# Whether a --help VALUE stands for a number: not a name to choose
# (a|b, race, KIND), not a path or free text.
numeric_value() {
    case $1 in
    *'|'*|PATH|DIR|FILE|NAME|SPEC|TEXT|WHY|U|OPT|KIND|ALGO|TYPE) return 1 ;;
    *[!a-z]*) return 0 ;;
    *) return 1 ;; # a lowercase word: one of the flag's choices
    esac
}

B=18446744073709551616 # 2^64: one past every unsigned range
# PROGRAM FLAG VALID PAST...: a value the flag takes, then values past its range.
numeric_flags=(
    "chapter-1 --get 0 $B"
    "chapter-1 --lines 1 0 $B"
    "chapter-1 --seed 0 -9223372036854775809 $B"
    "chapter-2 --batch-size 1 0 $B"
    "chapter-2 --budget 1 0 $B"
    "chapter-2 --epoch 0 $B"
    "chapter-2 --epochs 1 0 1001"
    "chapter-2 --max-length 1 0 $B"
    "chapter-2 --max-samples 1 0 1048577"
    "chapter-2 --max-token-length 0 $B"
    "chapter-2 --min-length 1 0 $B"
    "chapter-2 --rank 0 4294967296"
    "chapter-2 --seed 0 -9223372036854775809 $B"
    "chapter-2 --size 0 $B"
    "chapter-2 --sort-size 1 0 $B"
    "chapter-2 --start-step 0 $B"
    "chapter-2 --world 1 0 4294967296"
    "chapter-3 --batch 1 0 1048577"
    "chapter-3 --batches 1 0 1073741825"
    "chapter-3 --epochs 1 0 1001"
    "chapter-3 --prefetch 1 0 65"
    "chapter-3 --rank 0 $B"
    "chapter-3 --seed 0 -9223372036854775809 $B"
    "chapter-3 --slot-bytes 1K 0 17179869184G $B"
    "chapter-3 --step-ms 4 -1 60000.1 0.0001 1e999"
    "chapter-3 --warmup 0 1001"
    "chapter-3 --work-us 0,10 1000001 0,,10 0,10, 0,_10 $B"
    "chapter-3 --workers 0,1 257 0,,1 ,1 $B"
    "chapter-3 --world 1 0 4294967296"
    "chapter-4 --batch 1 0 1048577"
    "chapter-4 --compute-ms 1 -1 10000.5"
    "chapter-4 --grad-bytes 1K 0 257M 17179869184G $B"
    "chapter-4 --host-links 1 0 1025 $B"
    "chapter-4 --link-gbps 5 0 10001"
    "chapter-4 --link-latency-us 5 -1 1000001"
    "chapter-4 --loop-gbps 1 0 10001"
    "chapter-4 --max-bytes 64K 17179869184G $B"
    "chapter-4 --min-bytes 64K 17179869184G $B"
    "chapter-4 --pool 1M 17179869184G $B"
    "chapter-4 --steps 1 0 100001"
    "chapter-4 --topology 2x2 0x2 2x0 2x 1025x1 $B"
    "chapter-4 --warmup 0 100001"
    "chapter-4 --workers 0 65"
    "chapter-5 --alpha-us 5 -1 1000000001"
    "chapter-5 --beta-gbps 5 0 1000000001"
    "chapter-5 --gamma-gbps 5 0 1000000001"
    "chapter-5 --cores 1 0 4097"
    "chapter-5 --iters 1 0 100001"
    "chapter-5 --links 1M 3 1025G $B"
    "chapter-5 --max-bytes 64K 17179869184G $B"
    "chapter-5 --min-bytes 1K 17179869184G $B"
    "chapter-5 --step-factor 2 1 $B"
    "chapter-5 --timeout 5 -1 0.001 1000001"
    "chapter-5 --topology 2x2 0x2 2x0 2x 9x8 1025x1 $B"
    "chapter-5 --warmup 0 100001"
    "chapter-5 --world 1 0 65"
    "chapter-6 --accumulate 1 0 1025"
    "chapter-6 --batch 1 0 65537"
    "chapter-6 --bucket-cap-mb 25 0.00001 1025"
    "chapter-6 --checkpoint-every 1 0 99999999999999999999999 $B"
    "chapter-6 --epochs 1 0 100001"
    "chapter-6 --first-bucket-kb 1024 0.01 1048577"
    "chapter-6 --global-batch 64 0 4194305 $B"
    "chapter-6 --hidden 256,128 0 65537 256,,128 256,_128 256,128, $B"
    "chapter-6 --lr 0.01 0 1e7"
    "chapter-6 --momentum 0.9 -0.1 1"
    "chapter-6 --seed 0 -9223372036854775809 $B"
    "chapter-6 --steps 1 0 $B"
    "chapter-6 --timeout 5 0.001 1000001"
    "chapter-6 --topology 2x2 0x2 2x0 2x 9x8 1025x1 $B"
    "chapter-6 --trace-steps 1 0 100001"
    "chapter-6 --train-size 1 0 $B"
    "chapter-6 --weight-decay 0 -1 1000001"
    "chapter-6 --workers 0 17"
    "chapter-6 --world 1 0 65"
    "tensordiff --tolerance 0.1 -0.1 1.1"
    "verdict --figure 1 1e999 nan inf"
    "verdict --peer-figure 1 1e999 nan inf"
    "verdict --ratio 1 1e999 nan"
)

# The whole table is some 360 process starts, most of a minute under ASan, for
# one parser that the unit tests (test_foundation) already run there: outside the
# plain suite, one row per kind of number keeps the sanitizer on every path
# (an integer range, a seed, a size, a list, a number with a range, one
# without).
sanitized_rows=("chapter-6 --steps" "chapter-1 --seed" "chapter-4 --pool" "chapter-6 --hidden" "chapter-3 --work-us"
                "chapter-6 --lr" "verdict --figure")
for r in "${sanitized_rows[@]}"; do
    printf '%s\n' "${numeric_flags[@]}" | grep -q "^$r " ||
        t_failed sanitized_rows "'$r' has no row in numeric_flags: name one that does"
done
in_sanitized_rows() { local r; for r in "${sanitized_rows[@]}"; do [ "$r" != "$1" ] || return 0; done; return 1; }

progs=()
for p in "$BUILD"/chapter-[0-9]*; do
    [[ $p == *.d ]] || [ ! -x "$p" ] || progs+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")")
done
if [ ${#progs[@]} = 0 ]; then t_failed programs "no $BUILD/chapter-N to check"; fi
tools=()
for p in "$BUILD"/tools/*; do
    [[ $p == *.d ]] || [ ! -x "$p" ] || tools+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")")
done

for prog in "${progs[@]}"; do
    c=$(basename "$prog")
    run_split "$prog" --help
    if [ "$T_STATUS" = 0 ] && [ -n "$T_STDOUT" ] && [ -z "$T_STDERR" ] && grep -q 'usage' <<<"$T_STDOUT"; then
        t_pass "$c.help"
    else
        t_failed "$c.help" "--help: exit $T_STATUS, stdout $(printf '%s' "$T_STDOUT" | wc -c) bytes, stderr: $(head -c 200 "$T_TMP/err")"
    fi
    help=$T_STDOUT

    usage_error "$c.unknown_flag" "$prog" "--no-such-flag" --no-such-flag
    usage_error "$c.stray_argument" "$prog" "stray-argument" stray-argument

    # every --flag=VALUE the help lists: without its value, with an empty one, and with a value that is not one
    declare -A done_flag=()
    while IFS= read -r f; do
        [ -n "$f" ] || continue
        flag=${f%%=*} value=${f#*=}
        [ -z "${done_flag[$flag]:-}" ] || continue
        done_flag[$flag]=1
        usage_error "$c.needs_value.${flag#--}" "$prog" "$flag" "$flag"
        usage_error "$c.empty_value.${flag#--}" "$prog" "$flag" "$flag="
        case $value in PATH|DIR|NAME|FILE|SPEC) continue ;; esac
        usage_error "$c.bad_value.${flag#--}" "$prog" "$flag" "$flag=@junk"
    done <<<"$(help_values "$help")"
    unset done_flag

    if grep -q -- '--data=' <<<"$help"; then
        run_split "$prog" --data=/nonexistent/ddp-no-such-file
        lines=$(printf '%s' "$T_STDERR" | grep -c '' || true)
        if [ "$T_STATUS" = 1 ] && [ "$lines" = 1 ] && [[ $T_STDERR == "$c: "*nonexistent* ]]; then
            t_pass "$c.runtime_error"
        else
            t_failed "$c.runtime_error" "--data=/nonexistent/...: exit $T_STATUS (expected 1), stderr: $T_STDERR"
        fi
    fi
done

# ---- every numeric flag of every program: its bad values, from the table ---------------
# A refusal takes milliseconds; a bad value taken would start a whole run, so
# each gets 20 s, not a minute, before it counts as taken.
T_TIMEOUT=20
for prog in "${progs[@]}" "${tools[@]}"; do
    c=$(basename "$prog")
    help=$(cd "$T_TMP/cwd" && "$prog" --help 2>/dev/null || true)
    declare -A row=()
    for r in "${numeric_flags[@]}"; do
        read -r p flag _ <<<"$r"
        [ "$p" = "$c" ] && row[$flag]=$r
    done
    while IFS= read -r f; do # every numeric flag its --help lists has its row
        [ -n "$f" ] || continue
        flag=${f%%=*}
        if numeric_value "${f#*=}" && [ -z "${row[$flag]:-}" ]; then
            t_failed "$c.numeric_flags_listed" "$flag has no row in numeric_flags (its valid value and its range's ends)"
            row[$flag]=missing
        fi
    done <<<"$(help_values "$help")"
    for flag in "${!row[@]}"; do
        [ "${row[$flag]}" != missing ] || continue
        [ "${SUITE:-plain}" = plain ] || in_sanitized_rows "$c $flag" || continue
        read -r _ _ valid past <<<"${row[$flag]}"
        i=0
        # "_" in a row stands for a space, which the table's words cannot hold
        for bad in " $valid" "$valid " "" ${past//_/@SPACE@}; do
            bad=${bad//@SPACE@/ }
            usage_error "$c.refuses.${flag#--}.$i" "$prog" "$flag"$'\n'"'$bad'" "$flag=$bad"
            i=$((i + 1))
        done
    done
    unset row
done

# ---- the unit tests' harness reads CHECK_TIMEOUT as strictly ----------------------------
unit=$(ls "$BUILD"/tests/unit/test_* 2>/dev/null | grep -v '\.d$' | head -n 1 || true)
if [ -z "$unit" ]; then
    t_skip check_timeout_refused "no $BUILD/tests/unit/test_* built (make tests)"
else
    i=0
    for bad in " 5" "5 " "5s" "0" "86401" "$B"; do
        t_run env CHECK_TIMEOUT="$bad" "$unit" no-such-test
        if [ "$T_STATUS" = 2 ] && grep -qF "CHECK_TIMEOUT='$bad': expected 1 to 86400" <<<"$T_OUT"; then
            t_pass "check_timeout_refused.$i"
        else
            t_failed "check_timeout_refused.$i" "CHECK_TIMEOUT='$bad' $unit: exit $T_STATUS: $T_OUT"
        fi
        i=$((i + 1))
    done
fi
