/* bench_model: one rank's training step on one thread (see bench_model.h).
 * A step is what a training loop does with a batch the loader delivered:
 * bytes to floats, forward, loss, backward, optimizer. */
#include "bench_model.h"

#include "base/cli.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/hash.h"
#include "ddp/model.h"
#include "ddp/optim.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MODEL_POOL 8192 /* samples: more than any timed run reuses in cache */

void bench_model_defaults(struct bench_model_options *o)
{
    memset(o, 0, sizeof *o);
    o->batches[0] = 32;
    o->batches[1] = 64;
    o->batches[2] = 256;
    o->nbatches = 3;
    o->seconds = 0.4;
    o->repeats = 5;
}

struct bench_model_result {
    double samples_per_s, step_us, gemm_us;
};

static int bench_model_one(int batch, const uint8_t *pool, const int64_t *labels, const struct bench_model_options *o,
                           struct bench_model_result *best)
{
    struct model_spec spec;
    model_spec_default(&spec);
    model_t *m;
    int rc = model_create(&spec, batch, &m);
    if (rc < 0)
        return rc;
    model_init(m, 0);
    struct optim_config oc;
    optim_config_default(&oc, OPTIM_SGD);
    optim_t *opt;
    if ((rc = optim_create(&oc, m, &opt)) < 0) {
        model_destroy(m);
        return rc;
    }
    model_timing_enable(m, 1);
    int at = 0;
    struct model_loss loss;
    memset(best, 0, sizeof *best);
    for (int rep = -1; rc == 0 && rep < o->repeats; rep++) { /* rep -1 warms up */
        model_timing_reset(m);
        uint64_t t0 = clock_now_ns(), steps = 0, limit = (uint64_t)((rep < 0 ? 0.1 : o->seconds) * 1e9);
        while (rc == 0 && clock_now_ns() - t0 < limit) {
            if (at + batch > BENCH_MODEL_POOL)
                at = 0;
            if ((rc = model_input_from_bytes(m, pool + (size_t)at * 784, batch)) < 0 ||
                (rc = model_forward(m, batch, MODEL_TRAIN)) < 0 ||
                (rc = model_loss(m, labels + at, batch, 1.0f, &loss)) < 0 ||
                (rc = model_backward(m, batch, 0, NULL, NULL)) < 0)
                break;
            optim_step(opt, m);
            at += batch;
            steps++;
        }
        double seconds = (double)(clock_now_ns() - t0) * 1e-9;
        if (rep >= 0 && steps && (double)steps * batch / seconds > best->samples_per_s) {
            best->samples_per_s = (double)steps * batch / seconds;
            best->step_us = seconds * 1e6 / (double)steps;
            best->gemm_us = (double)model_timing_get(m).gemm_ns * 1e-3 / (double)steps;
        }
    }
    optim_destroy(opt);
    model_destroy(m);
    return rc;
}

int bench_model(const struct bench_model_options *o)
{
    uint8_t *pool = malloc((size_t)BENCH_MODEL_POOL * 784);
    int64_t *labels = malloc(BENCH_MODEL_POOL * sizeof *labels);
    if (!pool || !labels) {
        free(pool);
        free(labels);
        return err_set(ERR_NOMEM, "bench_model: out of memory for the sample pool");
    }
    uint64_t st = 1;
    for (size_t i = 0; i < (size_t)BENCH_MODEL_POOL * 784; i++)
        pool[i] = (uint8_t)hash_splitmix64_next(&st);
    for (int i = 0; i < BENCH_MODEL_POOL; i++)
        labels[i] = (int64_t)(hash_splitmix64_next(&st) % 10);
    char blas[512];
    printf("bench_model: blas %s\n", model_blas_describe(blas, sizeof blas));
    int rc = 0;
    for (int k = 0; rc == 0 && k < o->nbatches; k++) {
        struct bench_model_result r;
        rc = bench_model_one(o->batches[k], pool, labels, o, &r);
        if (rc == 0)
            printf("bench_model: batch=%d samples_per_s=%.0f step_us=%.1f gemm_us=%.1f\n", o->batches[k],
                   r.samples_per_s, r.step_us, r.gemm_us);
        fflush(stdout);
    }
    free(pool);
    free(labels);
    return rc;
}

#ifdef BENCH_MAIN
static const char bench_model_usage[] =
    "usage: bench_model [--batch=32,64,256] [--seconds=0.4] [--repeats=5]\n"
    "Times one rank's training step (784-256-128-10, SGD momentum 0.9) on one thread at each batch size\n"
    "and prints samples/s and the time inside the matrix products. chapters/06-ddp/bench_model.sh runs\n"
    "it beside PyTorch and prints the ratios.\n";

int main(int argc, char **argv)
{
    struct bench_model_options o;
    bench_model_defaults(&o);
    static const struct option longs[] = {{"batch", required_argument, 0, 'b'},
                                          {"seconds", required_argument, 0, 's'},
                                          {"repeats", required_argument, 0, 'r'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'b': {
            o.nbatches = 0;
            char *text = optarg, *tok;
            while ((tok = strsep(&text, ",")) != NULL) {
                if (o.nbatches == BENCH_MODEL_MAX_BATCHES || cli_parse_u64("--batch", tok, &v) < 0 || v < 1 ||
                    v > MODEL_MAX_BATCH) {
                    fprintf(stderr, "bench_model: --batch takes up to %d sizes from 1 to %d\n",
                            BENCH_MODEL_MAX_BATCHES, MODEL_MAX_BATCH);
                    return 2;
                }
                o.batches[o.nbatches++] = (int)v;
            }
            break;
        }
        case 's':
            if (cli_parse_double("--seconds", optarg, &o.seconds) < 0 || !(o.seconds > 0 && o.seconds <= 60)) {
                fprintf(stderr, "bench_model: --seconds takes 0 to 60\n");
                return 2;
            }
            break;
        case 'r':
            if (cli_parse_u64("--repeats", optarg, &v) < 0 || v < 1 || v > 100) {
                fprintf(stderr, "bench_model: --repeats takes 1 to 100\n");
                return 2;
            }
            o.repeats = (int)v;
            break;
        case 'h': fputs(bench_model_usage, stdout); return 0;
        default: fprintf(stderr, "bench_model: unknown flag (try --help)\n"); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bench_model: unexpected argument '%s' (try --help)\n", argv[optind]);
        return 2;
    }
    if (bench_model(&o) < 0) {
        fprintf(stderr, "bench_model: %s\n", err_msg());
        return 1;
    }
    return 0;
}
#endif
