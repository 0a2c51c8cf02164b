/* test_foundation: the house's own pieces: errors, flag parsing, sizes
 * written one way, deadlines that never wrap, sizes checked before malloc,
 * the synthetic dataset's determinism and bounds, rank threads carrying the
 * first failure. */
#include "check.h"
#include "base/cli.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/units.h"
#include "dataset/dataset.h"
#include "base/error.h"
#include "sim/ranks.h"

#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

TEST(error_wrap_keeps_the_cause)
{
    CHECK_EQ(err_set(ERR_FORMAT, "byte %d: bad magic", 4), ERR_FORMAT);
    CHECK_EQ(err_wrap(ERR_FORMAT, "opening %s", "x.idx"), ERR_FORMAT);
    CHECK_STR(err_msg(), "opening x.idx: byte 4: bad magic");
}

/* What every parser refuses: the text must be the value, all of it. */
static const char *const cli_not_numbers[] = {
    "", " 5", "5 ", "\t5", "5\n", "+5", "5x", "x5", "0x10", "5,", NULL,
};

TEST(cli_integers_are_the_whole_text_and_in_range)
{
    uint64_t v = 7;
    CHECK_OK(cli_parse_range("world", "64", 1, 64, &v));
    CHECK_EQ_U64(v, 64);
    CHECK_OK(cli_parse_range("world", "007", 1, 64, &v));
    CHECK_EQ_U64(v, 7);
    for (const char *const *t = cli_not_numbers; *t; t++) {
        char want[64];
        snprintf(want, sizeof want, "--world: expected 1 to 64, got '%s'", *t);
        CHECK_ERR(cli_parse_range("world", *t, 1, 64, &v), ERR_ARG, want);
    }
    CHECK_ERR(cli_parse_range("world", "-3", 0, 64, &v), ERR_ARG, "--world: expected 0 to 64, got '-3'");
    CHECK_ERR(cli_parse_range("world", "65", 1, 64, &v), ERR_ARG, "--world: expected 1 to 64, got '65'");
    CHECK_ERR(cli_parse_range("world", "0", 1, 64, &v), ERR_ARG, "expected 1 to 64");
    CHECK_ERR(cli_parse_range("world", NULL, 1, 64, &v), ERR_ARG, "--world: expected 1 to 64, got ''");
    /* the whole of 64 bits, and not one more: never capped to 2^64-1 */
    CHECK_OK(cli_parse_range("steps", "18446744073709551615", 1, UINT64_MAX, &v));
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_ERR(cli_parse_range("steps", "18446744073709551616", 1, UINT64_MAX, &v), ERR_ARG,
              "--steps: expected 1 to 18446744073709551615, got '18446744073709551616'");
    CHECK_ERR(cli_parse_range("steps", "99999999999999999999999", 1, UINT64_MAX, &v), ERR_ARG, "expected 1 to");
    CHECK_ERR(cli_parse_range("world", "18446744073709551617", 1, 64, &v), ERR_ARG, "expected 1 to 64");
    CHECK_EQ_U64(v, UINT64_MAX); /* a refused value leaves *out as it was */
}

