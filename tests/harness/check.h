/* check: the unit-test vocabulary of tests/test_*.c and labs/NN-name/grade.c.
 *
 *     TEST(sampler_golden_n10_w3) {
 *         CHECK_EQ(idx[0], 4);
 *     }
 *
 * Every TEST runs in its own child process with a time limit (isolate.h). The
 * first failing CHECK prints "file:line: expected X, got Y" and ends that test;
 * the runner prints "PASS prog.name" or "FAIL prog.name: why" per test.
 */
#ifndef DDP_CHECK_H
#define DDP_CHECK_H

#include <stdint.h>
#include <string.h>

void check_register(const char *name, void (*fn)(void));
_Noreturn void check_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Says why a test cannot run here (a sanitizer build, a missing package);
 * the test then returns, and the runner prints "PASS prog.name (skipped:
 * why)" so a skip is never mistaken for a check that ran. Use CHECK_SKIP. */
void check_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define CHECK_SKIP(...)             \
    do {                            \
        check_skip(__VA_ARGS__);    \
        return;                     \
    } while (0)

/* The run's temporary directory (created on first use, removed at exit by the
 * runner), for tests that write files. */
const char *check_tmpdir(void);

/* check_tmpdir()/name, in one of 8 static buffers used in turn: valid until
 * the 8th call after it. */
const char *check_tmp_path(const char *name);

#define TEST(name)                                                                  \
    static void name(void);                                                         \
    __attribute__((constructor)) static void name##_register(void)                  \
    {                                                                               \
        check_register(#name, name);                                                \
    }                                                                               \
    static void name(void)

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond))                                                                \
            check_fail(__FILE__, __LINE__, "%s is false", #cond);                   \
    } while (0)

#define CHECK_MSG(cond, ...)                                                        \
    do {                                                                            \
        if (!(cond))                                                                \
            check_fail(__FILE__, __LINE__, __VA_ARGS__);                            \
    } while (0)

#define CHECK_EQ(got, want)                                                         \
    do {                                                                            \
        long long check_g_ = (long long)(got), check_w_ = (long long)(want);        \
        if (check_g_ != check_w_)                                                   \
            check_fail(__FILE__, __LINE__, "%s: expected %lld, got %lld", #got,     \
                       check_w_, check_g_);                                         \
    } while (0)

#define CHECK_EQ_U64(got, want)                                                     \
    do {                                                                            \
        unsigned long long check_g_ = (got), check_w_ = (want);                     \
        if (check_g_ != check_w_)                                                   \
            check_fail(__FILE__, __LINE__, "%s: expected %llu, got %llu", #got,     \
                       check_w_, check_g_);                                         \
    } while (0)

#define CHECK_STR(got, want)                                                        \
    do {                                                                            \
        const char *check_g_ = (got), *check_w_ = (want);                           \
        if (!check_g_ || strcmp(check_g_, check_w_) != 0)                           \
            check_fail(__FILE__, __LINE__, "%s: expected \"%s\", got \"%s\"", #got, \
                       check_w_, check_g_ ? check_g_ : "(null)");                   \
    } while (0)

#define CHECK_CONTAINS(text, needle)                                                \
    do {                                                                            \
        const char *check_t_ = (text), *check_n_ = (needle);                        \
        if (!check_t_ || !strstr(check_t_, check_n_))                              \
            check_fail(__FILE__, __LINE__, "%s: expected to contain \"%s\", got \"%s\"", \
                       #text, check_n_, check_t_ ? check_t_ : "(null)");            \
    } while (0)

/* A call that returns 0 on success; on failure shows the ERR_* code and err_msg(). */
#define CHECK_OK(call)                                                              \
    do {                                                                            \
        int check_rc_ = (call);                                                     \
        if (check_rc_ < 0)                                                          \
            check_fail(__FILE__, __LINE__, "%s failed: %s: %s", #call,              \
                       err_name(check_rc_), err_msg());                             \
    } while (0)

/* A call that must fail with `code`, leaving a message that contains `needle`. */
#define CHECK_ERR(call, code, needle)                                               \
    do {                                                                            \
        int check_rc_ = (call);                                                     \
        if (check_rc_ != (code))                                                    \
            check_fail(__FILE__, __LINE__, "%s: expected %s, got %s (%s)", #call,   \
                       err_name(code), err_name(check_rc_), err_msg());             \
        CHECK_CONTAINS(err_msg(), needle);                                          \
    } while (0)

#endif
