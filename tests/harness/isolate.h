/* isolate: run one test in a child process with a time limit.
 *
 * Shared by the unit-test runner (check.c) and the lab grader (labs/grader.c):
 * a crash, an abort, a sanitizer report or an infinite loop in the code under
 * test becomes a failed test with a reason ("timed out after 5 s", "killed by
 * SIGSEGV"), never a hung or aborted run. Whatever the child writes to stderr
 * is captured and becomes part of the reason.
 */
#ifndef DDP_ISOLATE_H
#define DDP_ISOLATE_H

#include <stddef.h>
#include <stdio.h>

/* Runs fn() in a child with stderr captured. Returns 1 if fn() returned
 * and the child then exited 0 within `timeout_s` seconds (a child that calls
 * exit(0) before fn() returns fails), else 0 with `reason` (a NUL-terminated text of at most
 * reason_len bytes) saying why: the captured stderr and how the child ended. */
int isolate_run(void (*fn)(void), unsigned timeout_s, char *reason, size_t reason_len);

/* As isolate_run(), for code a learner wrote (the lab grader): the child's
 * stdout is captured too, and it runs in an empty directory of its own under
 * check_tmpdir(), removed afterwards, and no file it writes may pass 64 MiB
 * (RLIMIT_FSIZE: a write past it fails). A child that prints to stdout or leaves
 * a file in that directory fails, with the start of what it printed or the
 * file's name: so the grader's lines stay its own, and a stray file never
 * lands in the repository. */
int isolate_run_confined(void (*fn)(void), unsigned timeout_s, char *reason, size_t reason_len);

/* Prints `reason` to f with every line break replaced by `separator`: " | "
 * keeps a failure on the one line the test runner counts, "\n    " indents
 * it under the grader's verdict. */
void isolate_print_reason(FILE *f, const char *reason, const char *separator);

/* check_fail() and check_tmpdir() (check.h) live beside isolate_run(), so that
 * the unit-test runner and the lab grader both have them. Create the temporary
 * directory before the first isolate_run() so that every child shares it;
 * this removes it at the end of the run. */
void isolate_tmpdir_remove(void);

#endif
