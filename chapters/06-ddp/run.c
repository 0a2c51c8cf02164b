/* run: one training run of chapter 6 on every rank, and what it prints and
 * writes: the header, the per-epoch table with the time breakdown, the
 * summary, the Chrome trace and the Gantt chart. The loop itself is
 * lib/ddp/train.c; the ranks are started by sim/launch.h (threads in the
 * simulator, this process under mpirun).
 */
#include "chapter6.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/plot.h"
#include "base/units.h"
#include "base/vclock.h"
#include "dataset/dataset_default.h"
#include "sim/faults.h"
#include "sim/launch.h"
#include "transfer/device.h"
#include "transfer/hw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CH6_TEST_SET "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
#define CH6_SYNTHETIC_TEST_RECORDS 10000 /* Fashion-MNIST's test set's size */

const char *ch6_ms(double seconds, char *buf, size_t len)
{
    if (seconds >= 1e-3)
        snprintf(buf, len, "%.2f ms", seconds * 1e3);
    else
        snprintf(buf, len, "%.0f us", seconds * 1e6);
    return buf;
}

/* The test set beside an IDX training file: "train-images..." -> "t10k-images...". */
static int ch6_test_beside(const char *train, char *out, size_t len)
{
    const char *base = strrchr(train, '/');
    base = base ? base + 1 : train;
    if (strncmp(base, "train-", 6) != 0 || snprintf(out, len, "%.*st10k-%s", (int)(base - train), train, base + 6) >=
                                               (int)len)
        return 0;
    return access(out, F_OK) == 0; /* opened as a dataset, which refuses a FIFO: no open here that could wait */
}

int ch6_open_data(const char *data, const char *test, dataset_t **train, dataset_t **test_set, char *note,
                  size_t note_len)
{
    *train = *test_set = NULL;
    char why[768] = "";
    int rc = data ? dataset_open(data, NULL, train) : dataset_open_default(NULL, train, why, sizeof why);
    if (rc < 0)
        return data ? err_wrap(rc, "--data") : rc;
    int synthetic = dataset_info(*train)->kind == DATASET_SYNTHETIC;
    char beside[4096];
    const char *test_path = test;
    if (!test) {
        if (synthetic)
            test_path = "synthetic";
        else if (!data && dataset_default_path())
            test_path = CH6_TEST_SET;
        else
            test_path = ch6_test_beside(data, beside, sizeof beside) ? beside : "none";
    }
    if (strcmp(test_path, "none") != 0) {
        struct dataset_options o;
        dataset_options_default(&o);
        o.synthetic_records = CH6_SYNTHETIC_TEST_RECORDS;
        o.seed = 1; /* not the training set's records */
        if ((rc = dataset_open(test_path, &o, test_set)) < 0) {
            dataset_close(*train);
            *train = NULL;
            return err_wrap(rc, test ? "--test-data" : "the test set");
        }
    }
    snprintf(note, note_len, "%s (%llu records)%s%s; test set: %s%s", dataset_name(*train),
             (unsigned long long)dataset_info(*train)->length, why[0] ? ": " : "", why,
             *test_set ? dataset_name(*test_set) : "none", synthetic ? " (random labels: accuracy means nothing)" : "");
    return 0;
}

/* ---- rank 0's reports --------------------------------------------------------------------- */

struct ch6_job {
    const struct ch6_run *run;
    struct ch6_outcome *out;
    int world;              /* the job's ranks, as rank 0's communicator counts them (under a launcher, not
                             * run->world: mpirun -np or torchrun set it) */
    struct plot_csv epochs; /* the per-epoch CSV, in rank 0's process; epochs.f NULL when none */
};

/* The files of --out and --trace, before the run trains, so that a path they
 * cannot be written at stops it then (in rank 0's process, which writes
 * them): the Gantt chart's paths are checked, the per-epoch CSV is opened (a
 * run that fails leaves none: plot_csv_close), the trace's place is probed.
 * 0, or the error. */
