/* demos: chapter 6's failure stories, each a way real DDP jobs go wrong, run
 * in the simulator where the diagnosis names the rank and the collective,
 * then fixed, each fix shown to work (--demo=NAME, or all):
 *
 *   eval-hang     "hangs at the start of epoch 2": BatchNorm, broadcast_buffers,
 *                 and rank 0 alone evaluating through the DDP wrapper
 *   save-timeout  "NCCL timeout while saving": rank 0 writes a checkpoint for
 *                 longer than the collective timeout
 *   uneven        a custom sampler gives one rank a batch fewer
 *   slower        four GPUs slower than one: the same global batch split four ways,
 *                 tiny buckets, no overlap (modelled on PCIe-connected GPUs), and the fixes
 *   world-size    the same global batch on 1, 2, 4 and 8 ranks ends in other
 *                 parameters (float addition is not associative); --same-bits
 *                 ends in the same ones
 *
 * A demo exits 0 when the broken run failed the way the story says and every
 * fix ran to the end; 1 otherwise (a "fix" that failed, a failure of another
 * kind). The failures are the lesson.
 */
#include "chapter6.h"

#include "base/error.h"
#include "base/hash.h"
#include "transfer/hw.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const ch6_demo_names[] = {"eval-hang", "save-timeout", "uneven", "slower", "world-size", "all", NULL};

/* The watchdog of the save-timeout story's failing run, the one story told
 * by a timeout; every other run keeps the communicator's default (30 s), so
 * that a rank the machine's load holds back is never mistaken for the fault. */
#define CH6_DEMO_TIMEOUT_S 1.0

/* A small run for the stories: 4 ranks, a slice of the training set, quiet. */
static void ch6_demo_run(const struct ch6_run *base, struct ch6_run *run, uint64_t records)
{
    *run = *base;
    run->backend = "sim";
    run->world = 4;
    run->quiet = 1;
    run->trace_path = NULL;
    run->out_dir = NULL;
    run->gantt_name = run->epochs_name = run->gantt_what = NULL;
    run->timeout_s = 0; /* the communicator's default */
    struct train_config *c = &run->train;
    c->train_records = records;
    c->epochs = 2;
    c->batch = 64;
    c->max_steps = 0;
    c->check = 1;
    c->trace_steps = 0;
}

/* Prints a message indented under the demo. */
static void ch6_indent(const char *msg)
{
    fputs("    ", stdout);
    for (const char *p = msg; *p; p++)
        fputs(*p == '\n' ? "\n    " : (char[]){*p, 0}, stdout);
    putchar('\n');
}

/* Runs the broken configuration: 0 when it failed with a message holding
 * every needle, 1 otherwise. */
static int ch6_demo_fails(const struct ch6_run *run, const char *const *needles)
{
    struct ch6_outcome out;
    int rc = ch6_train(run, &out);
    timeline_all_free(out.result.timeline);
    if (rc == 0) {
        printf("  UNEXPECTED: the run finished\n");
        return 1;
    }
    char msg[4096];
    snprintf(msg, sizeof msg, "%s", err_msg());
    printf("  it failed after %.1f s (measured); the diagnosis:\n", out.wall_s);
    ch6_indent(msg);
    for (int i = 0; needles[i]; i++)
        if (!strstr(msg, needles[i])) {
            printf("  UNEXPECTED: the diagnosis does not say \"%s\"\n", needles[i]);
            return 1;
        }
    return 0;
}

/* Runs a fix: 0 when it ran to the end. */
static int ch6_demo_fix(const struct ch6_run *run, const char *what)
{
    struct ch6_outcome out;
    int rc = ch6_train(run, &out);
    timeline_all_free(out.result.timeline);
    if (rc < 0) {
        printf("  fix: %s\n  UNEXPECTED: it failed too:\n", what);
        ch6_indent(err_msg());
        return 1;
    }
    printf("  fix: %s\n    -> %llu steps in %.1f s (measured), test accuracy %.4f: it works\n", what,
           (unsigned long long)out.result.steps, out.wall_s, out.result.last.test_accuracy);
    return 0;
}

/* ---- hangs at the start of epoch 2 ------------------------------------------------------- */

