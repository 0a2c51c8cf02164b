/* blas_probe: which OpenBLAS kernel set this process gets, and whether this
 * CPU can run it.
 *
 * Where it sits: beside the tests. tools/crosscheck_kernels.sh (make
 * crosscheck-kernels) runs it under each OPENBLAS_CORETYPE before running the
 * cross-checks under it. It prints model_blas_describe() (lib/ddp/model.h:
 * the library's build and the kernel set it chose), then runs one forward and
 * backward of chapter 6's MLP, whose products are the sgemm calls every
 * chapter makes. Why the step: OpenBLAS 0.3.21 takes a kernel set named in
 * OPENBLAS_CORETYPE whether or not the CPU has its instructions, and the first
 * product on a CPU without them dies with SIGILL (SkylakeX's AVX-512 on an AMD
 * EPYC of the Zen 2 or 3 generation, for one); a name it does not know
 * ("Cooperlake" in 0.3.21) it ignores, keeping the kernel set it detected. The
 * printed core says which happened.
 */
#include "base/cli.h"
#include "base/error.h"
#include "ddp/model.h"
#include "transfer/device.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#define PROBE_PROG "blas_probe"
#define PROBE_BATCH 32

int main(int argc, char **argv)
{
    static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: %s\n\nPrints the OpenBLAS build and the kernel set it chose (OPENBLAS_CORETYPE "
                   "picks another), then\nruns one forward and backward of the 784-256-128-10 MLP with it: on "
                   "a CPU without the\nkernel set's instructions that dies with SIGILL. Exit 0 when the step "
                   "ran.\n",
                   PROBE_PROG);
            return 0;
        }
        cli_getopt_error(c, argv[optind - 1], options);
        return cli_fail(PROBE_PROG);
    }
    if (optind < argc) {
        err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
        return cli_fail(PROBE_PROG);
    }

    char blas[256];
    printf("%s: %s\n", PROBE_PROG, model_blas_describe(blas, sizeof blas));
    fflush(stdout); /* said before the step that may die */
    struct model_spec spec = {.inputs = 784, .classes = 10, .hidden = {256, 128}, .nhidden = 2};
    struct device_config dc;
    device_config_default(&dc);
    dc.backend = "sim"; /* the CPU's BLAS is what is probed */
    device_t *dev = NULL;
    device_stream_t *s = NULL;
    model_t *m = NULL;
    if (device_open(&dc, &dev) < 0 || device_stream_create(dev, "compute", &s) < 0 ||
        model_create(&spec, PROBE_BATCH, s, &m) < 0 || model_init(m, 0) < 0)
        return cli_error(PROBE_PROG);
    uint8_t bytes[PROBE_BATCH * 784];
    int64_t labels[PROBE_BATCH];
    for (int i = 0; i < PROBE_BATCH * 784; i++)
        bytes[i] = (uint8_t)(i * 7);
    for (int b = 0; b < PROBE_BATCH; b++)
        labels[b] = b % 10;
    struct model_loss loss;
    int rc = model_upload_batch(m, bytes, NULL, labels, PROBE_BATCH);
    if (rc == 0)
        rc = model_forward(m, PROBE_BATCH, MODEL_TRAIN);
    if (rc == 0)
        rc = model_loss(m, PROBE_BATCH, 1.0f, &loss);
    if (rc == 0)
        rc = model_backward(m, PROBE_BATCH, 0, NULL, NULL);
    if (rc == 0)
        rc = model_sync(m);
    model_destroy(m);
    device_stream_destroy(s);
    device_close(dev);
    if (rc < 0)
        return cli_error(PROBE_PROG);
    printf("%s: one training step ran (loss %.4f)\n", PROBE_PROG, loss.loss);
    return cli_exit(PROBE_PROG, CLI_EXIT_OK);
}
