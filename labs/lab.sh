#!/usr/bin/env bash
# lab.sh: builds and runs a lab's grader against one implementation (`make lab-N`).
#
#   labs/lab.sh N [IMPL [GRADER-FLAGS...]]   IMPL: student (default), ref, skeleton,
#                                           only:REGION (that region stubbed alone), or
#                                           mutant:FILE (a stored wrong solution, see labs/labgen.awk)
#   labs/lab.sh --write-skeletons     regenerate every committed learner file (one with
#                                     changes not committed is kept, unless FORCE=1)
#   labs/lab.sh --check-skeletons     fail if a committed learner file differs from its generated one
#   labs/lab.sh --regions N           list lab N's exercise regions
#   labs/lab.sh --reference-mutant N  print lab N's reference as a mutant file (every region
#                                     with its own code): the mutant check must see it survive
#
# A lab lives in labs/NN-name/: README.md, grade.c, and one learner file per
# module, named like its reference under lib/ or sim/. The learner file is that
# reference with its LAB regions stubbed (labs/labgen.awk). GRADER-FLAGS go to
# the grader (--fail-fast: stop at the first failed test). Exit status: 0 at
# full marks, 1 below them or when the build fails, 2 for a bad argument or
# mutant file. Make passes CC, CFLAGS, CPPFLAGS, LDFLAGS, LDLIBS and BUILD;
# run by hand, it grades through make (whose exit status is 2 for 1).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}

lab_dir() { # lab number -> its directory
    local d="" labs
    # 10#: "08" is lab 8, not a bad octal number; "1x" or "abc" is no lab at all
    [[ $1 =~ ^[0-9]{1,3}$ ]] && d=$(ls -d labs/"$(printf '%02d' "$((10#$1))")"-*/ 2>/dev/null | head -n 1)
    if [ -z "$d" ]; then
        labs=$(ls -d labs/[0-9][0-9]-*/ | sed 's|^labs/0*\([0-9]*\)-.*|\1|' | paste -sd ' ')
        echo "lab.sh: there is no lab '$1' (the labs: $labs; make lab-N)" >&2; exit 2
    fi
    echo "${d%/}"
}
learner_files() { ls "$1"/*.c | grep -v '/grade\.c$'; }
reference_of() { # learner file -> reference module
    local base; base=$(basename "$1")
    local ref; ref=$(find lib sim -name "$base" | head -n 1)
    [ -n "$ref" ] && { echo "$ref"; return; }
    echo "lab.sh: $1 has no reference module named $base under lib/ or sim/" >&2; exit 2
}
generate() { # reference readme [only] -> learner file on stdout
    awk -v src="$1" -v readme="$2" -v only="${3:-}" -f labs/labgen.awk "$1"
}
regions_of() { sed -n 's|^[[:space:]]*// LAB:BEGIN \([^[:space:]]*\).*|\1|p' "$@"; }
lab_regions() { local f; for f in $(learner_files "$1"); do regions_of "$(reference_of "$f")"; done; } # lab dir -> its regions

case "${1:-}" in
--write-skeletons|--check-skeletons)
    status=0
    for dir in labs/[0-9][0-9]-*/; do
        dir=${dir%/}
        for f in $(learner_files "$dir"); do
            ref=$(reference_of "$f")
            if [ "$1" = --write-skeletons ]; then
                # A learner's work is what differs from both the committed file and the
                # skeleton: kept, unless FORCE=1 (git diff: 1 = changed; no git: written).
                changed=0; git diff --quiet HEAD -- "$f" 2>/dev/null || changed=$?
                if [ "$changed" = 1 ] && [ "${FORCE:-0}" != 1 ] && ! cmp -s "$f" <(generate "$ref" "$dir/README.md"); then
                    echo "kept $f: it has changes not committed, your solution? (commit them, or: make lab-skeletons FORCE=1)"
                    status=1; continue
                fi
                generate "$ref" "$dir/README.md" > "$f"; echo "wrote $f"
            elif ! diff -u "$f" <(generate "$ref" "$dir/README.md") > /dev/null; then
                echo "$f differs from the skeleton generated from $ref (run: make lab-skeletons)"; status=1
            fi
        done
    done
    exit $status ;;
--regions)
    lab_regions "$(lab_dir "$2")"
    exit 0 ;;
--reference-mutant)
    dir=$(lab_dir "$2")
    echo "# lab $2's reference itself, written as a mutant"
    for f in $(learner_files "$dir"); do awk -v as_mutant=1 -f labs/labgen.awk "$(reference_of "$f")"; done
    exit 0 ;;
""|-h|--help)
    sed -n '2,/^[^#]/s/^#\( \|$\)//p' "$0"; exit 0 ;; # the comment at the top
