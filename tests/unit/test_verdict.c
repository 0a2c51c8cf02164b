/* test_verdict: lib/base/verdict prints the one benchmark verdict line and
 * reads it back: round trips, PASS and MISS decided on the printed ratio,
 * texts that would break the line refused, and malformed lines named. */
#include "check.h"
#include "base/error.h"
#include "base/verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* verdict_print() into a string; returns its result, the line in *line (free it). */
static int print_to_string(const struct verdict *v, char **line)
{
    size_t size;
    FILE *f = open_memstream(line, &size);
    CHECK(f != NULL);
    int rc = verdict_print(f, v);
    fclose(f);
    return rc;
}

static struct verdict sample(double ratio, enum verdict_op op, double target)
{
    return (struct verdict){.what = "chapter 1: random IDX reads, batched", .figure = 5.2345, .unit = "M records/s",
                            .peer = "memcpy, same run", .peer_figure = 9.75, .peer_unit = "GB/s", .ratio = ratio,
                            .op = op, .target = target};
}

TEST(verdict_line_has_the_shared_shape)
{
    struct verdict v = sample(0.6912, VERDICT_AT_LEAST, 0.5);
    char *line;
    CHECK_EQ(print_to_string(&v, &line), 1);
    CHECK_STR(line, "bench: chapter 1: random IDX reads, batched: 5.23 M records/s | memcpy, same run: 9.75 GB/s"
                       " | ratio 0.69 | target >= 0.5 | PASS\n");
    free(line);
}

TEST(verdict_round_trips)
{
    struct verdict v = sample(2.38, VERDICT_AT_MOST, 2);
    char *line;
    CHECK_EQ(print_to_string(&v, &line), 0);
    struct verdict_line got;
    CHECK_MSG(verdict_parse(line, &got) == 0, "%s: %s", line, err_msg());
    CHECK(got.ran);
    CHECK(!got.pass);
    CHECK_STR(got.v.what, v.what); /* ": " inside the what is kept */
    CHECK_STR(got.v.unit, "M records/s");
    CHECK_STR(got.v.peer, v.peer);
    CHECK_STR(got.v.peer_unit, "GB/s");
    CHECK(fabs(got.v.figure - 5.23) < 1e-9);
    CHECK(fabs(got.v.peer_figure - 9.75) < 1e-9);
    CHECK(fabs(got.v.ratio - 2.38) < 1e-9);
    CHECK_EQ(got.v.op, VERDICT_AT_MOST);
    CHECK(got.v.target == 2);
    free(line);
}

TEST(verdict_is_judged_on_the_printed_ratio)
{
    char *line;
    struct verdict v = sample(1.499, VERDICT_AT_LEAST, 1.5); /* prints 1.50 */
    CHECK_EQ(print_to_string(&v, &line), 1);
    CHECK_CONTAINS(line, "ratio 1.50 | target >= 1.5 | PASS");
    free(line);
    v = sample(1.494, VERDICT_AT_LEAST, 1.5); /* prints 1.49 */
    CHECK_EQ(print_to_string(&v, &line), 0);
    CHECK_CONTAINS(line, "ratio 1.49 | target >= 1.5 | MISS");
    free(line);
    v = sample(2.004, VERDICT_AT_MOST, 2); /* prints 2.00: within */
    CHECK_EQ(print_to_string(&v, &line), 1);
    free(line);
}

TEST(verdict_figures_keep_three_digits_without_exponents)
{
    char *line;
    struct verdict v = sample(1, VERDICT_AT_LEAST, 1);
    v.figure = 68382.4;
    v.peer_figure = 0.0471;
    CHECK_EQ(print_to_string(&v, &line), 1);
    CHECK_CONTAINS(line, ": 68382 M records/s | memcpy, same run: 0.0471 GB/s |");
    free(line);
}

TEST(verdict_not_run_round_trips)
{
    char *line;
    size_t size;
    FILE *f = open_memstream(&line, &size);
    CHECK_EQ(verdict_print_not_run(f, "pinned host-to-device copy", "PCIe 4.0 x16 limit", VERDICT_AT_LEAST, 0.8,
                                   "no GPU"),
             0);
    fclose(f);
    CHECK_STR(line, "bench: pinned host-to-device copy | PCIe 4.0 x16 limit | target >= 0.8 | not run: no GPU\n");
    struct verdict_line got;
    CHECK_MSG(verdict_parse(line, &got) == 0, "%s", err_msg());
    CHECK(!got.ran);
    CHECK_STR(got.why, "no GPU");
    CHECK_STR(got.v.peer, "PCIe 4.0 x16 limit");
    free(line);
}

