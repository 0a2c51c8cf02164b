# readme_commands: every command a README marks runnable works as written.
#
# A README marks a command block runnable with the line `<!-- runnable -->`
# right above its fence (the comment does not render). Each command of such a
# block (a line, with its `\` continuations) runs with bash from the top of a
# scratch copy of this tree, one after another, so a block may make a file
# that a later command reads. It must exit 0, unless its comment holds one of:
#   [exit N ...]   the command must exit with status N (a grader with work left,
#                  a failure the lesson shows on purpose)
#   [slow]         not run (minutes, or `make test` itself): a `make` line must
#                  name targets that exist (make -n), another must name a program
# Commands that need what this machine lacks (mpirun, torchrun, a file under
# /usr/share) are skipped and said. The scratch tree links to this one's
# sources and build, with a notebooks-out/ of its own, so the commands never
# touch your plots. Open MPI's run-as-root variables are unset: a command must
# work as root as written. Plain suite only (it runs the plain build).
. "$(dirname "$0")/../harness/lib.sh"
T_TIMEOUT=300

if [ "${SUITE:-plain}" != plain ] || [ "$BUILD" != build ]; then
    t_skip all "runs in the plain suite only, on build/"
    exit 0
fi
repo=$(pwd)

# README paths, relative: every README.md outside build/, notebooks-out/, .git/
mapfile -t readmes < <(find . -name README.md -not -path './build/*' -not -path './notebooks-out/*' \
    -not -path './.git/*' | sed 's|^\./||' | sort)

# Prints "FILE<TAB>LINE<TAB>COMMAND" for every command of every runnable block,
# and "FILE<TAB>LINE<TAB>!MARKER" for a marker with no fence under it.
extract() { # FILE
    awk -v file="$1" '
        marker && !/^```/ { print file "\t" marker "\t!MARKER"; marker = 0 }
        marker && /^```/ { inblock = 1; marker = 0; next }
        inblock && /^```/ { inblock = 0; next }
        inblock {
            if (cmd == "") { if ($0 ~ /^[[:space:]]*(#|$)/) next; start = FNR }
            line = $0
            if (sub(/\\$/, "", line)) { cmd = cmd line; next }
            cmd = cmd line
            print file "\t" start "\t" cmd
            cmd = ""
            next
        }
        /^<!-- runnable -->[[:space:]]*$/ { marker = FNR }
        END { if (marker) print file "\t" marker "\t!MARKER" }
    ' "$1"
}

# The scratch tree: this tree's folders, their files linked (cp -s), so that
# a program that lists a folder sees it as here; build/ linked whole, so
# nothing is built again; a notebooks-out/ of its own.
tree=$T_TMP/tree
mkdir -p "$tree/notebooks-out"
for entry in "$repo"/* "$repo"/.ci; do
    name=$(basename "$entry")
    case $name in
    notebooks-out) ;;
    build) ln -s "$entry" "$tree/$name" ;;
    *) cp -as "$entry" "$tree/$name" ;;
    esac
done

# torchrun's default port (29500) may be taken on a shared machine: choose a free
# one through torchrun's own variable for --master_port, leaving the command as written.
if [ -x /usr/bin/python3 ]; then
    PET_MASTER_PORT=$(/usr/bin/python3 -c 'import socket
for _ in range(50):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; t = socket.socket()
    try:
        t.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError:
        pass')
    export PET_MASTER_PORT
fi
unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM

# Why this machine cannot run CMD, or nothing.
cannot_run() { # CMD
    local word first="" path
    for word in $1; do
        [[ $word == *=* && -z $first && $word != -* ]] && continue # VAR=value before the command
        first=$word; break
    done
    if [[ $first != */* ]] && ! command -v "$first" >/dev/null 2>&1; then echo "needs $first"; return; fi
    for path in $(grep -o '/usr/share/[^ ]*' <<<"$1"); do
        [ -e "$path" ] || { echo "needs $path"; return; }
    done
}

count=0
for readme in "${readmes[@]}"; do
    while IFS=$'\t' read -r file line cmd; do
        name="$file:$line"
        if [ "$cmd" = '!MARKER' ]; then
            t_failed "$name" "<!-- runnable --> is not followed by a code fence"; continue
        fi
        count=$((count + 1))
        if [[ $cmd == *"[slow]"* ]]; then
            read -r -a words <<<"${cmd%%#*}"
            if [ "${words[0]}" = make ]; then
                t_run bash -c "cd '$tree' && make -n ${words[*]:1}"
                if [ "$T_STATUS" = 0 ]; then t_pass "$name"
                else t_failed "$name" "[slow] '${cmd%%#*}': make -n fails: $(tail -n 3 <<<"$T_OUT")"; fi
            elif [ -x "$tree/${words[0]}" ] || command -v "${words[0]}" >/dev/null 2>&1; then t_pass "$name"
            else t_failed "$name" "[slow] '${cmd%%#*}': ${words[0]} is not a program here"; fi
            continue
        fi
        why=$(cannot_run "$cmd")
        if [ -n "$why" ]; then t_skip "$name" "$why: $cmd"; continue; fi
        want=0
        [[ $cmd =~ \[exit\ ([0-9]+) ]] && want=${BASH_REMATCH[1]}
        t_run bash -c "cd '$tree' && $cmd" </dev/null
        if [ "$T_STATUS" = "$want" ]; then t_pass "$name"
        else t_failed "$name" "expected exit $want, got $T_STATUS from: $cmd; output: $(tail -n 4 <<<"$T_OUT")"; fi
    done < <(extract "$readme")
done

if [ "$count" -lt 10 ]; then t_failed found_the_commands "only $count runnable commands in ${#readmes[@]} READMEs"
else t_pass found_the_commands; fi
