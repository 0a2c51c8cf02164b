/* tensordiff: are two safetensors files the same parameters, bit for bit or
 * to a tolerance?
 *
 * Where it sits: beside chapter 6, whose runs leave their parameters as
 * safetensors files (--save, --checkpoint). The tests compare the simulator's
 * run with the same run under mpirun, and a resumed run with one never
 * interrupted; anyone can compare two runs of their own the same way. Reads
 * both files with lib/ddp/safetensors.h (as hostile input), pairs the tensors
 * by name, and prints per tensor the largest difference, absolute and
 * relative to the tensor's largest magnitude in A.
 *
 *   tensordiff A B                   exit 0 when every tensor is the same bits
 *   tensordiff A B --tolerance=1e-5  exit 0 when every difference is at most
 *                                    1e-5 of its tensor's largest element
 *
 * Exit 1 when they differ beyond that (or hold different tensors), 2 for a bad
 * flag. Float32 and int64 tensors are compared; others must be equal bytes.
 */
#include "base/cli.h"
#include "base/error.h"
#include "ddp/safetensors.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TD_PROG "tensordiff"

static void td_usage(void)
{
    printf("usage: tensordiff A B [--tolerance=X] [--quiet]\n"
           "\n"
           "Compares the tensors of two safetensors files by name: per tensor, the largest difference and\n"
           "that difference over the tensor's largest magnitude in A. Exit 0 when they are the same bits\n"
           "(or, with --tolerance, when every relative difference is at most X), 1 when not or when the\n"
           "files hold different tensors, 2 for a bad flag.\n"
           "\n"
           "  --tolerance=X   relative tolerance, 0 to 1 (default 0: bit for bit)\n"
           "  --quiet         print only the verdict line\n"
           "  --help          this text\n");
}

/* Largest |a - b| and largest |a| of a float32 tensor; *bits when every element is the same bits. */
static void td_f32(const struct safetensors_tensor *a, const struct safetensors_tensor *b, double *diff,
                   double *scale, int *bits)
{
    *diff = *scale = 0;
    *bits = memcmp(a->data, b->data, a->bytes) == 0;
    for (size_t i = 0; i < a->numel; i++) {
        float x, y;
        memcpy(&x, (const char *)a->data + 4 * i, 4);
        memcpy(&y, (const char *)b->data + 4 * i, 4);
        double d = fabs((double)x - (double)y);
        if (isnan(x) != isnan(y))
            d = INFINITY;
        *diff = d > *diff ? d : *diff;
        *scale = fabs((double)x) > *scale ? fabs((double)x) : *scale;
    }
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {{"tolerance", required_argument, 0, 't'},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    double tol = 0;
    int quiet = 0, c, rc = 0;
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":", longs, NULL)) != -1) {
        switch (c) {
        case 't': rc = cli_parse_double_range("tolerance", optarg, 0, 1, &tol); break;
        case 'q': quiet = 1; break;
        case 'h': td_usage(); return CLI_EXIT_OK;
        default: rc = cli_getopt_error(c, argv[optind - 1], longs);
        }
    }
    if (rc == 0 && argc - optind != 2)
        rc = err_set(ERR_ARG, "expected two files, A and B (try --help)");
    if (rc < 0)
        return cli_fail(TD_PROG);
    safetensors_t *fa = NULL, *fb = NULL;
    if (safetensors_open(argv[optind], &fa) < 0 || safetensors_open(argv[optind + 1], &fb) < 0) {
        safetensors_close(fa);
        return cli_error(TD_PROG);
    }
    int differ = 0, all_bits = 1;
    double worst = 0;
    const char *worst_name = "", *unpaired = NULL, *unpaired_why = ""; /* A's first tensor with no match in B */
    if (safetensors_count(fa) != safetensors_count(fb)) {
        if (!quiet)
            printf("%s has %zu tensors, %s has %zu\n", argv[optind], safetensors_count(fa), argv[optind + 1],
                   safetensors_count(fb));
        differ = 1;
    }
    for (size_t i = 0; i < safetensors_count(fa); i++) {
        const struct safetensors_tensor *a = safetensors_at(fa, i), *b = safetensors_find(fb, a->name);
        if (!b || b->dtype != a->dtype || b->numel != a->numel || b->ndim != a->ndim ||
            memcmp(a->shape, b->shape, sizeof a->shape) != 0) {
            const char *why = b ? "another dtype or shape in B" : "missing from B";
            if (!quiet)
                printf("%-40s %s\n", a->name, why);
            if (!unpaired) {
                unpaired = a->name;
                unpaired_why = why;
            }
            differ = 1;
            continue;
        }
        double diff = 0, scale = 0, rel;
        int bits;
        if (a->dtype == SAFETENSORS_F32) {
            td_f32(a, b, &diff, &scale, &bits);
            rel = scale > 0 ? diff / scale : diff;
        } else { /* counters and the rest: equal or not */
            bits = memcmp(a->data, b->data, a->bytes) == 0;
            rel = diff = bits ? 0 : INFINITY;
        }
        all_bits &= bits;
        if (!bits && (tol == 0 || rel > tol)) /* bit for bit: -0 against +0, or two NaNs, differ too */
            differ = 1;
        if (rel > worst || (worst == 0 && !bits)) {
            worst = rel;
            worst_name = a->name;
        }
        if (!quiet)
            printf("%-40s %s  largest difference %.3g, relative %.3g\n", a->name, bits ? "same bits" : "differs  ",
                   diff, rel);
    }
    if (all_bits && !differ)
        printf("tensordiff: the same bits\n");
    else if (!differ)
        printf("tensordiff: within tolerance %g (largest relative difference %.3g, %s)\n", tol, worst, worst_name);
    else if (!*worst_name) /* no values differ: the files hold other tensors */
        printf("tensordiff: DIFFERENT tensors (%s%s%s)\n", unpaired ? unpaired : "B has more of them",
               unpaired ? ": " : "", unpaired_why);
    else
        printf("tensordiff: DIFFERENT%s (largest relative difference %.3g, %s)\n",
               tol > 0 ? " beyond the tolerance" : "", worst, worst_name);
    safetensors_close(fa);
    safetensors_close(fb);
    return cli_exit(TD_PROG, differ ? CLI_EXIT_FAILED : CLI_EXIT_OK); /* "the same bits" unsaid is no verdict */
}
