/* grader: runs a lab's tests in isolated children and prints points and a score (see grader.h). */
#include "grader.h"

#include "isolate.h"

#include <stdio.h>
#include <string.h>

int grade_main(int argc, char **argv, const struct grade_test *tests, size_t count)
{
    int fail_fast = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0) {
            printf("usage: %s [--fail-fast]\nGrades this lab: each test runs in its own process with a time limit.\n"
                   "  --fail-fast  stop at the first failed test (the score then counts the tests not run as lost)\n",
                   argv[0]);
            for (size_t i = 0; i < count; i++)
                printf("  %-32s %3d points, %u s\n", tests[i].name, tests[i].points, tests[i].timeout_s);
            return 0;
        }
        if (strcmp(argv[a], "--fail-fast") != 0) {
            fprintf(stderr, "%s: unknown flag '%s' (--help, --fail-fast)\n", argv[0], argv[a]);
            return 2;
        }
        fail_fast = 1;
    }
    int score = 0, total = 0, passed = 0, failed = 0;
    size_t not_run = 0;
    check_tmpdir(); /* before forking, so the tests' children share it */
    for (size_t i = 0; i < count; i++) {
        static char reason[8192];
        total += tests[i].points;
        if (fail_fast && failed) {
            not_run++;
            continue;
        }
        if (isolate_run_confined(tests[i].run, tests[i].timeout_s, reason, sizeof reason)) {
            printf("%s: OK (%d)\n", tests[i].name, tests[i].points);
            score += tests[i].points;
            passed++;
        } else {
            printf("%s: FAIL (0/%d) ", tests[i].name, tests[i].points);
            isolate_print_reason(stdout, reason, "\n    ");
            putchar('\n');
            failed++;
        }
        fflush(stdout);
    }
    isolate_tmpdir_remove();
    if (not_run)
        printf("(--fail-fast: %zu tests not run)\n", not_run);
    printf("Score: %d/%d\n", score, total);
    printf("%d passed, %d failed\n", passed, failed);
    return score == total ? 0 : 1;
}