static int ch6_demo_eval_hang(const struct ch6_run *base)
{
    printf("==== demo eval-hang: \"training hangs at the start of epoch 2\"\n"
           "  A model with BatchNorm1d, DDP's broadcast_buffers on (PyTorch's default). After epoch 1, rank 0\n"
           "  alone evaluates the model through the DDP wrapper (`if rank == 0: evaluate(ddp_model)`). Every\n"
           "  forward through the wrapper first broadcasts rank 0's BatchNorm statistics: a collective, which\n"
           "  only rank 0 issues. The others go on to epoch 2, so from there every collective is paired with\n"
           "  the wrong one. On NCCL the job hangs (or sums garbage); the simulator compares every collective's\n"
           "  fingerprint first and stops at the first mismatch, naming it and both sides.\n");
    struct ch6_run run;
    ch6_demo_run(base, &run, 2048);
    run.train.spec.batchnorm = 1;
    run.train.reducer.broadcast_buffers = 1;
    run.train.eval = TRAIN_EVAL_RANK0_WRAPPED;
    fflush(stdout);
    int bad = ch6_demo_fails(&run, (const char *const[]){"fingerprint mismatch", "rank 0", "broadcast", NULL});
    struct ch6_run fix = run;
    fix.train.eval = TRAIN_EVAL_RANK0_UNWRAPPED;
    bad += ch6_demo_fix(&fix, "rank 0 evaluates the unwrapped model (ddp_model.module): no collective");
    fix.train.eval = TRAIN_EVAL_EVERY_RANK;
    bad += ch6_demo_fix(&fix, "every rank evaluates (its share of the test set, counts summed): every rank "
                              "issues the broadcast");
    fix.train.eval = TRAIN_EVAL_RANK0_WRAPPED;
    fix.train.reducer.broadcast_buffers = 0;
    bad += ch6_demo_fix(&fix, "broadcast_buffers=False: a forward through the wrapper issues no collective (each "
                              "rank then keeps its own BatchNorm statistics)");
    printf("  lesson: anything that goes through the DDP wrapper may be a collective; run it on every rank\n"
           "  or not at all. Evaluate on every rank, or on rank 0 with the unwrapped module.\n\n");
    return bad;
}

/* ---- NCCL timeout while saving ------------------------------------------------------------ */

static int ch6_demo_save_timeout(const struct ch6_run *base)
{
    char dir[] = "/tmp/ddp-chapter6-demo-XXXXXX";
    if (!mkdtemp(dir)) {
        printf("  UNEXPECTED: cannot make a temporary directory for the checkpoints\n");
        return 1;
    }
    struct ch6_run run;
    ch6_demo_run(base, &run, 1024);
    run.train.epochs = 1;
    run.train.checkpoint_dir = dir;
    run.train.checkpoint_every = 2;
    run.timeout_s = CH6_DEMO_TIMEOUT_S;
    run.train.save_stall_s = 3 * CH6_DEMO_TIMEOUT_S;
    run.train.check = 0; /* as in a real job: a step's first collective is then its gradients' all-reduce */
    printf("==== demo save-timeout: \"NCCL timeout while saving a checkpoint\"\n"
           "  Rank 0 writes a checkpoint every 2 steps (`if rank == 0: torch.save(...)`), to storage slow enough\n"
           "  that a save lasts %.0f s (the demo holds rank 0 in the save: a network file system on a bad day).\n"
           "  The other ranks do not wait for it: they start the next step and wait in its first collective,\n"
           "  whose watchdog (here %.0f s; NCCL's default in PyTorch is 10 minutes) gives up before rank 0 comes.\n",
           run.train.save_stall_s, run.timeout_s);
    fflush(stdout);
    int bad = ch6_demo_fails(&run, (const char *const[]){"timed out", "rank 0: running its own code (saving a "
                                                                       "checkpoint", NULL});
    struct ch6_run fix = run;
    fix.train.save_stall_s = 0.5;
    fix.timeout_s = COMM_DEFAULT_TIMEOUT_S;
    char what[256];
    snprintf(what, sizeof what, "a collective timeout longer than the slowest save (%.0f s against %.1f s: "
             "init_process_group(timeout=...)); better, saves that take less time than the timeout",
             fix.timeout_s, fix.train.save_stall_s);
    bad += ch6_demo_fix(&fix, what);
    printf("  lesson: a watchdog names the rank it gave up on, and what that rank was doing; rank 0 is not\n"
           "  hung, it is busy. Make saves short (write to fast local disk, or hand the copy to a thread) or\n"
           "  the timeout long, and never let one rank do long work while the others sit in a collective.\n\n");
    char path[512];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    remove(path);
    rmdir(dir);
    return bad;
}

