/* verdict: prints and reads back the benchmark verdict line (see verdict.h for
 * the format and who calls what). Read verdict_print() first. */
#include "base/verdict.h"

#include "base/cli.h"
#include "base/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VERDICT_PREFIX "bench: "
#define VERDICT_SEP " | "

const char *verdict_op_text(enum verdict_op op)
{
    return op == VERDICT_AT_MOST ? "<=" : ">=";
}

void verdict_format_figure(double x, char *buf, size_t size)
{
    if (fabs(x) >= 1000)
        snprintf(buf, size, "%.0f", x);
    else
        snprintf(buf, size, "%.3g", x);
}

/* The ratio as printed, back as a number: what PASS or MISS is judged on. */
static double verdict_round2(double ratio)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.2f", ratio);
    return strtod(buf, NULL);
}

static bool verdict_judge(double printed_ratio, enum verdict_op op, double target)
{
    return op == VERDICT_AT_MOST ? printed_ratio <= target : printed_ratio >= target;
}

/* A text that cannot break the line apart: not empty, no newline, no " | ",
 * and for units no ": " (the parser splits a figure's name at the last one). */
static int verdict_check_text(const char *name, const char *text, bool is_unit)
{
    if (!text || !*text)
        return err_set(ERR_ARG, "verdict: the %s is empty", name);
    if (strchr(text, '\n') || strstr(text, VERDICT_SEP) || (is_unit && strstr(text, ": ")))
        return err_set(ERR_ARG, "verdict: the %s '%s' holds a newline or \" | \"%s", name, text,
                       is_unit ? " or \": \"" : "");
    return 0;
}

static int verdict_check_number(const char *name, double x)
{
    if (!isfinite(x))
        return err_set(ERR_ARG, "verdict: the %s is %g, not a finite number", name, x);
    return 0;
}

int verdict_print(FILE *out, const struct verdict *v)
{
    int rc;
    if ((rc = verdict_check_text("what", v->what, false)) < 0 || (rc = verdict_check_text("unit", v->unit, true)) < 0 ||
        (rc = verdict_check_text("peer", v->peer, false)) < 0 ||
        (rc = verdict_check_text("peer unit", v->peer_unit, true)) < 0 ||
        (rc = verdict_check_number("figure", v->figure)) < 0 ||
        (rc = verdict_check_number("peer figure", v->peer_figure)) < 0 ||
        (rc = verdict_check_number("ratio", v->ratio)) < 0 || (rc = verdict_check_number("target", v->target)) < 0)
        return rc;
    char fig[64], peer_fig[64];
    verdict_format_figure(v->figure, fig, sizeof fig);
    verdict_format_figure(v->peer_figure, peer_fig, sizeof peer_fig);
    bool pass = verdict_judge(verdict_round2(v->ratio), v->op, v->target);
    fprintf(out, VERDICT_PREFIX "%s: %s %s" VERDICT_SEP "%s: %s %s" VERDICT_SEP "ratio %.2f" VERDICT_SEP "target %s %g"
                 VERDICT_SEP "%s\n",
            v->what, fig, v->unit, v->peer, peer_fig, v->peer_unit, v->ratio, verdict_op_text(v->op), v->target,
            pass ? "PASS" : "MISS");
    fflush(out);
    return pass ? 1 : 0;
}

int verdict_print_not_run(FILE *out, const char *what, const char *peer, enum verdict_op op, double target,
                          const char *why)
{
    int rc;
    if ((rc = verdict_check_text("what", what, false)) < 0 || (rc = verdict_check_text("peer", peer, false)) < 0 ||
        (rc = verdict_check_text("reason", why, false)) < 0 || (rc = verdict_check_number("target", target)) < 0)
        return rc;
    fprintf(out, VERDICT_PREFIX "%s" VERDICT_SEP "%s" VERDICT_SEP "target %s %g" VERDICT_SEP "not run: %s\n", what,
            peer, verdict_op_text(op), target, why);
    fflush(out);
    return 0;
}

bool verdict_is_line(const char *line)
{
    return strncmp(line, VERDICT_PREFIX, strlen(VERDICT_PREFIX)) == 0;
}

/* A whole-text finite number, as strictly as a flag's (cli.h: no space
 * around it, no hex, no inf); the caller says what was wrong. */
static bool verdict_number(const char *text, double *out)
{
    return cli_parse_double("figure", text, out) == 0;
}