TEST(cli_numbers_are_finite_decimals_in_range)
{
    double d = 7;
    CHECK_OK(cli_parse_double_range("lr", "0.5", 0, 1, &d));
    CHECK(d == 0.5);
    CHECK_OK(cli_parse_double_range("lr", "1e-3", 0, 1, &d));
    CHECK(d == 1e-3);
    CHECK_OK(cli_parse_double_range("lr", ".5", 0, 1, &d));
    CHECK_OK(cli_parse_double_range("x", "-0.25", -1, 1, &d));
    CHECK(d == -0.25);
    for (const char *const *t = cli_not_numbers; *t; t++) {
        char want[64];
        snprintf(want, sizeof want, "--lr: expected 0 to 10, got '%s'", *t);
        CHECK_ERR(cli_parse_double_range("lr", *t, 0, 10, &d), ERR_ARG, want);
        snprintf(want, sizeof want, "--figure: expected a finite number, got '%s'", *t);
        CHECK_ERR(cli_parse_double("figure", *t, &d), ERR_ARG, want);
    }
    static const char *const junk[] = {"nan", "inf", "-inf", "0x1p3", "1e999", "-1e999", "1.5.2", "-", ".", "e5",
                                       "--1", NULL};
    for (const char *const *t = junk; *t; t++) {
        CHECK_ERR(cli_parse_double_range("lr", *t, -10, 10, &d), ERR_ARG, "--lr: expected -10 to 10");
        CHECK_ERR(cli_parse_double("figure", *t, &d), ERR_ARG, "expected a finite number");
    }
    CHECK_ERR(cli_parse_double("figure", "1e999", &d), ERR_ARG,
              "--figure: expected a finite number (at most a double's largest, 1.8e308), got '1e999'");
    /* below a double's smallest normal number (strtod says ERANGE): a subnormal is the value written,
     * correctly rounded, and taken; a value closer to 0 than any double would be read as 0, and is refused
     * saying so, not as out of a range it is inside */
    static const struct {
        const char *text;
        double value;
    } small[] = {{"1e-310", 1e-310}, {"-1e-310", -1e-310}, {"3e-324", 4.9406564584124654e-324},
                 {"2.2250738585072e-308", 2.2250738585072e-308}, {"0e-999", 0}};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        d = 7;
        CHECK_OK(cli_parse_double_range("x", small[i].text, -1, 1, &d));
        CHECK_MSG(d == small[i].value, "%s read as %g", small[i].text, d);
        d = 7;
        CHECK_OK(cli_parse_double("figure", small[i].text, &d));
        CHECK_MSG(d == small[i].value, "%s read as %g", small[i].text, d);
    }
    CHECK_OK(cli_parse_double_range("weight-decay", "1e-310", 0, 1e6, &d));
    static const char *const tiny[] = {"1e-400", "-1e-400", "2e-324", "0.1e-323", NULL};
    for (const char *const *t = tiny; *t; t++) {
        char want[160];
        snprintf(want, sizeof want, "--weight-decay: '%s' is not 0, but closer to 0 than any double (the nearest is "
                                    "4.9e-324), so it would be read as 0", *t);
        d = 7;
        CHECK_ERR(cli_parse_double_range("weight-decay", *t, -1, 1e6, &d), ERR_ARG, want);
        CHECK(d == 7);
        snprintf(want, sizeof want, "--figure: '%s' is not 0, but closer to 0", *t);
        CHECK_ERR(cli_parse_double("figure", *t, &d), ERR_ARG, want);
        CHECK(d == 7);
    }
    CHECK_ERR(cli_parse_double_range("step-ms", "-1", 0, 10, &d), ERR_ARG, "--step-ms: expected 0 to 10, got '-1'");
    CHECK_ERR(cli_parse_double_range("step-ms", "-0", 0, 10, &d), ERR_ARG, "got '-0'"); /* no sign on a range >= 0 */
    CHECK_ERR(cli_parse_double_range("step-ms", "10.001", 0, 10, &d), ERR_ARG, "expected 0 to 10");
    CHECK_OK(cli_parse_double("figure", "-12.5", &d));
    CHECK(d == -12.5);
}

TEST(cli_sizes_take_suffixes_and_stay_in_range)
{
    uint64_t v;
    CHECK_OK(cli_parse_bytes("max-bytes", "64M", 0, UINT64_MAX, &v));
    CHECK_EQ_U64(v, 64ull << 20);
    CHECK_OK(cli_parse_bytes("max-bytes", "1kB", 0, UINT64_MAX, &v));
    CHECK_EQ_U64(v, 1024);
    CHECK_OK(cli_parse_bytes("max-bytes", "4096", 0, UINT64_MAX, &v));
    CHECK_EQ_U64(v, 4096);
    CHECK_OK(cli_parse_bytes("pool", "17179869183G", 0, UINT64_MAX, &v)); /* 2^64 - 2^30 */
    for (const char *const *t = cli_not_numbers; *t; t++)
        CHECK_ERR(cli_parse_bytes("pool", *t, 0, UINT64_MAX, &v), ERR_ARG, "--pool: expected a size of 0 to");
    static const char *const junk[] = {"K", "4KK", "4T", "4 K", "4K ", "17179869184G", "18446744073709551616", NULL};
    for (const char *const *t = junk; *t; t++)
        CHECK_ERR(cli_parse_bytes("pool", *t, 0, UINT64_MAX, &v), ERR_ARG,
                  "--pool: expected a size of 0 to 18446744073709551615 bytes, like 4096, 64K or 1G");
    CHECK_ERR(cli_parse_bytes("slot-bytes", "0", 1, 1 << 20, &v), ERR_ARG,
              "--slot-bytes: expected a size of 1 to 1048576 bytes, like 4096, 64K or 1G, got '0'");
    CHECK_ERR(cli_parse_bytes("slot-bytes", "1025K", 1, 1 << 20, &v), ERR_ARG, "got '1025K'");
}

