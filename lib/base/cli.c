/* cli: strict parsing of flag values and the program shape's messages (see cli.h). */
#include "base/cli.h"

#include "base/error.h"

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decimal digits at the start of text into *v: returns where they end
 * (text itself when there are none), *overflow set when they pass 2^64-1.
 * Nothing is skipped: not a space, not a sign. */
static const char *cli_scan_digits(const char *text, uint64_t *v, int *overflow)
{
    *v = 0;
    *overflow = 0;
    for (; *text >= '0' && *text <= '9'; text++)
        if (__builtin_mul_overflow(*v, 10, v) || __builtin_add_overflow(*v, (uint64_t)(*text - '0'), v))
            *overflow = 1;
    return text;
}

/* An unsigned integer from min to max, the whole text; `what` is how the
 * message names it ("--world", or "RANK" for a variable). */
static int cli_parse_named(const char *what, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    int overflow;
    const char *end = text ? cli_scan_digits(text, &v, &overflow) : NULL;
    if (!end || end == text || *end || overflow || v < min || v > max)
        return err_set(ERR_ARG, "%s: expected %llu to %llu, got '%s'", what, (unsigned long long)min,
                       (unsigned long long)max, text ? text : "");
    *out = v;
    return 0;
}

int cli_parse_range(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    char what[64];
    snprintf(what, sizeof what, "--%s", flag);
    return cli_parse_named(what, text, min, max, out);
}

int cli_parse_env(const char *name, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    if (cli_parse_named(name, text, min, max, out) == 0)
        return 0;
    return err_set(ERR_ARG, "%s='%s': expected %llu to %llu", name, text ? text : "", (unsigned long long)min,
                   (unsigned long long)max); /* as a shell shows the variable */
}

/* What cli_scan_double found: a number, not a number, or one a double
 * cannot hold. */
enum { CLI_DOUBLE_OK = 0, CLI_DOUBLE_JUNK = -1, CLI_DOUBLE_HUGE = -2, CLI_DOUBLE_TINY = -3 };

/* A finite decimal number, the whole text: digits, one leading '-', a point,
 * an exponent; strtod() alone would also take a leading space, "0x1p3",
 * "inf" and "nan". strtod says ERANGE both past a double's range and below
 * its smallest normal number: a subnormal (1e-310) is still the value
 * written, correctly rounded, and is taken; a value that rounds to 0
 * (1e-400) or to infinity (1e999) is not. CLI_DOUBLE_OK with *out set, or a
 * reason (nothing set). */
static int cli_scan_double(const char *text, double *out)
{
    if (!text)
        return CLI_DOUBLE_JUNK;
    const char *digits = text[0] == '-' ? text + 1 : text;
    if (!((*digits >= '0' && *digits <= '9') || *digits == '.') || digits[strspn(digits, "0123456789.eE+-")])
        return CLI_DOUBLE_JUNK;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end)
        return CLI_DOUBLE_JUNK;
    if (!isfinite(v))
        return CLI_DOUBLE_HUGE;
    if (errno == ERANGE && v == 0)
        return CLI_DOUBLE_TINY;
    *out = v;
    return CLI_DOUBLE_OK;
}

/* The message for a number too close to 0 for a double: in any range it
 * would be read as 0, which is not what was written. */
static int cli_double_tiny(const char *flag, const char *text)
{
    return err_set(ERR_ARG, "--%s: '%s' is not 0, but closer to 0 than any double (the nearest is %.2g), so it "
                            "would be read as 0", flag, text, DBL_TRUE_MIN);
}

int cli_parse_double(const char *flag, const char *text, double *out)
{
    int why = cli_scan_double(text, out);
    if (why == CLI_DOUBLE_TINY)
        return cli_double_tiny(flag, text);
    if (why != CLI_DOUBLE_OK)
        return err_set(ERR_ARG, "--%s: expected a finite number%s, got '%s'", flag,
                       why == CLI_DOUBLE_HUGE ? " (at most a double's largest, 1.8e308)" : "", text ? text : "");
    return 0;
}

int cli_parse_double_range(const char *flag, const char *text, double min, double max, double *out)
{
    double v;
    int why = cli_scan_double(text, &v);
    if (why == CLI_DOUBLE_TINY)
        return cli_double_tiny(flag, text);
    if (why != CLI_DOUBLE_OK || v < min || v > max || (text[0] == '-' && min >= 0))
        return err_set(ERR_ARG, "--%s: expected %g to %g, got '%s'", flag, min, max, text ? text : "");
    *out = v;
    return 0;
}

int cli_parse_bytes(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    int overflow;
    const char *end = text ? cli_scan_digits(text, &v, &overflow) : NULL;
    unsigned shift = 0;
    if (end && end != text) {
        switch (*end) {
        case 'K': case 'k': shift = 10; end++; break;
        case 'M': case 'm': shift = 20; end++; break;
        case 'G': case 'g': shift = 30; end++; break;
        default: break;
        }
        if (*end == 'B' || *end == 'b')
            end++;
    }
    if (!end || end == text || *end || overflow || v > (UINT64_MAX >> shift) || (v << shift) < min ||
        (v << shift) > max)
        return err_set(ERR_ARG, "--%s: expected a size of %llu to %llu bytes, like 4096, 64K or 1G, got '%s'", flag,
                       (unsigned long long)min, (unsigned long long)max, text ? text : "");
    *out = v << shift;
    return 0;
}

