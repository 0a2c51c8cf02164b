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
#include <math.h>
#include <stdlib.h>

TEST(error_wrap_keeps_the_cause)
{
    CHECK_EQ(err_set(ERR_FORMAT, "byte %d: bad magic", 4), ERR_FORMAT);
    CHECK_EQ(err_wrap(ERR_FORMAT, "opening %s", "x.idx"), ERR_FORMAT);
    CHECK_STR(err_msg(), "opening x.idx: byte 4: bad magic");
}

TEST(cli_rejects_junk_and_reads_sizes)
{
    uint64_t v;
    CHECK_ERR(cli_parse_u64("world", "4x", &v), ERR_ARG, "--world");
    CHECK_ERR(cli_parse_u64("world", "-3", &v), ERR_ARG, "-3");
    CHECK_ERR(cli_parse_u64("world", "99999999999999999999999", &v), ERR_ARG, "too large");
    CHECK_OK(cli_parse_bytes("max-bytes", "64M", &v));
    CHECK_EQ_U64(v, 64ull << 20);
    CHECK_OK(cli_parse_seed("seed", "-1", &v));
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_OK(cli_parse_seed("seed", "18446744073709551615", &v));
    CHECK_EQ_U64(v, UINT64_MAX);
    CHECK_ERR(cli_parse_seed("seed", "abc", &v), ERR_ARG, "expected an integer from -2^63 to 2^64-1 (negative allowed)");
    CHECK_ERR(cli_parse_seed("seed", "-", &v), ERR_ARG, "negative allowed");
    CHECK_ERR(cli_parse_seed("seed", "12x", &v), ERR_ARG, "negative allowed");
}

TEST(cli_ranges_choices_lists_say_what_they_accept)
{
    uint64_t v, list[4];
    int n, i;
    CHECK_OK(cli_parse_range("world", "64", 1, 64, &v));
    CHECK_EQ_U64(v, 64);
    CHECK_ERR(cli_parse_range("world", "65", 1, 64, &v), ERR_ARG, "--world: expected 1 to 64, got '65'");
    CHECK_ERR(cli_parse_range("world", "0", 1, 64, &v), ERR_ARG, "expected 1 to 64");
    CHECK_ERR(cli_parse_range("world", "99999999999999999999999", 1, 64, &v), ERR_ARG, "expected 1 to 64");
    CHECK_ERR(cli_parse_range("world", "4x", 1, 64, &v), ERR_ARG, "expected 1 to 64, got '4x'");
    double d;
    CHECK_ERR(cli_parse_double_range("step-ms", "-1", 0, 10, &d), ERR_ARG, "--step-ms: expected 0 to 10");
    CHECK_ERR(cli_parse_double_range("step-ms", "nan", 0, 10, &d), ERR_ARG, "finite");
    static const char *const names[] = {"ring", "tree", "naive", NULL};
    CHECK_OK(cli_parse_choice("algo", "tree", names, &i));
    CHECK_EQ(i, 1);
    CHECK_ERR(cli_parse_choice("algo", "mesh", names, &i), ERR_ARG, "--algo: unknown value 'mesh' (ring, tree or naive)");
    CHECK_OK(cli_parse_list("workers", "0,2,8", list, 4, &n));
    CHECK_EQ(n, 3);
    CHECK_EQ_U64(list[2], 8);
    CHECK_ERR(cli_parse_list("workers", "1,,2", list, 4, &n), ERR_ARG, "an empty value");
    CHECK_ERR(cli_parse_list("workers", "1,", list, 4, &n), ERR_ARG, "an empty value");
    CHECK_ERR(cli_parse_list("workers", "1,2,3,4,5", list, 4, &n), ERR_ARG, "at most 4 values");
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
