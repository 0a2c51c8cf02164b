/* device_exec: the simulated device's arithmetic (see device_exec.h). Read
 * device_exec(). */
#include "sim/device_exec.h"

#include "base/clock.h"

#include <cblas.h> /* OpenBLAS's; it includes <complex.h>, so no identifier here may be called I */
#include <pthread.h>
#include <string.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

static pthread_once_t device_exec_blas_once = PTHREAD_ONCE_INIT;

static void device_exec_blas_init(void) { openblas_set_num_threads(1); }

void device_exec_one_blas_thread(void) { pthread_once(&device_exec_blas_once, device_exec_blas_init); }

/* Each kernel's loop, from the one list: for every element, the body. The
 * arguments are copied into a local the loop's stores cannot reach, so the
 * compiler keeps them in registers and vectorizes the element-wise bodies
 * (which changes no result: nothing is reassociated). */
#define DEVICE_EXEC_LOOP(name)                                                                                         \
    case KERNEL_##name: {                                                                                              \
        const struct kernel_##name args = op->args.name;                                                               \
        for (uint64_t i = 0, n = op->n; i < n; i++)                                                                    \
            kernel_##name(&args, i);                                                                                   \
        break;                                                                                                         \
    }

/* Adam's moments of a gradient that stays 0 (a pixel that is black in every
 * image) decay by beta1 and beta2 each step: after about 800 steps they are
 * subnormal, and never reach 0. x86 computes on subnormals in microcode:
 * measured on this project's MLP, the step went from 0.8 ms to 3 ms within
 * three epochs. So an operation that asks for it runs with flush-to-zero and
 * denormals-are-zero (MXCSR), as PyTorch's torch.set_flush_denormal(True)
 * does for a whole program; everything else keeps IEEE subnormals. */
#if defined(__SSE__)
static unsigned device_exec_flush_subnormals(void)
{
    unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u); /* FTZ (bit 15) and DAZ (bit 6) */
    return saved;
}
static void device_exec_restore_subnormals(unsigned saved) { _mm_setcsr(saved); }
#else
static unsigned device_exec_flush_subnormals(void) { return 0; }
static void device_exec_restore_subnormals(unsigned saved) { (void)saved; }
#endif

/* The kernel loops in the widest vectors the CPU has: the body is compiled
 * for AVX-512, AVX2 and the x86-64 baseline (SSE2), and the loader picks one
 * at start-up (an ifunc). Adam's square root and two divisions per element
 * dominated the simulator's CPU; measured on a 2-core AMD EPYC, its update of
 * the recipe's 235146 parameters took 142 us in SSE2, 75 in AVX2 and 43 in
 * AVX-512. Every clone computes the same bits: each element's operations are
 * IEEE's, in the source's order, whatever the vector width (no FMA: the
 * Makefile compiles this file with -ffp-contract=off). `flatten` inlines
 * every body into each clone: GCC left the replica check's hash, the longest,
 * out of line, where it ran in SSE2 on every CPU (clang, which builds the
 * fuzzers, refuses the two attributes together). Not under
 * ThreadSanitizer: the dynamic loader runs the ifunc's resolver before TSan's
 * runtime is up, and the instrumented resolver crashes the program there. */
#if defined(__SANITIZE_THREAD__) /* GCC's */
#define DEVICE_EXEC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) /* clang's */
#define DEVICE_EXEC_TSAN 1
#endif
#endif
#if defined(__x86_64__) && defined(__clang__) && !defined(DEVICE_EXEC_TSAN)
#define DEVICE_EXEC_WIDEST __attribute__((target_clones("avx512f", "avx2", "default"))) /* no flatten with it */
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(DEVICE_EXEC_TSAN)
#define DEVICE_EXEC_WIDEST __attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#else
#define DEVICE_EXEC_WIDEST
#endif

DEVICE_EXEC_WIDEST static void device_exec_kernel(const struct device_op *op)
{
    unsigned fp = op->flush_subnormals ? device_exec_flush_subnormals() : 0;
    switch (op->kernel) {
        KERNEL_LIST(DEVICE_EXEC_LOOP)
    case KERNEL_COUNT: break;
    }
    if (op->flush_subnormals)
        device_exec_restore_subnormals(fp);
}

uint64_t device_exec(const struct device_op *op)
{
    switch (op->kind) {
    case DEVICE_OP_GEMM: {
        /* A batched op is its products one after another, each the exact call
         * a single product on its pointers makes: the same bits whatever the count. */
        const struct device_gemm *g = &op->gemm;
        int count = g->count > 1 ? g->count : 1;
        uint64_t t0 = clock_now_ns();
        for (int i = 0; i < count; i++)
            cblas_sgemm(CblasColMajor, g->transa == DEVICE_OP_T ? CblasTrans : CblasNoTrans,
                        g->transb == DEVICE_OP_T ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, g->alpha,
                        g->a + i * g->stride_a, g->lda, g->b + i * g->stride_b, g->ldb, g->beta,
                        g->c + i * g->stride_c, g->ldc);
        return clock_now_ns() - t0;
    }
    case DEVICE_OP_KERNEL: device_exec_kernel(op); break;
    case DEVICE_OP_MEMSET: memset(op->dst, op->value, op->bytes); break;
    case DEVICE_OP_COPY_D2D: memmove(op->dst, op->src, op->bytes); break;
    case DEVICE_OP_ACCESS: break; /* the work was done elsewhere: only its place in stream order matters */
    }
    return 0;
}