static int ch6_outputs_open(struct ch6_job *j)
{
    const struct ch6_run *run = j->run;
    j->epochs.f = NULL;
    if (!launch_leader())
        return 0;
    char csv[PLOT_PATH_MAX];
    int rc = run->out_dir && run->gantt_name ? plot_check(run->out_dir, run->gantt_name, "--out") : 0;
    if (rc == 0 && run->out_dir && run->epochs_name)
        rc = plot_paths(run->out_dir, run->epochs_name, csv, NULL) < 0 ? err_wrap(ERR_ARG, "--out")
                                                                       : plot_csv_open(&j->epochs, csv, "--out");
    if (rc == 0 && j->epochs.f)
        fprintf(j->epochs.f, "epoch,step,loss,train_accuracy,test_accuracy,seconds,samples_per_s,step_ms,data_ms,"
                             "copy_ms,forward_ms,backward_ms,comm_ms,optim_ms,check_ms\n");
    /* the trace is written after training: a missing directory or no permission is found now, once --out
     * (which may hold it) is made; train_rank probes --save and --checkpoint so */
    if (rc == 0 && run->trace_path && (rc = fsutil_probe_output(run->trace_path)) < 0)
        rc = err_wrap(rc, "--trace=%s: cannot write it", run->trace_path);
    return rc;
}

/* The GPU system whose links time the collectives on the modelled clock
 * (--hw, or the simulated device's default profile), when the ranks compute
 * on the simulated device: the simulator's communicator, or MPI between
 * processes on simulated devices. NULL on a GPU: its times are the wall
 * clock's. */
static const struct hw_profile *ch6_modelled_hw(const struct ch6_run *run)
{
    const char *device = run->train.device;
    int sim = strcmp(run->backend, "sim") == 0;
    if (device ? strcmp(device, "sim") != 0 : !sim)
        return NULL;
    const struct hw_profile *hw = run->hw;
    return hw || hw_profile_find(DEVICE_GPU_DEFAULT, &hw) == 0 ? hw : NULL;
}

static void ch6_started(void *user, const struct train_config *c, const struct train_epoch *resumed, const char *plan,
                        const char *init)
{
    struct ch6_job *j = user;
    const struct ch6_run *run = j->run;
    if (run->quiet)
        return;
    char spec[128], how[128];
    const struct optim_config *o = &c->optim;
    const char *launcher = launch_launcher_name();
    if (strcmp(run->backend, "sim") == 0)
        snprintf(how, sizeof how, "the simulator: threads of this process, --world=%d", j->world);
    else if (launcher)
        snprintf(how, sizeof how, "%s: one process per rank, started by %s", run->backend, launcher);
    else
        snprintf(how, sizeof how, "%s: this process alone, started without a launcher", run->backend);
    printf("chapter 6: data-parallel training, %d rank%s (%s)\n", j->world, j->world == 1 ? "" : "s", how);
    printf("  data: %s\n", run->data_note);
    printf("  model %s, %s lr %g", model_spec_describe(&c->spec, spec, sizeof spec), optim_kind_name(o->kind), o->lr);
    if (o->kind == OPTIM_SGD)
        printf(" momentum %g", o->momentum);
    printf(" weight decay %g, %s schedule; %llu epoch%s\n", o->weight_decay, optim_schedule_name(o->schedule),
           (unsigned long long)c->epochs, c->epochs == 1 ? "" : "s");
    printf("  batch %u per rank (%llu global)%s, accumulate %u, %u loader worker%s per rank, augmentation %s, seed %llu\n",
           c->batch, (unsigned long long)c->batch * (unsigned long long)j->world, c->drop_last ? ", drop_last" : "",
           c->accumulate, c->workers, c->workers == 1 ? "" : "s", c->augment ? "random horizontal flip" : "none",
           (unsigned long long)c->seed);
    if (c->device && strcmp(c->device, "sim") == 0) /* the link every batch's copy is timed by (--hw) */
        printf("  simulated device on %s: %.2f GB/s, %.1f us per copy (modelled)\n", c->link.title,
               c->link.bandwidth_bps / 1e9, c->link.latency_s * 1e6);
    const struct hw_profile *hw = ch6_modelled_hw(run);
    if (hw) {
        struct link_profile peer;
        hw_peer_link(hw, &peer);
        printf("  %s communicator on %s's %s: %.1f GB/s, %.1f us a hop (modelled, alpha-beta)\n",
               strcmp(run->backend, "sim") == 0 ? "simulated" : "the mpi", hw->name, peer.title,
               peer.bandwidth_bps / 1e9, peer.latency_s * 1e6);
        if (run->node_size && run->node_size < j->world) {
            struct link_profile node;
            hw_node_link(hw, &node);
            printf("  %d nodes of %d GPUs, joined by %s: %.1f GB/s a node, %.1f us a hop; all-reduce: %s\n",
                   j->world / run->node_size, run->node_size, node.title, node.bandwidth_bps / 1e9,
                   node.latency_s * 1e6, comm_algo_name(run->algo == COMM_ALGO_DEFAULT ? COMM_ALGO_RING : run->algo));
        }
    }
    if (!vclock_is_wall() && strcmp(run->backend, "sim") == 0)
        printf("  every time below is modelled (DESIGN.md, \"Virtual time\"), the same on any machine; only the "
               "run's wall seconds are measured\n");
    else if (!vclock_is_wall()) /* the simulated device under MPI: its collectives are charged as the simulator's */
        printf("  every time below is modelled, the %s collectives' too (what the simulator's communicator charges "
               "them, on one node); only the run's wall seconds are measured\n", run->backend);
    if (c->ddp && c->same_bits)
        printf("  DDP, --same-bits: every step's gradients the same bits at any world size; replicas %s\n",
               c->check ? "compared bit for bit every step" : "not compared (--check)");
    else if (c->ddp)
        printf("  DDP: buckets of first %llu KiB then %llu KiB, %s, broadcast_buffers %s, compression %s, "
               "replicas %s\n",
               (unsigned long long)(c->reducer.first_bucket_bytes >> 10),
               (unsigned long long)(c->reducer.bucket_cap_bytes >> 10),
               c->overlap ? "all-reduce overlapping backward" : "all-reduce after backward (no overlap)",
               c->reducer.broadcast_buffers ? "on" : "off", reducer_compress_name(c->reducer.compress),
               c->check ? "compared bit for bit every step" : "not compared (--check)");
    printf("  %s\n", plan);
    if (init)
        printf("  initial parameters from %s\n", init);
    if (resumed)
        printf("  resumed: epoch %llu, batch %llu, after step %llu\n", (unsigned long long)resumed->epoch + 1,
               (unsigned long long)resumed->first_batch, (unsigned long long)resumed->step_end);
    printf("\n%5s %8s %7s %7s %8s %9s | %9s %8s %8s %8s %8s %8s %8s %8s\n", "epoch", "loss", "train", "test",
           "time", "samples/s", "step", "data", "copy", "forward", "backward", "comm", "optim", "check");
    fflush(stdout);
}

