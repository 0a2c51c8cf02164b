/* check: registry and runner behind check.h; the main() of every tests/test_*.c.
 *
 * Usage: build/tests/test_x [NAME...]   (no names: run them all)
 * Prints "PASS test_x.NAME" or "FAIL test_x.NAME: reason" per test, exits 1 if
 * any failed. CHECK_TIMEOUT=seconds (1 to a day) overrides the default
 * per-test limit.
 */
#include "check.h"

#include "base/cli.h"
#include "base/error.h"
#include "isolate.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_MAX_TESTS 512
#define CHECK_DEFAULT_TIMEOUT_S 120
#define CHECK_MAX_TIMEOUT_S 86400 /* a day: a test that needs more is a hang */

static struct {
    const char *name;
    void (*fn)(void);
} check_tests[CHECK_MAX_TESTS];
static int check_count;

void check_register(const char *name, void (*fn)(void))
{
    if (check_count == CHECK_MAX_TESTS) {
        fprintf(stderr, "check: more than %d tests in one program\n", CHECK_MAX_TESTS);
        exit(2);
    }
    check_tests[check_count].name = name;
    check_tests[check_count].fn = fn;
    check_count++;
}

static int check_selected(const char *name, int argc, char **argv)
{
    if (argc <= 1)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *prog = basename(argv[0]);
    uint64_t timeout_s = CHECK_DEFAULT_TIMEOUT_S;
    const char *limit = getenv("CHECK_TIMEOUT");
    if (limit && cli_parse_env("CHECK_TIMEOUT", limit, 1, CHECK_MAX_TIMEOUT_S, &timeout_s) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err_msg()); /* atoi would make "1O" a limit of 1 s */
        return 2;
    }
    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: %s [TEST...]\nRuns the named tests (default: all), each in its own process.\n", prog);
        for (int i = 0; i < check_count; i++)
            printf("  %s\n", check_tests[i].name);
        return 0;
    }
    check_tmpdir(); /* create before forking, so children share one directory */
    int failed = 0;
    for (int i = 0; i < check_count; i++) {
        if (!check_selected(check_tests[i].name, argc, argv))
            continue;
        static char reason[16384];
        if (isolate_run(check_tests[i].fn, (unsigned)timeout_s, reason, sizeof reason)) {
            if (strncmp(reason, "skipped: ", 9) == 0) /* check_skip() said why */
                printf("PASS %s.%s (%s)\n", prog, check_tests[i].name, reason);
            else
                printf("PASS %s.%s\n", prog, check_tests[i].name);
        } else {
            printf("FAIL %s.%s: ", prog, check_tests[i].name);
            isolate_print_reason(stdout, reason, " | ");
            putchar('\n');
            failed++;
        }
        fflush(stdout);
    }
    isolate_tmpdir_remove();
    return failed ? 1 : 0;
}