TEST(cli_seeds_take_python_integers)
{
    uint64_t v;
    CHECK_OK(cli_parse_seed("seed", "-1", &v));
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_OK(cli_parse_seed("seed", "18446744073709551615", &v));
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_OK(cli_parse_seed("seed", "-9223372036854775808", &v));
    CHECK_EQ_U64(v, 1ull << 63);
    static const char *const junk[] = {"abc", "-", "12x", " 1", "1 ", "--1", "+1", "",
                                       "18446744073709551616", "-9223372036854775809", NULL};
    for (const char *const *t = junk; *t; t++)
        CHECK_ERR(cli_parse_seed("seed", *t, &v), ERR_ARG,
                  "--seed: expected an integer from -2^63 to 2^64-1 (negative allowed)");
}

TEST(cli_lists_names_and_variables_say_what_they_accept)
{
    uint64_t list[4];
    int n, i;
    static const char *const names[] = {"ring", "tree", "naive", NULL};
    CHECK_OK(cli_parse_choice("algo", "tree", names, &i));
    CHECK_EQ(i, 1);
    CHECK_ERR(cli_parse_choice("algo", "mesh", names, &i), ERR_ARG, "--algo: unknown value 'mesh' (ring, tree or naive)");
    CHECK_ERR(cli_parse_choice("algo", " tree", names, &i), ERR_ARG, "unknown value ' tree'");
    CHECK_OK(cli_parse_list("workers", "0,2,8", 0, 8, list, 4, &n));
    CHECK_EQ(n, 3);
    CHECK_EQ_U64(list[2], 8);
    CHECK_OK(cli_parse_list("workers", "1,2,3,4", 0, 8, list, 4, &n));
    CHECK_EQ(n, 4);
    CHECK_ERR(cli_parse_list("workers", "1,,2", 0, 8, list, 4, &n), ERR_ARG, "got '1,,2' (an empty value)");
    CHECK_ERR(cli_parse_list("workers", "1,", 0, 8, list, 4, &n), ERR_ARG, "an empty value");
    CHECK_ERR(cli_parse_list("workers", ",1", 0, 8, list, 4, &n), ERR_ARG, "an empty value");
    CHECK_ERR(cli_parse_list("workers", "", 0, 8, list, 4, &n), ERR_ARG, "an empty value");
    CHECK_ERR(cli_parse_list("workers", "1,2,3,4,5", 0, 8, list, 4, &n), ERR_ARG, "at most 4 values");
    CHECK_ERR(cli_parse_list("hidden", "256, 128", 1, 65536, list, 4, &n), ERR_ARG,
              "--hidden: expected a comma-separated list of 1 to 65536, got '256, 128' (' 128')");
    CHECK_ERR(cli_parse_list("hidden", "256 ,128", 1, 65536, list, 4, &n), ERR_ARG, "('256 ')");
    CHECK_ERR(cli_parse_list("hidden", "0,128", 1, 65536, list, 4, &n), ERR_ARG, "('0')");
    CHECK_ERR(cli_parse_list("hidden", "65537", 1, 65536, list, 4, &n), ERR_ARG, "('65537')");
    CHECK_ERR(cli_parse_list("hidden", "-5", 1, 65536, list, 4, &n), ERR_ARG, "('-5')");
    CHECK_ERR(cli_parse_list("hidden", "1,18446744073709551617", 1, UINT64_MAX, list, 4, &n), ERR_ARG,
              "('18446744073709551617')");
    const char *path = "unchanged";
    CHECK_ERR(cli_parse_text("trace", "", "a file", &path), ERR_ARG, "--trace: expected a file, got an empty value");
    CHECK_STR(path, "unchanged");
    CHECK_OK(cli_parse_text("trace", "t.json", "a file", &path));
    CHECK_STR(path, "t.json");
    uint64_t v;
    CHECK_OK(cli_parse_env("RANK", "3", 0, 63, &v));
    CHECK_EQ_U64(v, 3);
    CHECK_ERR(cli_parse_env("RANK", " 3", 0, 63, &v), ERR_ARG, "RANK=' 3': expected 0 to 63");
    CHECK_ERR(cli_parse_env("RANK", "64", 0, 63, &v), ERR_ARG, "RANK='64': expected 0 to 63");
    static const struct option opts[] = {{"check", no_argument, 0, 1}, {"world", required_argument, 0, 2}, {0, 0, 0, 0}};
    CHECK_ERR(cli_getopt_error(':', "--world", opts), ERR_ARG, "option '--world' needs a value (--world=VALUE)");
    CHECK_ERR(cli_getopt_error('?', "--check=1", opts), ERR_ARG, "option '--check' takes no value");
    CHECK_ERR(cli_getopt_error('?', "--frob", opts), ERR_ARG, "unrecognized option '--frob'");
}

