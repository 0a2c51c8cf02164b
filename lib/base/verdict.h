/* verdict: the one line every benchmark comparison ends with.
 *
 * Where it sits: at the end of each comparison of `make bench`. A figure is
 * printed beside the peer or limit it was measured against in the same run,
 * their ratio, the target, and PASS or MISS, always in this shape:
 *
 *   bench: <what>: <figure> <unit> | <peer or limit>: <figure> <unit> | ratio <x.xx> | target <op> <t> | PASS|MISS
 *   bench: <what> | <peer or limit> | target <op> <t> | not run: <why>
 *
 * The second form is for a comparison that could not run here (no GPU, no
 * PyTorch): it says why instead of a figure. C benchmarks call verdict_print();
 * shell benchmarks call the program build/tools/verdict through tools/bench.sh,
 * which calls this module, so the format is written down once, here. `make
 * report` and the tests read the lines back with verdict_parse().
 *
 * Read struct verdict, then verdict_print().
 */
#ifndef DDP_VERDICT_H
#define DDP_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* How the ratio is judged against the target. */
enum verdict_op {
    VERDICT_AT_LEAST, /* ">=": a speed-up, a fraction of a limit reached */
    VERDICT_AT_MOST,  /* "<=": a slowdown against a bound, an overhead */
};

/* One comparison. The ratio is given, not derived, because its direction
 * depends on the figures: rates divide ours by the peer's, times the peer's by
 * ours (or ours by a bound). */
struct verdict {
    const char *what;      /* what was measured: "random IDX reads, batched" */
    double figure;         /* its figure ... */
    const char *unit;      /* ... and unit: "M records/s" */
    const char *peer;      /* the peer or limit: "memcpy, same run" */
    double peer_figure;
    const char *peer_unit;
    double ratio;          /* printed with two decimals; judged as printed */
    enum verdict_op op;
    double target;
};

/* Prints the line (with its newline) to `out`. PASS or MISS is decided on the
 * ratio rounded to the two decimals printed, so a line never reads "ratio 1.50
 * | target >= 1.5 | MISS". Returns 1 for PASS, 0 for MISS, or ERR_ARG (nothing
 * printed) when a number is not finite or a text is empty or holds what would
 * break the line apart: a newline, " | ", or in a unit ": ". */
int verdict_print(FILE *out, const struct verdict *v);

/* Prints the not-run form: what, peer, target and why it did not run ("no
 * GPU", "PyTorch is not installed"). 0, or ERR_ARG as verdict_print(). */
int verdict_print_not_run(FILE *out, const char *what, const char *peer, enum verdict_op op, double target,
                          const char *why);

/* A figure as the line prints it: three significant digits, no exponent from
 * 1e-4 up (0.0471, 5.23, 16.5, 123, 68382). */
void verdict_format_figure(double x, char *buf, size_t size);

/* "<=" or ">=". */
const char *verdict_op_text(enum verdict_op op);

/* Parses "<op><number>" or "<op> <number>" (">=10", "<= 2") into *op and
 * *target. 0 or ERR_ARG naming the text. */
int verdict_parse_target(const char *text, enum verdict_op *op, double *target);

/* A line read back. The strings point into `text`, which owns them. */
struct verdict_line {
    struct verdict v;      /* for a not-run line: what, peer, op and target only */
    bool ran;              /* false for the not-run form */
    bool pass;             /* PASS (ran only) */
    const char *why;       /* not-run form: why */
    char text[1024];
};

/* Parses one line printed by verdict_print() or verdict_print_not_run()
 * (without or with its newline). Returns 0, or ERR_FORMAT with err_msg()
 * saying which part is wrong; a PASS or MISS that disagrees with the ratio and
 * target printed beside it is wrong too. */
int verdict_parse(const char *line, struct verdict_line *out);

/* True when `line` starts with the verdict prefix "bench: " (so it must parse). */
bool verdict_is_line(const char *line);

#endif