static void ch6_epoch(void *user, const struct train_epoch *e)
{
    struct ch6_job *j = user;
    const struct train_times *p = &e->per_step;
    if (j->run->on_epoch)
        j->run->on_epoch(j->run->on_epoch_user, e);
    if (j->epochs.f)
        fprintf(j->epochs.f, "%llu,%llu,%.6f,%.6f,%.6f,%.3f,%.1f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n",
                (unsigned long long)e->epoch + 1, (unsigned long long)e->step_end, e->loss, e->train_accuracy,
                e->evaluated ? e->test_accuracy : -1, e->seconds, e->samples_per_s, p->step * 1e3, p->data * 1e3,
                p->copy * 1e3, p->forward * 1e3, p->backward * 1e3, p->comm * 1e3, p->optim * 1e3, p->check * 1e3);
    if (j->run->quiet)
        return;
    char test[16] = "-";
    if (e->evaluated)
        snprintf(test, sizeof test, "%.2f%%", 100 * e->test_accuracy);
    printf("%5llu %8.4f %6.2f%% %7s %6.3f s %9.0f | %6.2f ms %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f%s\n",
           (unsigned long long)e->epoch + 1, e->loss, 100 * e->train_accuracy, test, e->seconds, e->samples_per_s,
           p->step * 1e3, p->data * 1e3, p->copy * 1e3, p->forward * 1e3, p->backward * 1e3, p->comm * 1e3,
           p->optim * 1e3, p->check * 1e3, e->stopped ? "  (stopped: --steps)" : "");
    if (e->evaluated && e->stopped)
        printf("      test accuracy after step %llu: %.4f (%llu of %llu)\n", (unsigned long long)e->step_end,
               e->test_accuracy, (unsigned long long)e->test_correct, (unsigned long long)e->test_count);
    fflush(stdout);
}