/* ---- uneven batches -------------------------------------------------------------------------- */

/* A custom sampler: rank r takes a contiguous block of ceil(n / W) indices,
 * the last rank what is left, as splitting a list of files by rank does. */
static int ch6_contiguous(void *user, int rank, int world, uint64_t epoch, uint64_t n, uint64_t **out,
                          uint64_t *count)
{
    (void)user, (void)epoch;
    uint64_t block = (n + (uint64_t)world - 1) / (uint64_t)world, first = (uint64_t)rank * block;
    uint64_t end = first + block < n ? first + block : n;
    *count = end > first ? end - first : 0;
    if (!(*out = malloc((*count ? *count : 1) * sizeof **out)))
        return err_set(ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < *count; i++)
        (*out)[i] = first + i;
    return 0;
}

static int ch6_demo_uneven(const struct ch6_run *base)
{
    struct ch6_run run;
    ch6_demo_run(base, &run, 3841);
    run.train.epochs = 1;
    run.train.indices = ch6_contiguous;
    uint64_t block = (3841 + 3) / 4, last = 3841 - 3 * block;
    printf("==== demo uneven: one rank has a batch fewer\n"
           "  A custom sampler splits the %d training samples into 4 contiguous blocks, as one splits a list of\n"
           "  files: ranks 0 to 2 get %llu samples (%llu batches of 64), rank 3 the remaining %llu (%llu batches).\n"
           "  Rank 3 finishes the epoch one step early and goes on to the epoch's end (its statistics'\n"
           "  all-reduce) while the others start one more step. On NCCL: a hang at the end of the epoch, or\n"
           "  sums of unrelated buffers.\n",
           3841, (unsigned long long)block, (unsigned long long)((block + 63) / 64), (unsigned long long)last,
           (unsigned long long)((last + 63) / 64));
    fflush(stdout);
    int bad = ch6_demo_fails(&run, (const char *const[]){"fingerprint mismatch", "rank 3", NULL});
    struct ch6_run fix = run;
    fix.train.indices = NULL;
    bad += ch6_demo_fix(&fix, "the DistributedSampler: it pads the order to a multiple of the world (or, with "
                              "drop_last, cuts it), so every rank gets the same number of samples, hence batches");
    printf("  lesson: every rank must run the same number of steps. Any sampler of your own must pad or cut\n"
           "  to equal counts; PyTorch's join() context manager is the other way out, for data that cannot.\n\n");
    return bad;
}

/* The GPU system the slower story is told on: GPUs that talk over PCIe
 * through the host, no NVLink, where an all-reduce's latency is a PCIe
 * hop's (lib/transfer/hw.c). */
#define CH6_SLOWER_HW "rtx4090"

/* ---- multi-GPU slower than one GPU --------------------------------------------------------- */

/* An epoch of Fashion-MNIST's training set: the time each row's rate gives it. */
#define CH6_SLOWER_EPOCH 60000