int cli_parse_seed(const char *flag, const char *text, uint64_t *out)
{
    uint64_t v;
    int overflow, negative = text && text[0] == '-';
    const char *digits = text ? text + negative : NULL;
    const char *end = digits ? cli_scan_digits(digits, &v, &overflow) : NULL;
    if (!end || end == digits || *end || overflow || (negative && v > (uint64_t)1 << 63))
        return err_set(ERR_ARG, "--%s: expected an integer from -2^63 to 2^64-1 (negative allowed), got '%s'", flag,
                       text ? text : "");
    *out = negative ? 0 - v : v; /* -v's two's-complement bits, as torch keeps a negative seed */
    return 0;
}

int cli_parse_choice(const char *flag, const char *text, const char *const *names, int *index)
{
    char list[256] = "";
    int n = 0;
    while (names[n])
        n++;
    for (int i = 0; i < n; i++) {
        if (text && strcmp(text, names[i]) == 0) {
            *index = i;
            return 0;
        }
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
    }
    return err_set(ERR_ARG, "--%s: unknown value '%s' (%s)", flag, text ? text : "", list);
}

int cli_parse_list(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out, int most, int *n)
{
    *n = 0;
    for (const char *item = text ? text : "";; (*n)++) {
        uint64_t v;
        int overflow;
        const char *end = cli_scan_digits(item, &v, &overflow);
        if (*n == most)
            return err_set(ERR_ARG, "--%s: at most %d values, got '%s'", flag, most, text);
        if (end == item && (!*end || *end == ',')) /* strtok would skip it silently */
            return err_set(ERR_ARG, "--%s: expected a comma-separated list of %llu to %llu, got '%s' (an empty value)",
                           flag, (unsigned long long)min, (unsigned long long)max, text ? text : "");
        if (end == item || (*end && *end != ',') || overflow || v < min || v > max)
            return err_set(ERR_ARG, "--%s: expected a comma-separated list of %llu to %llu, got '%s' ('%.*s')", flag,
                           (unsigned long long)min, (unsigned long long)max, text, (int)strcspn(item, ","), item);
        out[*n] = v;
        if (!*end) {
            (*n)++;
            return 0;
        }
        item = end + 1;
    }
}

int cli_parse_text(const char *flag, const char *text, const char *what, const char **out)
{
    if (!text || !*text)
        return err_set(ERR_ARG, "--%s: expected %s, got an empty value", flag, what);
    *out = text;
    return 0;
}

int cli_getopt_error(int c, const char *arg, const struct option *longopts)
{
    char name[64];
    snprintf(name, sizeof name, "%s", arg ? arg : "");
    int has_value = name[strcspn(name, "=")] == '=';
    name[strcspn(name, "=")] = '\0';
    if (c == ':') /* "--world" without "=4" */
        return err_set(ERR_ARG, "option '%s' needs a value (%s=VALUE)", name, name);
    for (int i = 0; has_value && longopts && longopts[i].name; i++)
        if (strncmp(name, "--", 2) == 0 && strcmp(name + 2, longopts[i].name) == 0 &&
            longopts[i].has_arg == no_argument)
            return err_set(ERR_ARG, "option '%s' takes no value, got '%s'", name, arg);
    return err_set(ERR_ARG, "unrecognized option '%s' (see --help)", arg ? arg : "");
}

void cli_given_add(struct cli_given *g, int value)
{
    if (value >= 0 && value < CLI_MAX_OPTION)
        g->bits[value / 64] |= 1ull << (value % 64);
}

int cli_given_has(const struct cli_given *g, int value)
{
    return value >= 0 && value < CLI_MAX_OPTION && (g->bits[value / 64] >> (value % 64) & 1);
}

int cli_refuse_given(const struct cli_given *g, const struct option *longopts, const int *values, const char *why)
{
    for (const int *v = values; *v; v++) {
        if (!cli_given_has(g, *v))
            continue;
        const char *name = "?";
        for (int i = 0; longopts[i].name; i++)
            if (longopts[i].val == *v) {
                name = longopts[i].name;
                break;
            }
        return err_set(ERR_ARG, "--%s %s", name, why);
    }
    return 0;
}

int cli_fail(const char *prog)
{
    fprintf(stderr, "%s: %s\n", prog, err_msg());
    return CLI_EXIT_USAGE;
}

int cli_error(const char *prog)
{
    fprintf(stderr, "%s: %s\n", prog, err_msg());
    return CLI_EXIT_FAILED;
}

int cli_as_usage_error(int rc)
{
    if (rc >= 0 || rc == ERR_ARG)
        return rc;
    char why[1024]; /* err_set formats into the buffer err_msg() reads */
    snprintf(why, sizeof why, "%s", err_msg());
    return err_set(ERR_ARG, "%s", why);
}

int cli_stdout_status(int rc)
{
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0)
        return err_set(ERR_IO, "writing the output failed");
    return rc;
}

int cli_exit(const char *prog, int status)
{
    return status == CLI_EXIT_OK && cli_stdout_status(0) < 0 ? cli_error(prog) : status;
}