static void ch6_saved(void *user, const char *path, uint64_t step, uint64_t epoch, uint64_t batch)
{
    struct ch6_job *j = user;
    if (!j->run->quiet)
        printf("      checkpoint: %s after step %llu (epoch %llu, %llu batches consumed)\n", path,
               (unsigned long long)step, (unsigned long long)epoch + 1, (unsigned long long)batch);
}

static int ch6_rank(struct launch_rank *lr)
{
    struct ch6_job *j = lr->shared;
    struct comm_config base;
    comm_config_default(&base);
    base.timeout_s = j->run->timeout_s;
    base.algo = j->run->algo;
    if (strcmp(j->run->backend, "sim") != 0) /* processes on simulated devices: MPI on their modelled clock */
        base.modelled_hw = ch6_modelled_hw(j->run);
    if (j->run->train.check && strcmp(j->run->backend, "sim") != 0)
        base.check = COMM_CHECK_FINGERPRINT; /* the simulator's is always on */
    comm_t *c;
    int rc = launch_comm_open(lr, &base, &c);
    if (rc < 0)
        return rc;
    if (comm_rank(c) == 0) /* the only rank that reports */
        j->world = comm_world(c);
    struct train_hooks hooks = {.user = j, .started = ch6_started, .epoch = ch6_epoch, .saved = ch6_saved};
    struct train_result res;
    rc = train_rank(&j->run->train, c, &hooks, &res);
    if (comm_rank(c) == 0)
        j->out->result = res;
    else
        timeline_all_free(res.timeline);
    comm_close(c);
    return rc;
}

/* ---- after the run ------------------------------------------------------------------------- */

static void ch6_summary(const struct ch6_run *run, const struct ch6_outcome *o)
{
    const struct train_result *r = &o->result;
    const struct train_times *p = &r->per_step;
    char a[32], b[32], cc[32], d[32], e[32], f[32], g[32], h[32], rest[32];
    printf("\n%llu steps, %llu samples in %.3f s of training%s (%.0f samples/s); %.1f s in all on this host "
           "(measured)\n", (unsigned long long)r->steps, (unsigned long long)r->samples, r->seconds,
           vclock_is_wall() ? "" : ", modelled", r->samples_per_s, o->wall_s);
    double known = p->data + p->copy + p->forward + p->backward + p->comm + p->optim + p->check;
    printf("where a step's %s went (mean over ranks and steps): data wait %s, copy %s, forward %s, backward %s,\n"
           "  exposed communication %s, optimizer %s, replica check %s, the rest %s\n",
           ch6_ms(p->step, a, sizeof a), ch6_ms(p->data, b, sizeof b), ch6_ms(p->copy, cc, sizeof cc),
           ch6_ms(p->forward, d, sizeof d), ch6_ms(p->backward, e, sizeof e), ch6_ms(p->comm, f, sizeof f),
           ch6_ms(p->optim, g, sizeof g), ch6_ms(p->check, h, sizeof h),
           ch6_ms(p->step > known ? p->step - known : 0, rest, sizeof rest));
    if (run->train.ddp && !run->train.same_bits) {
        printf("gradients: %d bucket%s (%s), %llu all-reduces of %.1f MB in all", r->buckets,
               r->buckets == 1 ? "" : "s", r->layout, (unsigned long long)r->reducer.buckets_launched,
               (double)r->reducer.bytes_reduced / 1e6);
        if (r->reducer.bytes_saved)
            printf("; %s compression kept %.1f MB off the wire", reducer_compress_name(run->train.reducer.compress),
                   (double)r->reducer.bytes_saved / 1e6);
        printf("\n");
    }
    if (run->train.check)
        printf("replicas: every rank's parameters%s were the same bits at every step\n",
               run->train.reducer.broadcast_buffers && run->train.spec.batchnorm ? " and buffers" : "");
    const uint64_t *w = r->watched_copies;
    if (w[DEVICE_WRITE_CHECK_TRAP] + w[DEVICE_WRITE_CHECK_BYTES])
        printf("loader slots: no host write into one while its copy was in flight; rank 0's device watched the "
               "sources of %llu copies, %s\n", (unsigned long long)(w[DEVICE_WRITE_CHECK_TRAP] + w[DEVICE_WRITE_CHECK_BYTES]),
               w[DEVICE_WRITE_CHECK_TRAP] ? "by a write trap on their pages (--write-check=trap)"
                                          : "by their bytes (--write-check=bytes)");
    if (r->last.evaluated)
        printf("test accuracy: %.4f (%llu of %llu)\n", r->last.test_accuracy, (unsigned long long)r->last.test_correct,
               (unsigned long long)r->last.test_count);
}