int verdict_parse_target(const char *text, enum verdict_op *op, double *target)
{
    if (strncmp(text, ">=", 2) == 0)
        *op = VERDICT_AT_LEAST;
    else if (strncmp(text, "<=", 2) == 0)
        *op = VERDICT_AT_MOST;
    else
        return err_set(ERR_ARG, "target '%s': expected >=T or <=T", text);
    const char *num = text + 2;
    while (*num == ' ')
        num++;
    if (!verdict_number(num, target))
        return err_set(ERR_ARG, "target '%s': '%s' is not a number", text, num);
    return 0;
}

/* "<name>: <figure> <unit>", split in place at the last ": " followed by a
 * number; the unit is what follows the number's space. */
static int verdict_split_figure(char *field, const char **name, double *figure, const char **unit)
{
    char *last = NULL;
    for (char *c = strstr(field, ": "); c; c = strstr(c + 1, ": "))
        last = c;
    if (!last || last == field)
        return ERR_FORMAT;
    char *num = last + 2, *space = strchr(num, ' ');
    if (!space || !space[1])
        return ERR_FORMAT;
    *space = '\0';
    if (!verdict_number(num, figure))
        return ERR_FORMAT;
    *last = '\0';
    *name = field;
    *unit = space + 1;
    return 0;
}

int verdict_parse(const char *line, struct verdict_line *out)
{
    memset(out, 0, sizeof *out);
    if (!verdict_is_line(line))
        return err_set(ERR_FORMAT, "not a verdict line (no \"" VERDICT_PREFIX "\" prefix): %.80s", line);
    size_t n = strcspn(line, "\n");
    if (n >= sizeof out->text)
        return err_set(ERR_FORMAT, "verdict line longer than %zu bytes: %.80s", sizeof out->text - 1, line);
    memcpy(out->text, line, n);
    out->text[n] = '\0';

    char *fields[6];
    int count = 0;
    for (char *p = out->text + strlen(VERDICT_PREFIX); p && count < 6;) {
        fields[count++] = p;
        char *sep = strstr(p, VERDICT_SEP);
        if (sep) {
            *sep = '\0';
            p = sep + strlen(VERDICT_SEP);
        } else {
            p = NULL;
        }
    }
    struct verdict *v = &out->v;
    if (count == 4 && strncmp(fields[3], "not run: ", 9) == 0) {
        v->what = fields[0];
        v->peer = fields[1];
        out->why = fields[3] + 9;
        if (!*v->what || !*v->peer || !*out->why)
            return err_set(ERR_FORMAT, "verdict line: an empty what, peer or reason: %s", line);
        if (strncmp(fields[2], "target ", 7) != 0 || verdict_parse_target(fields[2] + 7, &v->op, &v->target) < 0)
            return err_set(ERR_FORMAT, "verdict line: '%s' is not \"target <op> <t>\"", fields[2]);
        return 0;
    }
    if (count != 5)
        return err_set(ERR_FORMAT,
                       "verdict line: %d fields separated by \" | \", expected 5 (or 4 ending in \"not run: ...\"): %.200s",
                       count, line);
    out->ran = true;
    if (verdict_split_figure(fields[0], &v->what, &v->figure, &v->unit) < 0)
        return err_set(ERR_FORMAT, "verdict line: '%s' is not \"<what>: <figure> <unit>\"", fields[0]);
    if (verdict_split_figure(fields[1], &v->peer, &v->peer_figure, &v->peer_unit) < 0)
        return err_set(ERR_FORMAT, "verdict line: '%s' is not \"<peer>: <figure> <unit>\"", fields[1]);
    if (strncmp(fields[2], "ratio ", 6) != 0 || !verdict_number(fields[2] + 6, &v->ratio))
        return err_set(ERR_FORMAT, "verdict line: '%s' is not \"ratio <x.xx>\"", fields[2]);
    if (strncmp(fields[3], "target ", 7) != 0 || verdict_parse_target(fields[3] + 7, &v->op, &v->target) < 0)
        return err_set(ERR_FORMAT, "verdict line: '%s' is not \"target <op> <t>\"", fields[3]);
    if (strcmp(fields[4], "PASS") != 0 && strcmp(fields[4], "MISS") != 0)
        return err_set(ERR_FORMAT, "verdict line: '%s' is neither PASS nor MISS", fields[4]);
    out->pass = fields[4][0] == 'P';
    if (out->pass != verdict_judge(v->ratio, v->op, v->target))
        return err_set(ERR_FORMAT, "verdict line: %s disagrees with ratio %.2f and target %s %g", fields[4], v->ratio,
                       verdict_op_text(v->op), v->target);
    return 0;
}
