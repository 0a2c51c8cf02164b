/* cli: strict parsing of flag values and the program shape's messages (see cli.h). */
#include "base/cli.h"

#include "base/error.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_u64(const char *flag, const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!text || !isdigit((unsigned char)text[0]))
        return err_set(ERR_ARG, "--%s: expected a non-negative integer, got '%s'", flag, text ? text : "");
    unsigned long long v = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return err_set(ERR_ARG, "--%s: '%s' is too large", flag, text);
    if (*end)
        return err_set(ERR_ARG, "--%s: expected a non-negative integer, got '%s'", flag, text);
    *out = v;
    return 0;
}

int cli_parse_i64(const char *flag, const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    if (!text || !*text)
        return err_set(ERR_ARG, "--%s: expected an integer, got ''", flag);
    long long v = strtoll(text, &end, 10);
    if (errno == ERANGE)
        return err_set(ERR_ARG, "--%s: '%s' is out of range", flag, text);
    if (*end || end == text)
        return err_set(ERR_ARG, "--%s: expected an integer, got '%s'", flag, text);
    *out = v;
    return 0;
}

int cli_parse_double(const char *flag, const char *text, double *out)
{
    char *end;
    errno = 0;
    if (!text || !*text)
        return err_set(ERR_ARG, "--%s: expected a number, got ''", flag);
    double v = strtod(text, &end);
    if (errno == ERANGE || *end || end == text || !isfinite(v))
        return err_set(ERR_ARG, "--%s: expected a finite number, got '%s'", flag, text);
    *out = v;
    return 0;
}

int cli_parse_bytes(const char *flag, const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!text || !isdigit((unsigned char)text[0]))
        return err_set(ERR_ARG, "--%s: expected a size like 4096, 64K or 1G, got '%s'", flag, text ? text : "");
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (errno == ERANGE || *end)
        return err_set(ERR_ARG, "--%s: expected a size like 4096, 64K or 1G, got '%s'", flag, text);
    if (shift && v > (UINT64_MAX >> shift))
        return err_set(ERR_ARG, "--%s: '%s' is too large", flag, text);
    *out = (uint64_t)v << shift;
    return 0;
}

int cli_parse_seed(const char *flag, const char *text, uint64_t *out)
{
    const char *digits = text && text[0] == '-' ? text + 1 : text;
    if (!digits || !*digits || digits[strspn(digits, "0123456789")])
        return err_set(ERR_ARG, "--%s: expected an integer from -2^63 to 2^64-1 (negative allowed), got '%s'", flag,
                       text ? text : "");
    if (text[0] == '-') {
        int64_t v;
        int rc = cli_parse_i64(flag, text, &v);
        if (rc)
            return rc;
        *out = (uint64_t)v;
        return 0;
    }
    return cli_parse_u64(flag, text, out);
}

int cli_parse_range(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    int rc = cli_parse_u64(flag, text, &v);
    if (rc == ERR_ARG && text && isdigit((unsigned char)text[0]) && strspn(text, "0123456789") == strlen(text))
        v = UINT64_MAX, rc = 0; /* all digits but too large: out of range, said as such below */
    if (rc < 0 || v < min || v > max)
        return err_set(ERR_ARG, "--%s: expected %llu to %llu, got '%s'", flag, (unsigned long long)min,
                       (unsigned long long)max, text ? text : "");
    *out = v;
    return 0;
}

int cli_parse_double_range(const char *flag, const char *text, double min, double max, double *out)
{
    double v;
    int rc = cli_parse_double(flag, text, &v);
    if (rc < 0)
        return rc;
    if (v < min || v > max)
        return err_set(ERR_ARG, "--%s: expected %g to %g, got '%s'", flag, min, max, text);
    *out = v;
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

int cli_parse_list(const char *flag, const char *text, uint64_t *out, int max, int *n)
{
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", text ? text : "") >= (int)sizeof buf)
        return err_set(ERR_ARG, "--%s: list too long (at most %zu characters)", flag, sizeof buf - 1);
    *n = 0;
    for (char *tok = buf, *comma;; tok = comma + 1) {
        comma = strchr(tok, ',');
        if (comma)
            *comma = '\0';
        if (*tok == '\0') /* strtok would skip it silently */
            return err_set(ERR_ARG, "--%s: expected a comma-separated list of values, got '%s' (an empty value)",
                           flag, text ? text : "");
        if (*n == max)
            return err_set(ERR_ARG, "--%s: at most %d values, got '%s'", flag, max, text);
        int rc = cli_parse_u64(flag, tok, &out[(*n)++]);
        if (rc)
            return rc;
        if (!comma)
            return 0;
    }
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