TEST(verdict_refuses_what_would_break_the_line)
{
    char *line;
    struct verdict v = sample(1, VERDICT_AT_LEAST, 1);
    v.what = "ring | tree";
    CHECK_EQ(print_to_string(&v, &line), ERR_ARG);
    CHECK_STR(line, ""); /* nothing printed */
    free(line);
    v = sample(1, VERDICT_AT_LEAST, 1);
    v.unit = "records: per s";
    CHECK_EQ(print_to_string(&v, &line), ERR_ARG);
    free(line);
    v = sample(NAN, VERDICT_AT_LEAST, 1);
    CHECK_EQ(print_to_string(&v, &line), ERR_ARG);
    CHECK(strstr(err_msg(), "ratio") != NULL);
    free(line);
    v = sample(1, VERDICT_AT_LEAST, 1);
    v.peer_unit = "";
    CHECK_EQ(print_to_string(&v, &line), ERR_ARG);
    free(line);
    v = sample(1, VERDICT_AT_LEAST, 1);
    v.peer = "two\nlines";
    CHECK_EQ(print_to_string(&v, &line), ERR_ARG);
    free(line);
}

TEST(verdict_parse_names_what_is_wrong)
{
    struct verdict_line got;
    static const struct {
        const char *line, *needle;
    } bad[] = {
        {"ratio 1.5: PASS", "prefix"},
        {"bench: a: 1 x | b: 1 x | ratio 1.50 | target >= 1.5", "fields"},
        {"bench: a: 1 x | b: 1 x | ratio 1.50 | target >= 1.5 | yes", "neither PASS nor MISS"},
        {"bench: a: 1 x | b: 1 x | ratio 1.40 | target >= 1.5 | PASS", "disagrees"},
        {"bench: a: 1 x | b: 1 x | ratio 2.5 | target <= 2 | PASS", "disagrees"},
        {"bench: a: fast x | b: 1 x | ratio 1.50 | target >= 1.5 | PASS", "<what>: <figure> <unit>"},
        {"bench: a: 1 | b: 1 x | ratio 1.50 | target >= 1.5 | PASS", "<what>: <figure> <unit>"},
        {"bench: a: 1 x | b: 1 x | ratio 1.5x | target >= 1.5 | PASS", "ratio <x.xx>"},
        {"bench: a: 1 x | b: 1 x | ratio 1.50 | target > 1.5 | PASS", "target <op> <t>"},
        {"bench: a | b | target >= 1 | not run: ", "empty"},
        {"bench: a: 1 x | b: 1 x | ratio 1.50 | target >= 1.5 | PASS | extra", "fields"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(verdict_parse(bad[i].line, &got) == ERR_FORMAT, "accepted: %s", bad[i].line);
        CHECK_MSG(strstr(err_msg(), bad[i].needle) != NULL, "%s: message '%s' lacks '%s'", bad[i].line, err_msg(),
                  bad[i].needle);
    }
}

TEST(verdict_target_text)
{
    enum verdict_op op;
    double t;
    CHECK_EQ(verdict_parse_target(">=10", &op, &t), 0);
    CHECK(op == VERDICT_AT_LEAST && t == 10);
    CHECK_EQ(verdict_parse_target("<= 2", &op, &t), 0);
    CHECK(op == VERDICT_AT_MOST && t == 2);
    CHECK_EQ(verdict_parse_target("=2", &op, &t), ERR_ARG);
    CHECK_EQ(verdict_parse_target(">=", &op, &t), ERR_ARG);
    CHECK_EQ(verdict_parse_target(">=nan", &op, &t), ERR_ARG);
    CHECK_EQ(verdict_parse_target(">=0x10", &op, &t), ERR_ARG); /* strtod would read 16 */
    CHECK_EQ(verdict_parse_target(">=\t5", &op, &t), ERR_ARG);
    CHECK_EQ(verdict_parse_target(">=5 ", &op, &t), ERR_ARG);
}
