# labs.sh: the grader self-checks of every lab (part of `make test`).
#
# For each labs/NN-name/: the committed learner file equals the one generated
# from the reference; the reference scores full marks; the untouched skeleton
# loses points; and each exercise region, stubbed on its own, loses points,
# which proves that every region is actually tested by the grader. Those two
# are graded with --fail-fast: the first lost test proves it.
#
# Then the stored wrong solutions: every tests/labs/mutants/NN-what.mutant
# (format: labs/labgen.awk) must lose points in lab NN's grader. One PASS or
# FAIL per mutant; a mutant that keeps full marks is a hole in the grader, and
# its FAIL line quotes the mutant's first comment line. Mutants are graded with
# --fail-fast: one lost test is enough, and a hang costs one time limit, not
# one per test. The check itself is checked: a mutant that is the reference in
# disguise must be reported as surviving, one that does not build must not
# count as caught, and one naming a region the lab lacks must be refused.
# Around the grader, what a learner may get wrong is told, never graded as
# something else: a lab number that is none, lab.sh run by hand, make
# lab-skeletons over their work, a learner file moved away, a step that
# returns "true" (named, not a crash in the code around it).
# Last, what every grade of a lab shares, built once, must follow the
# compiler flags and the library it was built from.
. "$(dirname "$0")/../harness/lib.sh"
[ "${SUITE:-plain}" = plain ] || exit 0

