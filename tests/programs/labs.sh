# labs.sh: the grader self-checks of every lab (part of `make test`).
#
# For each labs/NN-name/: the committed learner file equals the one generated
# from the reference; the reference scores full marks; the untouched skeleton
# loses points; and each exercise region, stubbed on its own, loses points,
# which proves that every region is actually tested by the grader.
. "$(dirname "$0")/../harness/lib.sh"
[ "${SUITE:-plain}" = plain ] || exit 0

t_ok skeletons_equal_generated bash labs/lab.sh --check-skeletons
for dir in labs/[0-9][0-9]-*/; do
    [ -f "$dir/grade.c" ] || continue
    n=$(basename "$dir" | cut -d- -f1 | sed 's/^0//')
    t_ok "lab-$n.reference_full_marks" make -s BUILD="$BUILD" lab-"$n" IMPL=ref
    t_fail "lab-$n.skeleton_loses_points" nonzero "FAIL (0/" make -s BUILD="$BUILD" lab-"$n" IMPL=skeleton
    for region in $(bash labs/lab.sh --regions "$n"); do
        t_fail "lab-$n.region_${region}_is_tested" nonzero "FAIL (0/" make -s BUILD="$BUILD" lab-"$n" IMPL="only:$region"
    done
done