/* The Gantt chart's title: which run (run->gantt_what, or its ranks, batch
 * and overlap), which steps, which buckets; several charts drawn by one
 * script say apart what each shows. */
static void ch6_gantt_title(const struct ch6_run *run, uint64_t first, uint64_t last, char *buf, size_t len)
{
    const struct train_config *c = &run->train;
    char what[160], firstb[32], capb[32];
    if (run->gantt_what)
        snprintf(what, sizeof what, "%s", run->gantt_what);
    else
        snprintf(what, sizeof what, "%d rank%s, batch %u each, %s", run->world, run->world == 1 ? "" : "s", c->batch,
                 c->overlap ? "all-reduce overlapping backward" : "all-reduce after backward");
    if (!c->ddp) {
        snprintf(buf, len, "%s: steps %llu to %llu of every rank (no DDP: no buckets)", what, (unsigned long long)first,
                 (unsigned long long)last);
        return;
    }
    snprintf(buf, len, "%s: steps %llu to %llu of every rank; buckets: the first up to %s, then up to %s", what,
             (unsigned long long)first, (unsigned long long)last,
             units_format_bytes(c->reducer.first_bucket_bytes, firstb, sizeof firstb),
             units_format_bytes(c->reducer.bucket_cap_bytes, capb, sizeof capb));
}

/* The steps the timeline holds: from the run's first step, as many as it took up to --trace-steps. */
static uint64_t ch6_traced_steps(const struct ch6_run *run, const struct train_result *r)
{
    uint64_t taken = r->steps - r->first_step;
    return taken < run->train.trace_steps ? taken : run->train.trace_steps;
}

/* What overlap bought, bucket by bucket, over the traced steps after the
 * first (which rebuilds the buckets): the numbers behind the timelines. */
static void ch6_print_overlap(const struct ch6_run *run, const struct train_result *r)
{
    uint64_t traced = ch6_traced_steps(run, r);
    if (run->quiet || !run->train.ddp || run->train.same_bits || traced < 2)
        return;
    uint64_t first = r->first_step + 1, last = r->first_step + traced - 1;
    printf("overlap with backward, mean over steps %llu to %llu of every rank (the trace's, after the step that "
           "rebuilds the buckets):\n", (unsigned long long)first, (unsigned long long)last);
    for (int b = 0; b < r->buckets && b < TIMELINE_MAX_BUCKETS; b++) {
        struct timeline_overlap o;
        timeline_bucket_overlap(r->timeline, b, first, last, &o);
        char lead[32], hidden[32], length[32];
        if (o.pairs)
            printf("  bucket %d: its all-reduce (%s) was launched %s before backward ended; %s of it ran under "
                   "backward\n", b, ch6_ms(o.length_ns / 1e9, length, sizeof length),
                   ch6_ms(o.lead_ns / 1e9, lead, sizeof lead), ch6_ms(o.hidden_ns / 1e9, hidden, sizeof hidden));
    }
}

/* The trace and the Gantt chart, from rank 0's gathered timeline (on the
 * modelled clock, with the links each all-reduce kept busy). */