TEST(units_write_every_size_one_way)
{
    char b[32];
    CHECK_STR(units_format_bytes(0, b, sizeof b), "0 B");
    CHECK_STR(units_format_bytes(1023, b, sizeof b), "1023 B");
    CHECK_STR(units_format_bytes(64 << 10, b, sizeof b), "64 KiB");      /* whole: no decimal */
    CHECK_STR(units_format_bytes(144100, b, sizeof b), "140.7 KiB");     /* else one */
    CHECK_STR(units_format_bytes((1 << 20) - 1, b, sizeof b), "1.0 MiB"); /* not 1024.0 KiB */
    CHECK_STR(units_format_bytes(512ull << 30, b, sizeof b), "512 GiB");
    CHECK_STR(units_format_bytes(UINT64_MAX, b, sizeof b), "16.0 EiB");
    CHECK_STR(units_format_bytes(1ull << 63, b, sizeof b), "8 EiB");
}

/* A deadline past what uint64_t nanoseconds hold is "never", not a wrapped
 * "already over". */
TEST(deadlines_saturate_instead_of_wrapping)
{
    CHECK_EQ_U64(clock_deadline_ns(UINT64_MAX), UINT64_MAX);
    CHECK_EQ_U64(clock_deadline_ns(UINT64_MAX - 5), UINT64_MAX);
    CHECK_EQ_U64(clock_deadline_s(1e300), UINT64_MAX);
    CHECK_EQ_U64(clock_deadline_s(18446744073.709553), UINT64_MAX); /* 2^64 ns, and a little more */
    uint64_t before = clock_now_ns();
    uint64_t one_s = clock_deadline_s(1.0);
    CHECK(one_s >= before + 1000000000u && one_s < before + 2000000000u);
    CHECK(clock_deadline_s(NAN) <= clock_now_ns());
    CHECK(clock_deadline_s(-5) <= clock_now_ns());
}

/* A size that wraps 64 bits, or that no allocation on this machine can
 * honour, is refused before malloc, naming it. */
TEST(mem_refuses_sizes_that_wrap_or_cannot_fit)
{
    size_t bytes = 0;
    CHECK_ERR(mem_check_array("--batch-size=2305843009213693953", 2305843009213693953ull, 8, &bytes), ERR_NOMEM,
              "--batch-size=2305843009213693953: 2305843009213693953 x 8 bytes overflows 64 bits");
    uint64_t have = mem_physical_bytes();
    CHECK(have > 0);
    CHECK_ERR(mem_check_array("a ring", have / 4, 4, &bytes), ERR_NOMEM, "a ring: needs");
    CHECK_CONTAINS(err_msg(), "more than this machine can hold (80% of its");
    CHECK_OK(mem_check_array("a batch", 256, 8, &bytes));
    CHECK_EQ(bytes, 2048);
    CHECK_OK(mem_check_fits("nothing", 0));
}

