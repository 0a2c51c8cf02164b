# readme_commands: every command a README marks runnable works as written, and
# running them all leaves the repository as it was.
#
# A README marks a command block runnable with the line `<!-- runnable -->`
# right above its fence (the comment does not render; both are indented when
# the block is part of a list item). Each command of such a block (a line,
# with its `\` continuations) runs with bash from the top of a
# scratch clone of this tree, one after another, so a block may make a file
# that a later command reads. It must exit 0 within 300 s, unless its comment
# holds:
#   [exit N ...]   the command must exit with status N (a grader with work left,
#                  a failure the lesson shows on purpose)
#   [timeout N]    it may run N seconds instead of 300 (`make demo` trains for
#                  minutes, more on a loaded machine)
#   [slow]         not run (minutes, or `make test` itself): a `make` line must
#                  name targets that exist (make -n), another must name a program
# Each PASS line ends with the command's seconds ("(118 s)"), so that the
# time a README's commands cost in CI shows.
# Commands that need what this machine lacks (mpirun, torchrun, a file under
# /usr/share) are skipped and said. A shell block (```sh, ```bash) a reader is
# not to run as written says why with `<!-- not runnable: WHY -->` above its
# fence (packages installed as root, commands for GPUs); an unmarked one fails.
#
# The scratch clone is this checkout's HEAD with the working tree's changes
# (edits, deletions, files git does not ignore) committed on top, so its
# `git status` starts empty, every file with this tree's modification time, so
# the copy of build/ it gets is up to date and nothing is compiled again. After
# the commands `git status --porcelain` must still be empty (no tracked file
# rewritten, no untracked file left: the lessons leave the repository as it
# was), and after `make clean` so must `git status --porcelain --ignored`
# (make clean removes whatever the commands made). Open MPI's run-as-root
# variables are unset: a command must work as root as written. Plain suite
# only (it runs the plain build).
. "$(dirname "$0")/../harness/lib.sh"

if [ "${SUITE:-plain}" != plain ] || [ "$BUILD" != build ]; then
    t_skip all "runs in the plain suite only, on build/"
    exit 0
fi
repo=$(pwd)

# README paths, relative: every README.md outside build/, notebooks-out/, .git/
mapfile -t readmes < <(find . -name README.md -not -path './build/*' -not -path './notebooks-out/*' \
    -not -path './.git/*' | sed 's|^\./||' | sort)

# Prints "FILE<TAB>LINE<TAB>COMMAND" for every command of every runnable block,
# "FILE<TAB>LINE<TAB>!MARKER" for a marker with no fence under it, and
# "FILE<TAB>LINE<TAB>!UNMARKED" for a shell block with neither marker.
extract() { # FILE
    awk -v file="$1" '
        inblock && /^[[:space:]]*```/ { inblock = 0; next }
        inblock {
            if (cmd == "") { if ($0 ~ /^[[:space:]]*(#|$)/) next; start = FNR }
            line = $0
            if (sub(/\\$/, "", line)) { cmd = cmd line; next }
            cmd = cmd line
            print file "\t" start "\t" cmd
            cmd = ""
            next
        }
        other { if (/^[[:space:]]*```/) other = 0; next }
        /^[[:space:]]*```/ {
            if (marker) { inblock = 1; marker = 0; next }
            if (!notrun && /^[[:space:]]*```(sh|bash|shell|console)[[:space:]]*$/) print file "\t" FNR "\t!UNMARKED"
            other = 1; notrun = 0; next
        }
        marker || notrun { print file "\t" (marker ? marker : notrun) "\t!MARKER"; marker = notrun = 0 }
        /^[[:space:]]*<!-- runnable -->[[:space:]]*$/ { marker = FNR; next }
        /^[[:space:]]*<!-- not runnable: [^ ].* -->[[:space:]]*$/ { notrun = FNR; next }
        END { if (marker || notrun) print file "\t" (marker ? marker : notrun) "\t!MARKER" }
    ' "$1"
}

# The scratch clone (see the top). build/ is copied without the other builds
# (asan, tsan, fuzz) and without what programs wrote there (out/, tmp/).
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    t_skip all "not a git checkout: the commands run in a clone of it"
    exit 0
fi
tree=$T_TMP/tree
git_t() { git -C "$tree" -c user.name=readme -c user.email=readme@localhost "$@"; }
if ! git clone -q --no-checkout "$repo" "$tree" 2>"$T_TMP/clone.err" ||
    ! git_t checkout -q --detach "$(git rev-parse HEAD)" 2>>"$T_TMP/clone.err"; then
    t_failed clone "git clone of this checkout failed: $(tail -n 3 "$T_TMP/clone.err")"
    exit 0