static int ch6_timeline_files(const struct ch6_run *run, const struct train_result *r)
{
    const struct timeline_all *all = r->timeline;
    if (!all)
        return 0;
    int rc = 0;
    if (r->trace_dropped) /* the trace is sized for every bar a step can leave: this is a bug, said */
        fprintf(stderr, "%s: the timeline dropped %llu bars that did not fit: the trace and chart lack them\n",
                CH6_PROG, (unsigned long long)r->trace_dropped);
    if (run->trace_path) {
        const char *notes[] = {"program", "build/chapter-6", "buckets", r->layout, NULL};
        if ((rc = timeline_write_chrome(all, run->trace_path, notes)) < 0)
            return err_wrap(rc, "--trace");
        if (!run->quiet)
            printf("trace: %s (open it in https://ui.perfetto.dev or chrome://tracing)\n", run->trace_path);
    }
    ch6_print_overlap(run, r);
    if (run->out_dir && run->gantt_name && r->steps > r->first_step) {
        char csv[PLOT_PATH_MAX], out[PLOT_PATH_MAX];
        if (plot_paths(run->out_dir, run->gantt_name, csv, out) < 0)
            return err_wrap(ERR_ARG, "--out");
        /* steps in the steady state when the trace holds them: the first ones rebuild the buckets,
         * fill the loader's ring and fault in every page */
        uint64_t traced = ch6_traced_steps(run, r);
        uint64_t first = r->first_step + (traced >= CH6_GANTT_STEPS + 10 ? 10 : traced >= CH6_GANTT_STEPS + 2 ? 2 : 0);
        uint64_t end = r->first_step + traced - 1;
        uint64_t last = first + CH6_GANTT_STEPS - 1 < end ? first + CH6_GANTT_STEPS - 1 : end;
        if ((rc = timeline_write_gantt_csv(all, csv, first, last)) < 0)
            return err_wrap(rc, "--out");
        char title[512];
        ch6_gantt_title(run, first, last, title, sizeof title);
        rc = plot_render_titled("chapters/06-ddp/plot.gp", csv, out, title, "--out");
        if (rc == ERR_UNSUPPORTED) { /* no gnuplot: the CSV is there */
            fprintf(stderr, "%s: %s\n", CH6_PROG, err_msg());
            rc = 0;
        } else if (rc == 0 && !run->quiet) {
            printf("Gantt chart of steps %llu to %llu: %s.png and .svg (data: %s)\n", (unsigned long long)first,
                   (unsigned long long)last, out, csv);
        }
    }
    return rc;
}

/* --fault=SPEC, split: chapter 6's flips (a parameter's bit right after
 * optimizer step K: train_flip) go to the training loop; kill, delay and skip
 * (at collective K, chapter 5's) stay with the simulator, in *rest. Chapter
 * 5's flip, a bit of collective K's result, would mostly land where nothing
 * reads it (see README.md). Free *flips and *rest. */
static int ch6_faults_split(const struct ch6_run *run, struct train_flip **flips, int *nflips, char **rest)
{
    *flips = NULL;
    *nflips = 0;
    *rest = NULL;
    if (!run->faults)
        return 0;
    struct fault *all;
    int count, rc = faults_parse(run->faults, run->world, &all, &count);
    if (rc < 0)
        return rc;
    if (!(*flips = calloc((size_t)count, sizeof **flips)))
        rc = err_set(ERR_NOMEM, "--fault: out of memory");
    for (int i = 0; rc == 0 && i < count; i++)
        if (all[i].kind == FAULT_FLIP)
            (*flips)[(*nflips)++] = (struct train_flip){.rank = all[i].rank, .step = all[i].seq};
    free(all);
    if (rc == 0)
        rc = faults_without(run->faults, run->world, FAULT_FLIP, rest);
    return rc;
}

int ch6_train(const struct ch6_run *run, struct ch6_outcome *out)
{
    memset(out, 0, sizeof *out);
    struct ch6_run with_faults = *run;
    struct train_flip *flips;
    char *rest;
    int rc = ch6_faults_split(run, &flips, &with_faults.train.nflips, &rest);
    with_faults.train.flips = flips;
    with_faults.faults = rest;
    struct ch6_job j = {.run = &with_faults, .out = out};
    struct launch_config lc = {.backend = run->backend, .world = run->world, .faults = rest, .shared = &j,
                              .hw = run->hw, .node_size = run->node_size};
    if (rc == 0)
        rc = ch6_outputs_open(&j);
    double t0 = clock_now_s();
    if (rc == 0)
        rc = launch_run(&lc, ch6_rank);
    out->wall_s = clock_now_s() - t0;
    if (j.epochs.f)
        rc = plot_csv_close(&j.epochs, rc);
    if (rc == 0 && launch_leader()) {
        if (!run->quiet)
            ch6_summary(run, out);
        rc = ch6_timeline_files(run, &out->result);
    }
    free(flips);
    free(rest);
    return rc;
}
