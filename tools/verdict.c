/* verdict: the benchmark verdict line for shell scripts, and its reader.
 *
 * Where it sits: beside `make bench` and `make report`. Shell benchmarks print
 * their verdicts through it (tools/bench.sh wraps it in bench_verdict and
 * bench_not_run), so that the line is formatted by lib/base/verdict.c alone,
 * as the C benchmarks print it; `--check` and `--table` read bench output
 * back. Read lib/base/verdict.h for the format.
 */
#include "base/cli.h"
#include "base/error.h"
#include "base/verdict.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERDICT_PROG "verdict" /* the name every message starts with, not argv[0] ("build/tools/...") */

static void verdict_usage(const char *prog)
{
    printf("usage: %s --what=TEXT --figure=X --unit=U --peer=TEXT --peer-figure=Y --peer-unit=U\n"
           "              --ratio=R|figure/peer|peer/figure --target=OPT\n"
           "       %s --what=TEXT --peer=TEXT --target=OPT --not-run=WHY\n"
           "       %s --check | --table   < bench output\n"
           "\n"
           "Prints one benchmark verdict line (lib/base/verdict.h):\n"
           "  bench: <what>: <figure> <unit> | <peer>: <figure> <unit> | ratio <x.xx> | target <op> <t> | PASS|MISS\n"
           "  bench: <what> | <peer> | target <op> <t> | not run: <why>\n"
           "\n"
           "  --what=TEXT          what was measured\n"
           "  --figure=X --unit=U  its figure and unit\n"
           "  --peer=TEXT          the peer or limit it is compared with, measured in the same run\n"
           "  --peer-figure=Y --peer-unit=U\n"
           "  --ratio=R            the ratio as a number, or figure/peer, or peer/figure (computed)\n"
           "  --target=OPT         >=T or <=T: what the ratio must reach\n"
           "  --not-run=WHY        the comparison could not run here: print why instead\n"
           "  --check              read bench output on stdin: every line starting \"bench: \" must parse;\n"
           "                       prints how many did, exit 1 naming the first that does not\n"
           "  --table              read bench output on stdin, print its verdicts as a Markdown table\n"
           "  --help               this text\n"
           "\n"
           "Exit status: 0 (PASS and MISS alike: a miss is a finding), 1 a line that does not parse\n"
           "or cannot be printed, 2 a bad flag.\n",
           prog, prog, prog);
}

/* A table cell: a '|' inside would end it early. */
static void verdict_cell(const char *text)
{
    for (; *text; text++) {
        if (*text == '|')
            fputc('\\', stdout);
        fputc(*text, stdout);
    }
}

/* Reads stdin; every verdict line must parse. --table prints them as a table. */
static int verdict_read(const char *prog, bool table)
{
    char *line = NULL; /* whole lines, however long: a piece of one is no line */
    size_t cap = 0;
    int count = 0, lineno = 0, rc = 0;
    if (table) {
        printf("| what | figure | peer or limit | figure | ratio | target | verdict |\n");
        printf("|------|-------:|---------------|-------:|------:|--------|---------|\n");
    }
    while (getline(&line, &cap, stdin) != -1) {
        lineno++;
        if (!verdict_is_line(line))
            continue;
        struct verdict_line v;
        if (verdict_parse(line, &v) < 0) {
            fprintf(stderr, "%s: line %d: %s\n", prog, lineno, err_msg());
            rc = 1;
            break;
        }
        count++;
        if (!table)
            continue;
        const char *op = verdict_op_text(v.v.op);
        printf("| ");
        verdict_cell(v.v.what);
        char fig[64], peer_fig[64];
        verdict_format_figure(v.v.figure, fig, sizeof fig);
        verdict_format_figure(v.v.peer_figure, peer_fig, sizeof peer_fig);
        if (v.ran) {
            printf(" | %s ", fig);
            verdict_cell(v.v.unit);
        } else {
            printf(" | ");
        }
        printf(" | ");
        verdict_cell(v.v.peer);
        if (v.ran) {
            printf(" | %s ", peer_fig);
            verdict_cell(v.v.peer_unit);
            printf(" | %.2f | %s %g | **%s** |\n", v.v.ratio, op, v.v.target, v.pass ? "PASS" : "MISS");
        } else {
            printf(" | | | %s %g | not run: ", op, v.v.target);
            verdict_cell(v.why);
            printf(" |\n");
        }
    }
    int read_errno = ferror(stdin) ? errno : 0;
    free(line);
    if (rc == 0 && read_errno) { /* a directory on stdin, an I/O error: not "0 lines, all well formed" */
        fprintf(stderr, "%s: standard input: read error after line %d: %s\n", prog, lineno, strerror(read_errno));
        return 1;
    }
    if (rc == 0 && !table)
        printf("%d verdict line(s), all well formed\n", count);
    return rc;
}