esac

n=$1; impl=${2:-student}
shift $(($# < 2 ? $# : 2))
dir=$(lab_dir "$n")
# Without its learner file a lab would link the reference and grade it at full marks.
[ -n "$(learner_files "$dir" || true)" ] || { echo "lab.sh: lab $n has no learner file in $dir (its *.c besides" \
    "grade.c): moved or deleted? 'git checkout $dir' brings the skeleton back" >&2; exit 2; }
case "$impl" in
mutant:*) mutant=${impl#mutant:}
    [ -f "$mutant" ] || { echo "lab.sh: $mutant: no such mutant file" >&2; exit 2; }
    out="$BUILD/labs/lab-$n/mutant-$(basename "$mutant" .mutant)"
    regions=$(lab_regions "$dir" | paste -sd ' ') ;;
only:*) lab_regions "$dir" | grep -qx -- "${impl#only:}" ||
        { echo "lab.sh: lab $n has no region named ${impl#only:} (its regions: $(lab_regions "$dir" | paste -sd ' '))" >&2; exit 2; }
    out="$BUILD/labs/lab-$n/${impl//:/-}" ;;
student|ref|skeleton) out="$BUILD/labs/lab-$n/$impl" ;;
*) echo "lab.sh: unknown implementation '$impl' (student, ref, skeleton, only:REGION or mutant:FILE)" >&2; exit 2 ;;
esac
# Grading needs the build's compiler flags, which make knows (CPPFLAGS is
# never empty there): run by hand, lab.sh grades through make.
[ -n "${CPPFLAGS:-}" ] || exec make --no-print-directory BUILD="$BUILD" lab-"$n" IMPL="$impl" GRADE_FLAGS="$*"
mkdir -p "$out"

# The sources that stand in for the reference modules, per implementation.
srcs=(); excluded=()
for f in $(learner_files "$dir"); do
    ref=$(reference_of "$f")
    excluded+=("$(basename "${ref%.c}").o")
    case "$impl" in
    student) srcs+=("$f") ;;
    ref) srcs+=("$ref") ;;
    skeleton) generate "$ref" "$dir/README.md" > "$out/$(basename "$f")"; srcs+=("$out/$(basename "$f")") ;;
    only:*) region=${impl#only:}
        if regions_of "$ref" | grep -qx "$region"; then generate "$ref" "$dir/README.md" "$region" > "$out/$(basename "$f")"
        else cp "$ref" "$out/$(basename "$f")"; fi
        srcs+=("$out/$(basename "$f")") ;;
    mutant:*)
        awk -v src="$ref" -v mutant="$mutant" -v lab_regions="$regions" -f labs/labgen.awk "$ref" \
            > "$out/$(basename "$f")" || exit 2
        srcs+=("$out/$(basename "$f")") ;;
    esac
done

# Learner files are works in progress: unused helpers are not an error there.
warn="-Wall -Wextra -Werror -Wno-unused-function -Wno-unused-parameter -Wno-unused-variable -Wno-unused-but-set-variable"

# What does not depend on the learner's file (the tests, the harness, the
# library less the modules under test) is built once and kept up to date by
# labs/lab.mk; the lock keeps two grades at once from building it together.
# Its flags file changes only with the flags, so that new flags rebuild it.
mkdir -p "$BUILD/labs"
flags="${CC:-cc} ${CPPFLAGS:-} ${CFLAGS:-} $warn"
[ "$(cat "$BUILD/labs/flags" 2>/dev/null)" = "$flags" ] || printf '%s\n' "$flags" > "$BUILD/labs/flags"
shared="$BUILD/labs/lab-$n/shared"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL flock "$BUILD/labs/build.lock" \
    make -s --no-print-directory -f labs/lab.mk BUILD="$BUILD" LAB_DIR="$dir" SHARED="$shared" \
    EXCLUDED="${excluded[*]}" FLAGS_FILE="$BUILD/labs/flags" CC="${CC:-cc}" CPPFLAGS="${CPPFLAGS:-}" \
    CFLAGS="${CFLAGS:-}" LAB_WARN="$warn"
# shellcheck disable=SC2086
${CC:-cc} ${CPPFLAGS:-} -Ilabs -Itests/harness -I"$dir" ${CFLAGS:-} $warn ${LDFLAGS:-} \
    -o "$out/grade" "$shared/grade.o" "${srcs[@]}" "$BUILD"/labs/harness/{grader,isolate,heap}.o \
    "$shared/libbase.a" ${LDLIBS:-}
echo "lab $n ($dir), implementation: $impl"
exec "$out/grade" "$@"
