/* demos: chapter 6's failure stories, each a way real DDP jobs go wrong, run
 * in the simulator where the diagnosis names the rank and the collective,
 * then fixed, each fix shown to work (--demo=NAME, or all):
 *
 *   eval-hang     "hangs at the start of epoch 2": BatchNorm, broadcast_buffers,
 *                 and rank 0 alone evaluating through the DDP wrapper
 *   save-timeout  "NCCL timeout while saving": rank 0 writes a checkpoint for
 *                 longer than the collective timeout
 *   uneven        a custom sampler gives one rank a batch fewer
 *   slower        four ranks far from four times one: tiny buckets, no overlap
 *                 (modelled on PCIe-connected GPUs)
 *
 * A demo exits 0 when the broken run failed the way the story says and every
 * fix ran to the end; 1 otherwise (a "fix" that failed, a failure of another
 * kind). The failures are the lesson.
 */
#include "chapter6.h"

#include "base/error.h"
#include "transfer/hw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const ch6_demo_names[] = {"eval-hang", "save-timeout", "uneven", "slower", "all", NULL};

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

/* ---- slower than one rank --------------------------------------------------------------------- */

static int ch6_demo_slower(const struct ch6_run *base)
{
    printf("==== demo slower: four ranks far from four times one\n"
           "  The same per-rank work, batches of 8, on 1 rank without DDP, then on 4: first with the all-reduces\n"
           "  started only after backward and buckets so small that almost every parameter has its own (5\n"
           "  all-reduces a step, each paying its latency), then with overlap and buckets of 64 KiB and 256 KiB;\n"
           "  last, both sides at batches of 64. The replica check is off: a real job does not pay for it. Every\n"
           "  time is modelled (the same on any machine) on %s GPUs, which talk over PCIe through the host: an\n"
           "  all-reduce's every ring step pays a PCIe hop's latency.\n", CH6_SLOWER_HW);
    fflush(stdout);
    static const struct {
        const char *what, *gantt;
        int world, overlap, batch, baseline; /* baseline: the row it is compared with */
        double first_kb, cap_mb;
    } rows[] = {
        {"1 rank, no DDP, batch 8", NULL, 1, 1, 8, -1, 1024, 25},
        {"4 ranks, tiny buckets, no overlap, batch 8", "slower-no-overlap", 4, 0, 8, 0, 0.1, 0.0001},
        {"4 ranks, 64/256 KiB buckets, overlap, batch 8", "slower-overlap", 4, 1, 8, 0, 64, 0.25},
        {"1 rank, no DDP, batch 64", NULL, 1, 1, 64, -1, 1024, 25},
        {"4 ranks, 64/256 KiB buckets, overlap, batch 64", NULL, 4, 1, 64, 3, 64, 0.25},
    };
    enum { ROWS = sizeof rows / sizeof rows[0] };
    const struct hw_profile *hw;
    if (hw_profile_find(CH6_SLOWER_HW, &hw) < 0) {
        printf("  UNEXPECTED: %s\n", err_msg());
        return 1;
    }
    double rate[ROWS] = {0};
    int bad = 0;
    for (int i = 0; i < ROWS; i++) {
        struct ch6_run run;
        ch6_demo_run(base, &run, 16384);
        run.timeout_s = 0; /* the communicator's default: this one is about speed, not hangs */
        struct train_config *c = &run.train;
        c->batch = (uint32_t)rows[i].batch;
        c->epochs = 1;
        c->max_steps = 200;
        c->ddp = rows[i].world > 1; /* one rank: one GPU without DDP */
        c->check = 0;
        c->eval = TRAIN_EVAL_NONE;
        c->overlap = rows[i].overlap;
        c->reducer.first_bucket_bytes = (size_t)(rows[i].first_kb * 1024);
        c->reducer.bucket_cap_bytes = (size_t)(rows[i].cap_mb * 1024 * 1024);
        run.world = rows[i].world;
        run.hw = hw; /* the GPUs, their host link and the links between them */
        hw_host_link(hw, &c->link);
        c->gpu_flops = hw->fp32_flops;
        c->gpu_memory_bps = hw->memory_bps;
        char what[96];
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
        char st[32], f[32], bw[32], m[32], vs[64] = "";
        rate[i] = out.result.samples_per_s;
        if (rows[i].baseline >= 0 && rate[rows[i].baseline] > 0)
            snprintf(vs, sizeof vs, " (%.2fx 1 rank's)", rate[i] / rate[rows[i].baseline]);
        printf("  %-48s %7.0f samples/s (modelled)%s\n    a step %s: forward %s, backward %s, exposed communication %s\n",
               rows[i].what, rate[i], vs, ch6_ms(p->step, st, sizeof st), ch6_ms(p->forward, f, sizeof f),
               ch6_ms(p->backward, bw, sizeof bw), ch6_ms(p->comm, m, sizeof m));
        if (rows[i].gantt && base->out_dir)
            printf("    its timeline: %s/%s.png\n", base->out_dir, rows[i].gantt);
        timeline_all_free(out.result.timeline);
    }
    if (!bad)
        printf("  lesson: communication nothing hides is paid on every step, and every bucket pays its latency:\n"
               "  with tiny buckets and no overlap the 4 ranks' step is nearly 3 times one rank's. The timelines\n"
               "  show the no-overlap run's all-reduces queued after backward, one per parameter, and the\n"
               "  overlapped run's first bucket under backward; fewer, bigger buckets pay the latency fewer\n"
               "  times. In this MLP fc1.weight holds 85%% of the gradient and is ready last, so overlap hides\n"
               "  little. A bigger batch changes nothing here: on a GPU this MLP's step is its kernels' launch\n"
               "  latency, not its arithmetic, up to batches in the thousands.\n\n");
    return bad;
}

int ch6_demo(const struct ch6_run *base, const char *name)
{
    static int (*const fns[])(const struct ch6_run *) = {ch6_demo_eval_hang, ch6_demo_save_timeout, ch6_demo_uneven,
                                                         ch6_demo_slower};
    int bad = 0;
    for (int i = 0; i < 4; i++)
        if (strcmp(name, "all") == 0 || strcmp(name, ch6_demo_names[i]) == 0)
            bad += fns[i](base);
    if (bad)
        printf("==== %d part(s) of the demo did NOT go as the story says (see UNEXPECTED above)\n", bad);
    else
        printf("==== every broken run failed the way it should, and every fix worked: exit 0\n");
    fflush(stdout);
    return bad ? 1 : 0;
}