enum { OPT_WHAT = 256, OPT_FIGURE, OPT_UNIT, OPT_PEER, OPT_PEER_FIGURE, OPT_PEER_UNIT, OPT_RATIO, OPT_TARGET,
       OPT_NOT_RUN, OPT_CHECK, OPT_TABLE, OPT_HELP };

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"what", required_argument, 0, OPT_WHAT},         {"figure", required_argument, 0, OPT_FIGURE},
        {"unit", required_argument, 0, OPT_UNIT},         {"peer", required_argument, 0, OPT_PEER},
        {"peer-figure", required_argument, 0, OPT_PEER_FIGURE},
        {"peer-unit", required_argument, 0, OPT_PEER_UNIT},
        {"ratio", required_argument, 0, OPT_RATIO},       {"target", required_argument, 0, OPT_TARGET},
        {"not-run", required_argument, 0, OPT_NOT_RUN},   {"check", no_argument, 0, OPT_CHECK},
        {"table", no_argument, 0, OPT_TABLE},             {"help", no_argument, 0, OPT_HELP},
        {0, 0, 0, 0},
    };
    struct verdict v = {0};
    const char *ratio = NULL, *target = NULL, *not_run = NULL;
    bool have_figure = false, have_peer_figure = false, check = false, table = false;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case OPT_WHAT: v.what = optarg; break;
        case OPT_FIGURE: rc = cli_parse_double("figure", optarg, &v.figure); have_figure = true; break;
        case OPT_UNIT: v.unit = optarg; break;
        case OPT_PEER: v.peer = optarg; break;
        case OPT_PEER_FIGURE:
            rc = cli_parse_double("peer-figure", optarg, &v.peer_figure);
            have_peer_figure = true;
            break;
        case OPT_PEER_UNIT: v.peer_unit = optarg; break;
        case OPT_RATIO:
            ratio = optarg; /* a number now; figure/peer and peer/figure once both figures are in */
            if (strcmp(ratio, "figure/peer") != 0 && strcmp(ratio, "peer/figure") != 0)
                rc = cli_parse_double("ratio", ratio, &v.ratio);
            break;
        case OPT_TARGET: target = optarg; break;
        case OPT_NOT_RUN: not_run = optarg; break;
        case OPT_CHECK: check = true; break;
        case OPT_TABLE: table = true; break;
        case OPT_HELP: verdict_usage(argv[0]); return 0;
        default:
            cli_getopt_error(c, argv[optind - 1], options);
            return cli_fail(VERDICT_PROG);
        }
        if (rc < 0)
            return cli_fail(VERDICT_PROG);
    }
    if (optind < argc) {
        err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
        return cli_fail(VERDICT_PROG);
    }
    if (check || table)
        return cli_exit(VERDICT_PROG, verdict_read(VERDICT_PROG, table));

    if (!target || verdict_parse_target(target, &v.op, &v.target) < 0) {
        if (!target)
            err_set(ERR_ARG, "--target is required (>=T or <=T)");
        else
            err_wrap(ERR_ARG, "--target");
        return cli_fail(VERDICT_PROG);
    }
    if (not_run) {
        if (verdict_print_not_run(stdout, v.what, v.peer, v.op, v.target, not_run) < 0) {
            fprintf(stderr, "%s: %s\n", VERDICT_PROG, err_msg());
            return 1;
        }
        return cli_exit(VERDICT_PROG, CLI_EXIT_OK); /* a line lost to a full disk is no verdict */
    }
    if (!have_figure || !have_peer_figure || !ratio) {
        err_set(ERR_ARG, "--figure, --peer-figure and --ratio are required (or --not-run=WHY)");
        return cli_fail(VERDICT_PROG);
    }
    if (strcmp(ratio, "figure/peer") == 0 || strcmp(ratio, "peer/figure") == 0) {
        bool ours_on_top = ratio[0] == 'f';
        double num = ours_on_top ? v.figure : v.peer_figure, den = ours_on_top ? v.peer_figure : v.figure;
        if (den == 0) {
            fprintf(stderr, "%s: --ratio=%s: the %s figure is 0, so there is no ratio\n", VERDICT_PROG, ratio,
                    ours_on_top ? "peer's" : "measured");
            return 1;
        }
        v.ratio = num / den;
    }
    if (verdict_print(stdout, &v) < 0) {
        fprintf(stderr, "%s: %s\n", VERDICT_PROG, err_msg());
        return 1;
    }
    return cli_exit(VERDICT_PROG, CLI_EXIT_OK); /* a line lost to a full disk is no verdict */
}