fi
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -C "$tree" -xf -
git ls-files -z --deleted | (cd "$tree" && xargs -0 -r rm -f --)
git_t add -A && git_t commit -q --allow-empty -m "the working tree"
mkdir -p "$tree/build"
tar -C "$BUILD" --exclude=./asan --exclude=./tsan --exclude=./fuzz --exclude=./out --exclude=./tmp -cf - . |
    tar -C "$tree/build" -xf -
before=$(git_t status --porcelain)
if [ -n "$before" ]; then
    t_failed clone "the clone's git status is not empty before any command: $(head -n 5 <<<"$before" | tr '\n' ' ')"
    exit 0
fi

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

# Why CMD runs a program a reader does not have yet, or nothing. The clone
# gets this build's whole build/, tests and labs included, but `make` and
# `make demo` build only the chapters and the tools (`all`): another program
# under build/ (a unit test) needs a `make` naming it, or `make tests`, in an
# earlier command of the same README. MADE: those earlier make commands.
not_built() { # CMD MADE
    local word first=""
    for word in $1; do
        [[ $word == *=* && -z $first && $word != -* ]] && continue
        first=$word; break
    done
    [[ $first == build/* ]] || return 0
    [[ $first =~ ^build/(chapter-[0-9]+|tools/[A-Za-z0-9_]+)$ ]] && return 0
    [[ " $2 " == *" $first "* || " $2 " == *" tests "* ]] && return 0
    echo "$first is not built by make or make demo: run 'make $first' (or make tests) before it in this README"
}

count=0
for readme in "${readmes[@]}"; do
    made=""
    while IFS=$'\t' read -r file line cmd; do
        name="$file:$line"
        if [ "$cmd" = '!MARKER' ]; then
            t_failed "$name" "a <!-- runnable --> or <!-- not runnable: ... --> line is not followed by a code fence"
            continue
        fi
        if [ "$cmd" = '!UNMARKED' ]; then
            t_failed "$name" "a shell block with neither <!-- runnable --> nor <!-- not runnable: WHY --> above it"
            continue
        fi
        count=$((count + 1))
        why=$(not_built "$cmd" "$made")
        if [ -n "$why" ]; then t_failed "$name" "$why"; continue; fi
        [[ $cmd == make\ * ]] && made+=" ${cmd%%#*}"
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
        want=0 T_TIMEOUT=300
        [[ $cmd =~ \[exit\ ([0-9]+) ]] && want=${BASH_REMATCH[1]}
        [[ $cmd =~ \[timeout\ ([0-9]+)\] ]] && T_TIMEOUT=${BASH_REMATCH[1]}
        started=$SECONDS
        t_run bash -c "cd '$tree' && $cmd" </dev/null
        took=$((SECONDS - started))
        if [ "$T_STATUS" = "$want" ]; then t_pass "$name ($took s)"
        elif [ "$T_STATUS" = 124 ] || [ "$T_STATUS" = 137 ]; then
            t_failed "$name" "still running after $T_TIMEOUT s, stopped (a longer limit: [timeout N] in its comment): $cmd"
        else t_failed "$name" "expected exit $want, got $T_STATUS after $took s from: $cmd; output: $(tail -n 4 <<<"$T_OUT")"; fi
    done < <(extract "$readme")
done

# Nothing the commands did shows in git: no tracked file rewritten, nothing new
# left beside them (what they make goes under build/, or to a notebooks-out/
# path git ignores); and make clean takes away whatever they made.
after=$(git_t status --porcelain)
if [ -z "$after" ]; then t_pass leave_the_repository_as_it_was
else t_failed leave_the_repository_as_it_was "git status after the commands: $(head -n 25 <<<"$after" | tr '\n' ' ')"; fi
t_run make -s -C "$tree" clean
left=$(git_t status --porcelain --ignored)
if [ "$T_STATUS" != 0 ]; then t_failed make_clean_removes_what_they_made "make clean exited $T_STATUS: $(tail -n 3 <<<"$T_OUT")"
elif [ -z "$left" ]; then t_pass make_clean_removes_what_they_made
else t_failed make_clean_removes_what_they_made "left after make clean: $(head -n 25 <<<"$left" | tr '\n' ' ')"; fi

if [ "$count" -lt 10 ]; then t_failed found_the_commands "only $count runnable commands in ${#readmes[@]} READMEs"
else t_pass found_the_commands; fi
