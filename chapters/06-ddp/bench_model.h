/* bench_model: the training step of one rank on one thread, the speed figure
 * of chapter 6. build/chapter-6 --bench=model runs it; chapters/06-ddp/
 * bench.sh runs that beside PyTorch (bench_model.py) and prints the ratios. */
#ifndef CH6_BENCH_MODEL_H
#define CH6_BENCH_MODEL_H

#define BENCH_MODEL_MAX_BATCHES 8

struct bench_model_options {
    int batches[BENCH_MODEL_MAX_BATCHES]; /* the batch sizes to time */
    int nbatches;
    double seconds;  /* timed per repetition and batch size */
    int repeats;     /* repetitions; the best counts */
    const char *device; /* "sim" (the CPU figure), "cuda", or NULL: a GPU when found */
};

/* Defaults: batches 32, 64, 256; 0.4 s; 5 repetitions; the simulated device. */
void bench_model_defaults(struct bench_model_options *o);

/* Trains the default MLP (784-256-128-10, SGD lr 0.01 momentum 0.9, random
 * bytes from a pool of 8192 samples, as bench_model.py does) at each batch
 * size, and prints one line per size:
 *     bench_model: batch=32 samples_per_s=82080 step_us=389.9 gemm_us=284.8
 * (the best repetition; gemm_us is the time inside cblas_sgemm in that
 * repetition's steps) after a line describing the BLAS. 0, or a negative
 * ERR_* with err_msg() set. */
int bench_model(const struct bench_model_options *o);

#endif