static int ch6_demo_slower(const struct ch6_run *base)
{
    printf("==== demo slower: four GPUs slower than one\n"
           "  \"Training on 4 GPUs is slower than on 1\": the same global batch of 64, split across 4 GPUs that\n"
           "  talk over PCIe through the host (%s, no NVLink), each with batches of 16. On one GPU this MLP's\n"
           "  step is mostly its kernels' launch latency, not arithmetic, so a quarter of the batch barely\n"
           "  shortens it; and every bucket's all-reduce pays its PCIe hops. Rows: 1 GPU without DDP; 4 GPUs\n"
           "  with buckets so small that almost every parameter has its own (5 all-reduces a step) started\n"
           "  only after backward; the first fix, buckets of 64 KiB and 256 KiB started under backward; the\n"
           "  second, a per-GPU batch of 64 (global 256, the learning rate scaled by 4 to match). The replica\n"
           "  check is off: a real job does not pay for it. Every time is modelled: the same on any machine.\n",
           CH6_SLOWER_HW);
    fflush(stdout);
    static const struct {
        const char *what, *gantt;
        int world, overlap, batch;
        double first_kb, cap_mb;
    } rows[] = {
        {"1 GPU, no DDP, batch 64 (global 64)", NULL, 1, 1, 64, 1024, 25},
        {"4 GPUs, batch 16 each (global 64), tiny buckets, no overlap", "slower-no-overlap", 4, 0, 16, 0.1, 0.0001},
        {"4 GPUs, batch 16 each (global 64), 64/256 KiB buckets, overlap", "slower-overlap", 4, 1, 16, 64, 0.25},
        {"4 GPUs, batch 64 each (global 256, lr x4), 64/256 KiB buckets, overlap", NULL, 4, 1, 64, 64, 0.25},
        /* not a way to train: what one GPU's step costs at the 4-GPU rows' per-GPU batch */
        {"1 GPU, no DDP, batch 16", NULL, 1, 1, 16, 1024, 25},
    };
    enum { REF = 4 }; /* the row above */
    enum { ROWS = sizeof rows / sizeof rows[0] };
    const struct hw_profile *hw;
    if (hw_profile_find(CH6_SLOWER_HW, &hw) < 0) {
        printf("  UNEXPECTED: %s\n", err_msg());
        return 1;
    }
    double rate[ROWS] = {0}, step[ROWS] = {0}, comm[ROWS] = {0};
    int bad = 0;
    for (int i = 0; i < ROWS; i++) {
        struct ch6_run run;
        ch6_demo_run(base, &run, 16384);
        run.timeout_s = 0; /* the communicator's default: this one is about speed, not hangs */
        struct train_config *c = &run.train;
        c->batch = (uint32_t)rows[i].batch;
        c->epochs = 1;
        c->max_steps = 200;
        c->ddp = rows[i].world > 1; /* one GPU: no DDP */
        c->check = 0;
        c->eval = TRAIN_EVAL_NONE;
        c->overlap = rows[i].overlap;
        /* the linear scaling rule: a global batch 4 times the baseline's takes 4 times its step size */
        c->optim.lr *= (double)(rows[i].world * rows[i].batch) / rows[0].batch;
        c->reducer.first_bucket_bytes = (size_t)(rows[i].first_kb * 1024);
        c->reducer.bucket_cap_bytes = (size_t)(rows[i].cap_mb * 1024 * 1024);
        run.world = rows[i].world;
        run.hw = hw; /* the GPUs, their host link and the links between them */
        hw_host_link(hw, &c->link);
        c->gemm_flops = hw_gemm_flops(hw);
        c->gpu_memory_bps = hw->memory_bps;
        char what[128];
        if (rows[i].gantt && base->out_dir) {
            snprintf(what, sizeof what, "demo slower, %s", rows[i].what);
            run.out_dir = base->out_dir;
            run.gantt_name = rows[i].gantt;
            run.gantt_what = what;
            c->trace_steps = 8;
        }
        struct ch6_outcome out;
        if (ch6_train(&run, &out) < 0) {
            printf("  UNEXPECTED: %s failed:\n", rows[i].what);
            ch6_indent(err_msg());
            bad++;
            continue;
        }
        const struct train_times *p = &out.result.per_step;
        char st[32], m[32], ep[32], vs[64] = ": the baseline";
        rate[i] = out.result.samples_per_s;
        step[i] = p->step;
        comm[i] = p->comm;
        if (i == REF) {
            printf("  for reference, %s: a step %s, %.0f%% of batch 64's for a quarter of the work\n", rows[i].what,
                   ch6_ms(p->step, st, sizeof st), 100 * step[i] / step[0]);
            timeline_all_free(out.result.timeline);
            continue;
        }
        if (i > 0 && rate[0] > 0)
            snprintf(vs, sizeof vs, ": %.2fx 1 GPU's, %s", rate[i] / rate[0], rate[i] < rate[0] ? "SLOWER" : "faster");
        printf("  %s\n    %7.0f samples/s, an epoch of %d samples in %s (modelled)%s\n"
               "    a step %s, of which waiting for all-reduces %s\n",
               rows[i].what, rate[i], CH6_SLOWER_EPOCH, ch6_ms(rate[i] > 0 ? CH6_SLOWER_EPOCH / rate[i] : 0, ep, sizeof ep),
               vs, ch6_ms(p->step, st, sizeof st), ch6_ms(p->comm, m, sizeof m));
        if (rows[i].gantt && base->out_dir)
            printf("    its timeline: %s/%s.png\n", base->out_dir, rows[i].gantt);
        timeline_all_free(out.result.timeline);
    }
    if (bad)
        return bad;
    /* the story's claims, each checked: a demo whose numbers stopped telling it says so */
    if (!(rate[1] < rate[0])) {
        printf("  UNEXPECTED: 4 GPUs with tiny buckets and no overlap are not slower than 1 GPU (%.2fx)\n",
               rate[1] / rate[0]);
        bad++;
    }
    if (!(rate[2] > rate[1] && comm[2] < comm[1])) {
        printf("  UNEXPECTED: bigger buckets with overlap do not help (%.2fx against %.2fx 1 GPU's)\n",
               rate[2] / rate[0], rate[1] / rate[0]);
        bad++;
    }
    if (!(step[REF] > 0.8 * step[0])) {
        printf("  UNEXPECTED: 1 GPU's step at batch 16 is not close to its step at batch 64 (%.0f%%)\n",
               100 * step[REF] / step[0]);
        bad++;
    }
    if (!(rate[3] > rate[0])) {
        printf("  UNEXPECTED: 4 GPUs with a batch of 64 each are not faster than 1 GPU (%.2fx)\n", rate[3] / rate[0]);
        bad++;
    }
    if (bad)
        return bad;
    char s0[32], s1[32];
    printf("  verdict: with the same global batch, 4 GPUs are SLOWER than 1: %.2fx its samples/s. A GPU's\n"
           "  step at batch 16 costs %s against %s at batch 64 (launches, not arithmetic), and the\n"
           "  all-reduces come on top. Bigger buckets under backward: %.2fx, %s.\n"
           "  A batch of 64 on each GPU, as the 1-GPU run had: %.2fx, faster than 1 GPU.\n",
           rate[1] / rate[0], ch6_ms(step[REF], s1, sizeof s1), ch6_ms(step[0], s0, sizeof s0), rate[2] / rate[0],
           rate[2] < rate[0] ? "still slower than 1 GPU" : "faster than 1 GPU", rate[3] / rate[0]);
    printf("  lesson: splitting a small batch across GPUs splits work a GPU never waited on: a small model's\n"
           "  step is its kernels' launch latency, and DDP adds an all-reduce per bucket, each paying the\n"
           "  link's latency (here PCIe hops through the host). The timelines show the no-overlap run's\n"
           "  all-reduces queued after backward, one per parameter, and the overlapped run's first bucket\n"
           "  under backward; fc1.weight holds 85%% of the gradient and is ready last, so overlap hides little.\n"
           "  Fix it in this order: fewer, bigger buckets started under backward (bucket_cap_mb, PyTorch's\n"
           "  defaults), then enough work per GPU (a bigger per-GPU batch, the learning rate scaled with the\n"
           "  global batch), and on a PCIe machine expect less than 4 times from 4 GPUs.\n\n");
    return bad;
}

