/* demos: chapter 5's failure stories. Each reproduces, in the simulator, a
 * way real data-parallel jobs die or hang, on a small training loop (two
 * epochs of three steps, one gradient all-reduce per step), and shows the
 * diagnosis our communicator gives where NCCL would hang or PyTorch's
 * watchdog would name only the local sequence number.
 *
 * Run alone (--demo=NAME) a demo ends the way the job would: non-zero, with
 * the diagnosis on stderr, within its timeout (1 s unless --timeout says
 * otherwise). Run as part of the lesson (no arguments), an expected failure
 * is the lesson: the program's status reflects only surprises (a demo that
 * did not fail, or failed for another reason).
 */
#include "chapter5.h"

#include "base/clock.h"
#include "base/error.h"
#include "sim/faults.h"
#include "sim/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRAIN_EPOCHS 2
#define TRAIN_STEPS 3          /* steps (all-reduces) per epoch */
#define TRAIN_GRADIENT 1024    /* floats per gradient bucket */

struct train_job {
    struct ch5_job base;       /* first: see chapter5.h */
    int mismatch_rank;         /* this rank all-reduces a different count ... */
    uint64_t mismatch_seq;     /* ... at this collective (0: never) */
};

static int train_rank(struct launch_rank *r)
{
    struct train_job *j = r->shared;
    comm_t *c;
    int rc = launch_comm_open(r, &j->base.comm, &c);
    if (rc < 0)
        return rc;
    float grad[TRAIN_GRADIENT];
    for (int step = 0; rc == 0 && step < TRAIN_EPOCHS * TRAIN_STEPS; step++) {
        for (int i = 0; i < TRAIN_GRADIENT; i++)
            grad[i] = (float)((i + step + comm_rank(c)) % 7);
        size_t count = TRAIN_GRADIENT;
        /* a rank whose model was built with another layer size: its bucket is smaller */
        if (comm_rank(c) == j->mismatch_rank && comm_next_seq(c) == j->mismatch_seq)
            count = TRAIN_GRADIENT - 24;
        rc = comm_allreduce(c, grad, grad, count, COMM_FLOAT32, COMM_AVG);
    }
    comm_close(c);
    return rc;
}

struct demo {
    const char *name;
    const char *title;
    const char *story;
    const char *faults;       /* --fault= spec; the timeout ones scale with --timeout */
    enum comm_check check;
    int mismatch_rank;
    const char *expect;       /* the diagnosis must contain this */
    const char *lesson;
};

static const struct demo demos[] = {
    {"timeout", "a straggler: the classic \"NCCL timeout\"",
     "rank 1 stalls before step 1 of epoch 2 (a slow filesystem, a long evaluation) for three\n"
     "  timeouts; the other ranks wait in the all-reduce until the watchdog fires.",
     "delay:1@4:%llu", COMM_CHECK_NONE, -1, "timed out",
     "the watchdog names the late rank and what it was doing; PyTorch's would report only\n"
     "  \"WorkNCCL(SeqNum=4, OpType=ALLREDUCE) ran for ... milliseconds before timing out\" on each rank."},
    {"crash", "a rank dies (OOM killer, segfault)",
     "rank 2 exits just before collective #3; the others enter the all-reduce and wait for it.",
     "kill:2@3", COMM_CHECK_NONE, -1, "killed by --fault=kill:2@3",
     "a dead rank looks like a hang to the others; the report says which rank is gone and when."},
    {"uneven", "uneven batches: the classic \"training hangs at epoch 2\"",
     "rank 3 has one batch fewer (no drop_last, a dataset that does not split evenly), so it\n"
     "  never issues collective #4; every later all-reduce pairs with the wrong step, and at the\n"
     "  end rank 3 is finished while the others wait for a step it will never run.",
     "skip:3@4", COMM_CHECK_NONE, -1, "exited (closed its communicator)",
     "give every rank the same number of batches (DistributedSampler pads; drop_last drops),\n"
     "  or use DDP's join() context manager; the report shows which rank left early."},
    {"mismatch", "mismatched collectives",
     "rank 2 built its model with another layer size: at collective #2 its gradient bucket has\n"
     "  1000 floats where the others have 1024. NCCL would read past its buffer or hang.",
     NULL, COMM_CHECK_NONE, 2, "fingerprint mismatch",
     "the fingerprint check (always on in the simulator; TORCH_DISTRIBUTED_DEBUG=DETAIL in\n"
     "  PyTorch) stops at the first differing collective and names both ranks and the fields."},
    {"flip", "silent divergence",
     "after collective #2 one bit flips in rank 1's averaged gradient (a bad DIMM, a racy\n"
     "  kernel): nothing hangs, but the replicas are no longer identical.",
     "flip:1@2", COMM_CHECK_RESULTS, -1, "rank 1's result differs from the other 3 ranks', which agree",
     "only a cross-rank comparison can see it: --check compares result checksums after every\n"
     "  collective and names the rank the majority disagrees with (without --check this run\n"
     "  \"succeeds\")."},
};

/* The diagnosis, every line indented under the demo. */
static void demo_print_indented(double took, const char *msg)
{
    printf("  diagnosis, after %.1f s (measured):\n    ", took);
    for (const char *p = msg; *p; p++)
        fputs(*p == '\n' ? "\n    " : (char[]){*p, 0}, stdout);
    putchar('\n');
}

