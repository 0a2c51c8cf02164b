/* grader: the engine behind every labs/NN-name/grade.c (`make lab-N`).
 *
 * A grade.c lists its tests with points and hands them to grade_main():
 *
 *     static const struct grade_test tests[] = {
 *         {"index-build-small", 10, 5, test_index_build_small},
 *         ...
 *     };
 *     int main(int argc, char **argv) { return GRADE_MAIN(argc, argv, tests); }
 *
 * Each test runs in a child process with its time limit, its stdout captured
 * and an empty working directory of its own (isolate_run_confined in
 * tests/harness/isolate.h), and uses the CHECK macros of tests/harness/check.h. Output, in the style of
 * the xv6 labs' `make grade`:
 *
 *     index-build-small: OK (10)
 *     index-lookup: FAIL (0/10) dataset_jsonl.c:88: record 3: expected ..., got ...
 *     Score: 10/20
 *     1 passed, 1 failed
 *
 * The exit status is 0 only at full marks. `grade --fail-fast` stops at the
 * first failed test (the tests not run count as lost): the mutant check in
 * tests/programs/labs.sh only needs to know that a wrong solution loses points.
 */
#ifndef DDP_GRADER_H
#define DDP_GRADER_H

#include "check.h"

#include <stddef.h>

struct grade_test {
    const char *name;
    int points;
    unsigned timeout_s;
    void (*run)(void);
};

int grade_main(int argc, char **argv, const struct grade_test *tests, size_t count);

#define GRADE_MAIN(argc, argv, tests) grade_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]))

#endif