/* ---- the same global batch at any world size ------------------------------------------------- */

/* One float sum, grouped as written: volatile so that the compiler adds in
 * float, in this order. */
static float ch6_add(float a, float b)
{
    volatile float s = a + b;
    return s;
}

/* The 64-bit hash of a file's bytes into *h: 0, or 1 with the error printed. */
static int ch6_file_hash(const char *path, uint64_t *h)
{
    FILE *f = fopen(path, "rb");
    *h = HASH_FNV1A_BASIS;
    char buf[1 << 16];
    size_t n;
    while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
        *h = hash_fnv1a(*h, buf, n);
    int bad = !f || ferror(f);
    if (f)
        fclose(f);
    if (bad)
        printf("  UNEXPECTED: cannot read %s\n", path);
    return bad;
}

/* The test accuracy after each epoch (rank 0's report), for the table. */
struct ch6_world_curve {
    double acc[4];
    int epochs;
};
static void ch6_world_epoch(void *user, const struct train_epoch *e)
{
    struct ch6_world_curve *cv = user;
    if (cv->epochs < 4)
        cv->acc[cv->epochs++] = e->test_accuracy;
}

static int ch6_demo_world_size(const struct ch6_run *base)
{
    float a = 1e8f, b = 1.0f, c = -1e8f, d = 1.0f;
    printf("==== demo world-size: one global batch of 64 on 1, 2, 4 and 8 ranks\n"
           "  DistributedSampler gives the W ranks of a step the same 64 samples whatever W is, but the sum of\n"
           "  their gradients is grouped by W, and float addition is not associative. Four numbers:\n"
           "    ((1e8 + 1) + -1e8) + 1 = %g   one rank, in order\n"
           "    (1e8 + 1) + (-1e8 + 1) = %g   two ranks, each half its own sum, then the all-reduce\n"
           "    (1e8 + -1e8) + (1 + 1) = %g   two ranks holding every other number (the sampler's stride)\n",
           (double)ch6_add(ch6_add(ch6_add(a, b), c), d), (double)ch6_add(ch6_add(a, b), ch6_add(c, d)),
           (double)ch6_add(ch6_add(a, c), ch6_add(b, d)));
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/ch6-world-size-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("  UNEXPECTED: cannot make a temporary directory\n");
        return 1;
    }
    static const int worlds[] = {1, 2, 4, 8};
    int bad = 0, parted = 0, same = 1;
    for (int mode = 0; mode < 2 && !bad; mode++) {
        printf("  %s, 2 epochs of 8192 samples, Adam:\n", mode ? "--same-bits" : "DDP as PyTorch sums (the ring)");
        uint64_t first = 0;
        for (int i = 0; i < 4 && !bad; i++) {
            struct ch6_run run;
            ch6_demo_run(base, &run, 8192);
            run.world = worlds[i];
            run.train.batch = (uint32_t)(64 / worlds[i]);
            run.train.same_bits = mode;
            struct ch6_world_curve cv = {0};
            run.on_epoch = ch6_world_epoch;
            run.on_epoch_user = &cv;
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/w%d-%d.safetensors", dir, worlds[i], mode);
            run.train.save_path = path;
            struct ch6_outcome out;
            uint64_t h = 0;
            if (ch6_train(&run, &out) < 0) {
                printf("  UNEXPECTED: %d rank%s failed:\n", worlds[i], worlds[i] == 1 ? "" : "s");
                ch6_indent(err_msg());
                bad++;
            } else {
                bad += ch6_file_hash(path, &h);
            }
            timeline_all_free(out.result.timeline);
            remove(path);
            if (bad)
                break;
            if (i == 0)
                first = h;
            printf("    %d rank%s x batch %2u: test accuracy", worlds[i], worlds[i] == 1 ? " " : "s", run.train.batch);
            for (int e = 0; e < cv.epochs; e++)
                printf(" %.4f", cv.acc[e]);
            printf(", parameters' hash %016llx%s\n", (unsigned long long)h,
                   i == 0 ? "" : h == first ? " (the same bits)" : " (other bits)");
            if (mode == 0 && i > 0 && h != first)
                parted = 1;
            if (mode == 1 && h != first)
                same = 0;
        }
    }
    rmdir(dir);
    if (!bad && !parted) {
        printf("  UNEXPECTED: DDP's default mode ended in the same bits at every world size\n");
        bad++;
    }
    if (!bad && !same) {
        printf("  UNEXPECTED: --same-bits ended in other bits at some world size\n");
        bad++;
    }
    if (!bad)
        printf("  lesson: the same samples, other roundings: the default runs part in the last bits at the first\n"
               "  step, and training carries the difference on. --same-bits cuts every global batch into 8 atoms,\n"
               "  computes each atom alone with the same shapes at any W, and adds them in one fixed tree whose\n"
               "  subtrees are what each rank holds: 1, 2, 4 and 8 ranks end in one set of bits.\n\n");
    return bad;
}

int ch6_demo(const struct ch6_run *base, const char *name)
{
    static int (*const fns[])(const struct ch6_run *) = {ch6_demo_eval_hang, ch6_demo_save_timeout, ch6_demo_uneven,
                                                         ch6_demo_slower, ch6_demo_world_size};
    int bad = 0;
    for (int i = 0; i < 5; i++)
        if (strcmp(name, "all") == 0 || strcmp(name, ch6_demo_names[i]) == 0)
            bad += fns[i](base);
    if (bad)
        printf("==== %d part(s) of the demo did NOT go as the story says (see UNEXPECTED above)\n", bad);
    else
        printf("==== every broken run failed the way it should, and every fix worked: exit 0\n");
    fflush(stdout);
    return bad ? 1 : 0;
}