lab_number() { echo $((10#$1)); } # "05" -> 5

# Grades mutant FILE in lab N; sets VERDICT to caught, survives or broken,
# and DETAIL to the test that caught it or to what went wrong. (Through make,
# every failure exits 2: the Score line, or its absence, tells them apart.)
mutant_verdict() {
    local n=$1 file=$2 score
    t_run make -s BUILD="$BUILD" lab-"$n" IMPL="mutant:$file" GRADE_FLAGS=--fail-fast
    score=$(sed -n 's/^Score: \([0-9]*\/[0-9]*\)$/\1/p' <<<"$T_OUT" | tail -n 1)
    if [ -z "$score" ]; then
        DETAIL=$(grep -m1 -E '^(labgen|lab\.sh): ' <<<"$T_OUT" || true)
        VERDICT=broken DETAIL=${DETAIL:-"it does not build or the grader did not finish (status $T_STATUS): $(tail -n 4 <<<"$T_OUT" | tr '\n' ' ')"}
    elif [ "${score%/*}" = "${score#*/}" ]; then
        VERDICT=survives DETAIL="full marks ($score)"
    else
        VERDICT=caught DETAIL="caught by $(grep -m1 -o '^[^ :]*: FAIL' <<<"$T_OUT" | cut -d: -f1)"
    fi
}

t_ok skeletons_equal_generated bash labs/lab.sh --check-skeletons
for dir in labs/[0-9][0-9]-*/; do
    [ -f "$dir/grade.c" ] || continue
    n=$(lab_number "$(basename "$dir" | cut -d- -f1)")
    probe_n=$n
    t_ok "lab-$n.reference_full_marks" make -s BUILD="$BUILD" lab-"$n" IMPL=ref
    t_fail "lab-$n.skeleton_loses_points" nonzero "FAIL (0/" \
        make -s BUILD="$BUILD" lab-"$n" IMPL=skeleton GRADE_FLAGS=--fail-fast
    for region in $(bash labs/lab.sh --regions "$n"); do
        t_fail "lab-$n.region_${region}_is_tested" nonzero "FAIL (0/" \
            make -s BUILD="$BUILD" lab-"$n" IMPL="only:$region" GRADE_FLAGS=--fail-fast
    done
    bash labs/lab.sh --reference-mutant "$n" > "$T_TMP/reference.mutant"
    mutant_verdict "$n" "$T_TMP/reference.mutant"
    if [ "$VERDICT" = survives ]; then t_pass "lab-$n.mutant_check_sees_the_reference_survive"
    else t_failed "lab-$n.mutant_check_sees_the_reference_survive" "expected 'survives', got '$VERDICT': $DETAIL"; fi
done

# The check of the check, on the last lab graded above: a region the lab
# lacks is an error, and a mutant that does not compile is broken, not caught.
probe_region=$(bash labs/lab.sh --regions "$probe_n" | head -n 1)
printf '# names a region no lab has\n@@ region no-such-region\n' > "$T_TMP/no-region.mutant"
t_fail mutant_naming_a_missing_region_is_refused nonzero "no region named no-such-region" \
    make -s BUILD="$BUILD" lab-"$probe_n" IMPL="mutant:$T_TMP/no-region.mutant"
t_fail only_a_missing_region_is_refused 2 "lab $probe_n has no region named no-such-region" \
    make -s BUILD="$BUILD" lab-"$probe_n" IMPL=only:no-such-region
# What a learner may type for N: out of range, 0-padded past 07 (no octal), not a number.
for bad in 0 $((probe_n + 1)) 0$((probe_n + 2)) abc 1x; do
    t_fail "lab_${bad}_is_no_lab" 2 "there is no lab '$bad' (the labs: 1 " make -s BUILD="$BUILD" lab-"$bad"
done
t_fail lab_without_a_number_is_no_lab 2 "make lab-N: N is a lab's number" make -s BUILD="$BUILD" lab-
# lab.sh's own usage, by hand and without make's flags, grades as make lab-N does.
t_ok lab_sh_by_hand_grades_through_make \
    env -u CPPFLAGS -u CFLAGS BUILD="$BUILD" bash labs/lab.sh "$probe_n" ref --fail-fast
printf '# does not compile\n@@ region %s\n    this is not C;\n' "$probe_region" > "$T_TMP/no-build.mutant"
mutant_verdict "$probe_n" "$T_TMP/no-build.mutant"
if [ "$VERDICT" = broken ]; then t_pass mutant_that_does_not_build_is_not_caught
else t_failed mutant_that_does_not_build_is_not_caught "expected 'broken', got '$VERDICT': $DETAIL"; fi

# make lab-skeletons keeps a learner's work: a learner file with changes not
# committed (in a copy of the labs and their references, a repository of its
# own), unless FORCE=1; a file already equal to its skeleton is no work lost.
repo=$T_TMP/skeletons
mkdir -p "$repo" && cp -r labs lib sim "$repo" && git -C "$repo" init -q &&
    git -C "$repo" add -A && git -C "$repo" -c user.name=t -c user.email=t@t commit -qm copy
learner=$(cd "$repo" && ls labs/02-*/*.c | grep -v /grade.c)
echo '/* my solution */' >> "$repo/$learner"
t_fail lab_skeletons_keep_a_learners_work 1 "kept $learner: it has changes not committed" \
    bash "$repo/labs/lab.sh" --write-skeletons
t_out lab_skeletons_keep_the_file_itself "/* my solution */" tail -n 1 "$repo/$learner"
t_out lab_skeletons_force_overwrites "wrote $learner" env FORCE=1 bash "$repo/labs/lab.sh" --write-skeletons
echo '/* an older skeleton */' >> "$repo/$learner" && git -C "$repo" commit -qam older &&
    bash "$repo/labs/lab.sh" --write-skeletons > /dev/null # a reference changed: regenerated
t_ok lab_skeletons_twice_is_no_loss bash "$repo/labs/lab.sh" --write-skeletons
# Nor is a learner file moved or deleted graded as the reference it stands in for.
rm "$repo/$learner"
t_fail lab_without_its_learner_file_is_refused 2 "lab 2 has no learner file in labs/02-" \
    env BUILD="$repo/build" bash "$repo/labs/lab.sh" 2

# A wrong solution that crashes the code around it is told by name, not as
# the crash: a step's "true" is not a SIGSEGV in the code around it.
t_fail lab-1.scan_returning_1_is_named nonzero "jsonl_scan returned 1: 0 once every line is done" \
    make -s BUILD="$BUILD" lab-1 IMPL=mutant:tests/labs/mutants/01-scan-returns-1-when-done.mutant GRADE_FLAGS=--fail-fast
t_fail lab-4.hand_over_returning_1_is_named nonzero "prefetch_hand_over returned 1: 0 when done" \
    make -s BUILD="$BUILD" lab-4 IMPL=mutant:tests/labs/mutants/04-hand-over-returns-1.mutant GRADE_FLAGS=--fail-fast

# The stored wrong solutions: each must lose points. They are graded two at a
# time (most of a mutant's time is its compile, or a deadlock waiting for its
# timeout), each verdict kept in a file, then reported in the files' order.
MUTANT_JOBS=2
mkdir -p "$T_TMP/verdicts"
for file in tests/labs/mutants/*.mutant; do
    [ -f "$file" ] || continue
    name=$(basename "$file" .mutant)
    [[ $name =~ ^([0-9][0-9])-[a-z0-9][a-z0-9-]*$ ]] || continue
    while [ "$(jobs -rp | wc -l)" -ge $MUTANT_JOBS ]; do wait -n; done
    (mutant_verdict "$(lab_number "${BASH_REMATCH[1]}")" "$file"
     printf '%s\n%s\n' "$VERDICT" "$DETAIL" > "$T_TMP/verdicts/$name") &
done
wait
for file in tests/labs/mutants/*.mutant; do
    [ -f "$file" ] || continue
    name=$(basename "$file" .mutant)
    if ! [[ $name =~ ^([0-9][0-9])-[a-z0-9][a-z0-9-]*$ ]]; then
        t_failed "mutant_$name" "a mutant file is named NN-what-is-wrong.mutant (NN: its lab, two digits; lower case, digits and '-')"
        continue
    fi
    n=$(lab_number "${BASH_REMATCH[1]}")
    { read -r VERDICT; read -r DETAIL; } < "$T_TMP/verdicts/$name" || VERDICT=broken DETAIL="no verdict (the check itself failed)"
    case $VERDICT in
    caught) t_pass "lab-$n.mutant_$name ($DETAIL)" ;;
    survives) t_failed "lab-$n.mutant_$name" "survives with $DETAIL, so the grader misses: \"$(head -n 1 "$file" | sed 's/^#[[:space:]]*//')\"" ;;
    *) t_failed "lab-$n.mutant_$name" "$DETAIL" ;;
    esac
done

# What every grade of a lab shares is built once (labs/lab.mk), so it must be
# rebuilt when what it is built from changes: spoil it, dated before the
# change (other compiler flags; a library rebuilt after the stripped copy was
# made), and the next grade must still score full marks.
shared=$BUILD/labs/lab-$probe_n/shared
spoil() { printf 'spoilt\n' > "$1" && touch -d "@$(($2 - 1))" "$1"; } # FILE SECONDS: spoilt, dated a second before
spoil "$shared/grade.o" "$(date +%s)" && printf 'other flags\n' > "$BUILD/labs/flags"
t_ok lab_shared_parts_follow_the_flags make -s BUILD="$BUILD" lab-"$probe_n" IMPL=ref GRADE_FLAGS=--fail-fast
spoil "$shared/libbase.a" "$(stat -c %Y "$BUILD/libddp.a")"
t_ok lab_shared_parts_follow_the_library make -s BUILD="$BUILD" lab-"$probe_n" IMPL=ref GRADE_FLAGS=--fail-fast