static int demo_run(const struct ch5_opts *opt, const struct demo *d, int lesson)
{
    double timeout = opt->timeout_s > 0 ? opt->timeout_s : 1.0;
    char faults[64] = "";
    if (d->faults)
        snprintf(faults, sizeof faults, d->faults, (unsigned long long)(3 * timeout * 1000)); /* delay: three timeouts */
    printf("==== demo %s: %s\n  %s\n", d->name, d->title, d->story);
    if (d->faults)
        printf("  (build/chapter-5 --demo=%s: the same as --fault=%s%s --timeout=%g)\n", d->name, faults,
               d->check ? " --check" : "", timeout);
    fflush(stdout);

    struct train_job j = {.base.opt = opt, .mismatch_rank = d->mismatch_rank,
                          .mismatch_seq = d->mismatch_rank >= 0 ? 2 : 0};
    comm_config_default(&j.base.comm);
    j.base.comm.algo = COMM_ALGO_RING;
    j.base.comm.check = d->check;
    j.base.comm.timeout_s = timeout;
    /* the simulator, 4 ranks: it injects the faults, and the stories name ranks 1 to 3 */
    struct launch_config run = {.backend = "sim", .world = 4, .faults = d->faults ? faults : NULL, .shared = &j};
    double t0 = clock_now_s();
    int rc = launch_run(&run, train_rank);
    double took = clock_now_s() - t0;
    int expected = rc < 0 && strstr(err_msg(), d->expect) != NULL;
    if (rc == 0)
        printf("  UNEXPECTED: the run succeeded\n");
    else if (lesson)
        demo_print_indented(took, err_msg());
    else
        fprintf(stderr, "chapter-5: %s\n", err_msg());
    if (rc < 0 && !expected)
        printf("  UNEXPECTED: the diagnosis does not mention \"%s\"\n", d->expect);
    printf("  lesson: %s\n\n", d->lesson);
    fflush(stdout);
    return expected ? 0 : 1;
}

void ch5_demo_names(const char **names, int max)
{
    int n = 0;
    for (size_t i = 0; i < sizeof demos / sizeof demos[0] && n + 2 < max; i++)
        names[n++] = demos[i].name;
    names[n++] = "all";
    names[n] = NULL;
}

int ch5_demos(const struct ch5_opts *opt, const char *name, int lesson)
{
    int bad = 0, found = 0;
    for (size_t i = 0; i < sizeof demos / sizeof demos[0]; i++) {
        if (strcmp(name, "all") != 0 && strcmp(name, demos[i].name) != 0)
            continue;
        found = 1;
        bad += demo_run(opt, &demos[i], lesson);
    }
    if (!found)
        return err_set(ERR_ARG, "--demo: unknown demo '%s' (timeout, crash, uneven, mismatch, flip or all)", name);
    if (lesson && bad)
        printf("==== %d fault demo(s) did NOT end as expected (see UNEXPECTED above)\n", bad);
    else if (lesson)
        printf("==== every fault demo failed the way it should: these failures are the lesson (exit 0)\n");
    return bad;
}

int ch5_fault_run(const struct ch5_opts *opt)
{
    struct train_job j = {.base.opt = opt, .mismatch_rank = -1};
    comm_config_default(&j.base.comm);
    j.base.comm.algo = opt->nalgos ? opt->algos[0] : COMM_ALGO_RING;
    j.base.comm.check = opt->check ? COMM_CHECK_RESULTS : COMM_CHECK_NONE;
    j.base.comm.timeout_s = opt->timeout_s;
    printf("training loop: %d ranks, %d epochs x %d steps, one all-reduce of %d floats per step "
           "(collective #k = epoch (k-1)/%d+1, step (k-1)%%%d+1); --fault=%s, timeout %g s\n",
           opt->world, TRAIN_EPOCHS, TRAIN_STEPS, TRAIN_GRADIENT, TRAIN_STEPS, TRAIN_STEPS, opt->fault,
           opt->timeout_s > 0 ? opt->timeout_s : COMM_DEFAULT_TIMEOUT_S);
    struct fault *faults; /* a fault past the loop's last collective would pass unnoticed: say so */
    int nfaults;
    if (faults_parse(opt->fault, opt->world, &faults, &nfaults) == 0) {
        for (int i = 0; i < nfaults; i++) {
            char what[48];
            if (faults[i].seq > TRAIN_EPOCHS * TRAIN_STEPS)
                printf("note: %s never fires: the loop runs collectives #1 .. #%d\n",
                       fault_describe(&faults[i], what, sizeof what), TRAIN_EPOCHS * TRAIN_STEPS);
        }
        free(faults);
    }
    fflush(stdout);
    struct launch_config run = {.backend = opt->backend, .world = opt->world, .faults = opt->fault, .shared = &j,
                                .node_size = opt->node_size};
    int rc = launch_run(&run, train_rank);
    if (rc == 0)
        printf("the job finished: these faults did not stop it%s\n",
               opt->check ? "" : " (a flip is caught only with --check)");
    return rc;
}
