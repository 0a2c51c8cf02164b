/* cli: strict parsing of flag values (see cli.h). */
#include "base/cli.h"

#include "base/error.h"

#include <ctype.h>
#include <errno.h>
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

int cli_fail(const char *prog)
{
    fprintf(stderr, "%s: %s\n(run '%s --help' for usage)\n", prog, err_msg(), prog);
    return 2;
}
