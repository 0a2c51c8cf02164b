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
. "$(dirname "$0")/../harness/lib.sh"
T_TIMEOUT=60

# Runs CMD, keeping stdout and stderr apart: T_STATUS, T_STDOUT, T_STDERR.
run_split() {
    set +e
    timeout -k 5 "$T_TIMEOUT" "$@" > "$T_TMP/out" 2> "$T_TMP/err"
    T_STATUS=$?
    set -e
    T_STDOUT=$(cat "$T_TMP/out")
    T_STDERR=$(cat "$T_TMP/err")
}

# usage_error NAME PROG NEEDLE ARGS...: exit 2, no stdout, one stderr line
# "PROGNAME: ..." that contains NEEDLE.
usage_error() {
    local name=$1 prog=$2 needle=$3; shift 3
    local progname; progname=$(basename "$prog")
    run_split "$prog" "$@"
    local lines; lines=$(printf '%s' "$T_STDERR" | grep -c '' || true)
    if [ "$T_STATUS" != 2 ]; then t_failed "$name" "$progname $*: expected exit 2, got $T_STATUS: $(tail -n 2 "$T_TMP/err")"
    elif [ -n "$T_STDOUT" ]; then t_failed "$name" "$progname $*: printed on stdout: $(head -c 200 "$T_TMP/out")"
    elif [ "$lines" != 1 ]; then t_failed "$name" "$progname $*: $lines lines on stderr, expected one: $T_STDERR"
    elif [[ $T_STDERR != "$progname: "* ]]; then t_failed "$name" "$progname $*: the line does not start with '$progname: ': $T_STDERR"
    elif ! grep -qF -- "$needle" <<<"$T_STDERR"; then t_failed "$name" "$progname $*: the line does not name '$needle': $T_STDERR"
    else t_pass "$name"; fi
}

progs=()
for p in "$BUILD"/chapter-[0-9]*; do
    [[ $p == *.d ]] || [ ! -x "$p" ] || progs+=("$p")
done
if [ ${#progs[@]} = 0 ]; then t_failed programs "no $BUILD/chapter-N to check"; fi

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

    # every --flag=VALUE the help lists: without its value, and with a value that is not one
    flags=$(grep -oE -- '--[a-z][a-z0-9-]*=[^] [,;)]*' <<<"$help" | sort -u)
    declare -A done_flag=()
    while IFS= read -r f; do
        [ -n "$f" ] || continue
        flag=${f%%=*} value=${f#*=}
        [ -z "${done_flag[$flag]:-}" ] || continue
        done_flag[$flag]=1
        usage_error "$c.needs_value.${flag#--}" "$prog" "$flag" "$flag"
        case $value in PATH|DIR|NAME|FILE|SPEC) continue ;; esac
        usage_error "$c.bad_value.${flag#--}" "$prog" "$flag" "$flag=@junk"
    done <<<"$flags"
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