TEST(synthetic_is_deterministic_and_bounded)
{
    struct dataset_options opt;
    dataset_options_default(&opt);
    opt.synthetic_records = 100;
    opt.synthetic_min_bytes = 3;
    opt.synthetic_bytes = 40;
    dataset_t *a, *b;
    CHECK_OK(dataset_open("synthetic", &opt, &a));
    CHECK_OK(dataset_open("synthetic", &opt, &b));
    uint8_t x[40], y[40];
    for (uint64_t i = 0; i < 100; i++) {
        struct dataset_record ra, rb;
        CHECK_OK(dataset_read(a, i, x, sizeof x, &ra));
        CHECK_OK(dataset_read(b, i, y, sizeof y, &rb));
        CHECK(ra.bytes >= 3 && ra.bytes <= 40);
        CHECK_EQ(ra.bytes, rb.bytes);
        CHECK(memcmp(x, y, ra.bytes) == 0);
        CHECK(ra.label >= 0 && ra.label < 10);
    }
    struct dataset_record r;
    CHECK_ERR(dataset_read(a, 100, x, sizeof x, &r), ERR_RANGE, "record 100 is out of range");
    dataset_close(a);
    dataset_close(b);
}

static int rank_fails_if_two(struct rank_ctx *ctx)
{
    if (ctx->rank == 2)
        return err_set(ERR_FORMAT, "bad shard");
    ((int *)ctx->local)[0] = ctx->rank * 10 + ctx->world;
    return 0;
}

TEST(ranks_carry_the_first_error_and_its_rank)
{
    int locals[4] = {0};
    struct ranks_outcome out;
    CHECK_ERR(ranks_run(4, rank_fails_if_two, NULL, locals, sizeof locals[0], &out), ERR_FORMAT,
              "rank 2: bad shard");
    CHECK_EQ(out.rank, 2);
    CHECK_EQ(locals[3], 34);
    CHECK_ERR(ranks_run(0, rank_fails_if_two, NULL, NULL, 0, NULL), ERR_ARG, "at least 1");
}

static void *policy_of_a_child(void *out)
{
    *(int *)out = sched_getscheduler(0);
    return NULL;
}

/* Each rank's policy, and that of a thread it starts (a progress thread, a
 * loader worker, an engine), into locals[rank][0..1]. */
static int rank_policies(struct rank_ctx *ctx)
{
    int *mine = ctx->local;
    pthread_t child;
    mine[0] = sched_getscheduler(0);
    if (pthread_create(&child, NULL, policy_of_a_child, &mine[1]) != 0)
        return err_set(ERR_NOMEM, "cannot start a thread");
    pthread_join(child, NULL);
    return 0;
}

/* The ranks, and every thread they start, run under SCHED_BATCH (no
 * preemption on wake-up: see ranks.c); the caller keeps its own policy. */
static void *batch_allowed(void *out)
{
    struct sched_param none = {.sched_priority = 0};
    *(int *)out = pthread_setschedparam(pthread_self(), SCHED_BATCH, &none) == 0;
    return NULL;
}

TEST(ranks_and_their_threads_run_as_batch_work)
{
    int before = sched_getscheduler(0), allowed = 0;
    pthread_t probe;
    CHECK(pthread_create(&probe, NULL, batch_allowed, &allowed) == 0);
    pthread_join(probe, NULL);
    if (!allowed)
        CHECK_SKIP("this process may not take SCHED_BATCH (under SCHED_IDLE, or a sandbox refuses it)");
    int policies[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
    CHECK_OK(ranks_run(3, rank_policies, NULL, policies, sizeof policies[0], NULL));
    for (int r = 0; r < 3; r++) {
        CHECK_MSG(policies[r][0] == SCHED_BATCH, "rank %d runs under policy %d", r, policies[r][0]);
        CHECK_MSG(policies[r][1] == SCHED_BATCH, "rank %d's thread runs under policy %d", r, policies[r][1]);
    }
    CHECK_EQ(sched_getscheduler(0), before);
}
