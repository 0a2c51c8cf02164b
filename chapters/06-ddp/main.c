/* chapter-6: full DDP. For the first time the whole data path runs as one:
 * dataset -> DistributedSampler -> loader workers -> pinned ring -> copy
 * stream -> forward/backward -> buckets all-reduced while backward runs ->
 * averaged -> optimizer step, on every rank, with checkpoints, exact resume
 * and a timeline of every rank's steps.
 *
 *   build/chapter-6                      train on 4 simulated ranks: the table, the time breakdown, a Gantt chart
 *   build/chapter-6 --world=2 --epochs=1 --trace=trace.json   any flags (--help)
 *   build/chapter-6 --demo=NAME|all      the failure stories, each failing as it should, then fixed
 *   build/chapter-6 --bench=accuracy|overhead|model   the benchmarks' figures (make bench)
 *   mpirun -np 4 build/chapter-6 --backend=mpi        one process per rank, MPI on the CPU
 *
 * Read first: README.md beside this file, then lib/ddp/train.h (the loop
 * this program runs); this program teaches and measures.
 */
#include "chapter6.h"

#include "backend_table.h"
#include "base/cli.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "ddp/checkpoint.h"
#include "sim/faults.h"
#include "sim/launch.h"
#include "transfer/hw.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The training recipe: what `make chapter-6` trains with unless told otherwise.
 * Found with PyTorch 1.13 on the same model and data, single process, the
 * W ranks' batches taken as one: Adam with torch's defaults (lr 0.001),
 * cosine over every step, global batch 128, no augmentation, 20 epochs ends
 * at 0.897 to 0.899 test accuracy on seeds 0, 1 and 2, and its curves at
 * 1, 2, 4 and 8 ranks stay within 0.32 points of each other at every epoch.
 * SGD (momentum 0.9, lr 0.05, the same schedule) ends as high, but its early
 * epochs swing by a point from one rounding of the gradient to another. The
 * global batch stays 128 at any world size in the benchmark (bench.c). */
#define CH6_EPOCHS 20
#define CH6_BATCH 32    /* per rank: 128 samples a step on the default 4 ranks */
#define CH6_TRACE_STEPS 16

void ch6_recipe(struct train_config *c)
{
    c->epochs = CH6_EPOCHS;
    c->batch = CH6_BATCH;
    optim_config_default(&c->optim, OPTIM_ADAM);
    c->optim.schedule = OPTIM_COSINE;
    c->augment = 0;
}

static void ch6_usage(FILE *f)
{
    fprintf(f,
            "usage: chapter-6 [options]\n"
            "       chapter-6 --demo=NAME | --bench=NAME\n"
            "\n"
            "Chapter 6, full DDP: the whole data path trains a %s MLP on every rank (dataset, DistributedSampler,\n"
            "loader workers, pinned ring, copy stream, forward and backward, gradient buckets all-reduced while\n"
            "backward runs, optimizer), printing per epoch the loss, the test accuracy, samples/s and where the\n"
            "step time went. With no flags: the recipe below on 4 simulated ranks, and a Gantt chart in --out.\n"
            "\n"
            "ranks:\n"
            "  --backend=sim|mpi|nccl  sim: ranks are threads (default); mpi: one process per rank under mpirun;\n"
            "                          nccl: one process per GPU under torchrun or mpirun (needs --device=cuda)\n"
            "  --device=sim|cuda       where the model computes: the simulated device (CBLAS and loops on the\n"
            "                          CPU, every step's streams checked), or this rank's GPU (cuBLAS and CUDA\n"
            "                          kernels; LOCAL_RANK or mpirun's local rank picks it). Default: cuda with\n"
            "                          --backend=nccl, sim with --backend=sim, else cuda when a GPU is found\n"
            "  --world=W               simulated ranks, 1 to 64 (default 4)\n"
            "  --hw=NAME               sim: the simulated device's link is that modelled GPU system's PCIe host\n"
            "                          link, its GPU times the kernels and its GPU-to-GPU links the collectives:\n"
            "                          " HW_NAMES " (default: the " LINK_DEFAULT " link, an a100);\n"
            "                          --hw=list prints the profiles and their sources\n"
            "  --topology=NODESxGPUS   sim: the ranks as NODES nodes of GPUS each (e.g. 2x8, at most 64 ranks);\n"
            "                          sets the world; the hops across nodes are priced from --hw's network\n"
            "  --algo=ring|tree|hier   sim: the all-reduce's algorithm (default ring); hier: reduce-scatter in\n"
            "                          each node, all-reduce across nodes, all-gather in the node\n"
            "  --timeout=SECONDS       a collective's watchdog, 0.01 to 1e6 (default 30)\n"
            "data:\n"
            "  --data=PATH             training images (IDX, or 'synthetic'; default Fashion-MNIST if installed)\n"
            "  --test-data=PATH        test images, or 'none' (default: the test set beside the training set)\n"
            "  --train-size=N          train on the first N records only\n"
            "  --batch=N               samples per rank and batch, 1 to 65536 (default %d)\n"
            "  --global-batch=G        samples per step over all ranks: the batch per rank is G / W (W must\n"
            "                          divide G; not with --batch)\n"
            "  --drop-last             drop each rank's last short batch (DataLoader's drop_last)\n"
            "  --no-shuffle            the sampler keeps the dataset's order (shuffle=False)\n"
            "  --seed=S                sampler, initialisation and augmentation (default 0)\n"
            "  --workers=K             loader worker threads per rank, 0 to 16 (default 1)\n"
            "  --augment=none|flip     random horizontal flip, p = 0.5 (default none)\n"
            "training:\n"
            "  --epochs=N              epochs, 1 to 100000 (default %d)\n"
            "  --steps=N               stop once the run has taken N optimizer steps (resumed ones count)\n"
            "  --hidden=LIST           hidden layer widths (default 256,128)\n"
            "  --batchnorm             a BatchNorm1d after each hidden layer\n"
            "  --optimizer=adam|sgd    (default adam: betas 0.9 and 0.999, eps 1e-8, PyTorch's)\n"
            "  --lr=X                  learning rate (default 0.001 for adam, 0.01 for sgd)\n"
            "  --momentum=X            SGD's momentum, 0 to 1 (default 0.9)\n"
            "  --weight-decay=X        (default 0)\n"
            "  --schedule=constant|cosine|step   the learning rate over the run (default cosine;\n"
            "                          step: times 0.1 after each third of the epochs)\n"
            "  --init=FILE             initial parameters: a safetensors model file (--save's, or a PyTorch\n"
            "                          state_dict: nn.Sequential's names too, F16/BF16/F64 converted)\n"
            "  --save=FILE             the final parameters, a safetensors file PyTorch loads\n"
            "data parallelism:\n"
            "  --bucket-cap-mb=MB      bucket size limit, 0.0001 to 1024 (default 25, PyTorch's)\n"
            "  --first-bucket-kb=KB    the first bucket's, 0.1 to 1048576 (default 1024, PyTorch's)\n"
            "  --no-overlap            start the all-reduces only after backward\n"
            "  --accumulate=K          micro-batches per optimizer step, 1 to 1024 (no_sync for all but the last)\n"
            "  --same-bits             the same parameters, bit for bit, at 1, 2, 4 or 8 ranks with the same\n"
            "                          --global-batch (8 must divide it and the training set's size):\n"
            "                          each step's 8 atoms computed alone, summed in one fixed tree, gathered\n"
            "                          from every rank instead of bucketed; resumes on another world size\n"
            "  --compress=none|fp16|bf16   all-reduce the gradients in 16 bits (PyTorch's compression hooks)\n"
            "  --broadcast-buffers=on|off  rank 0's BatchNorm statistics to all before each forward (default on)\n"
            "  --eval=all-ranks|rank0-wrapped|rank0-unwrapped|none   who evaluates after each epoch, and through\n"
            "                          what (default all-ranks: each its share, through the DDP wrapper)\n"
            "  --check                 compare every rank's parameters bit for bit every step (always on in sim)\n"
            "  --write-check=bytes|trap   sim: how the device catches a loader slot written while its copy is\n"
            "                          in flight: bytes (default) hashes the slot at the copy's issue and when\n"
            "                          the host learns it ended, and names the first changed 4 KiB; trap\n"
            "                          write-protects it (mprotect) and names the writing thread and byte, at\n"
            "                          two TLB shootdowns a copy (chapter 4's detector)\n"
            "  --drop-event=copy|bucket-ready|bucket-done   leave one event out of every step's schedule (the\n"
            "                          batch's copy before compute, a bucket's gradients before its all-reduce,\n"
            "                          the all-reduce before the optimizer): the simulated device's detector\n"
            "                          names the buffer, the streams and the batch (on a GPU: a rare wrong number)\n"
            "  --fault=SPEC            inject faults. flip:R@K: right after optimizer step K a bit flips in\n"
            "                          rank R's parameters (bit 22 of the output layer's bias, element K mod 10),\n"
            "                          and the replica check names the step, rank, tensor and element; sim only:\n"
            "                          kill:R@K, delay:R@K:MS and skip:R@K act at collective K, as in chapter 5\n"
            "checkpoints:\n"
            "  --checkpoint=DIR        rank 0 writes DIR/checkpoint.safetensors (atomic, durable) ...\n"
            "  --checkpoint-every=N    ... every N optimizer steps (and at the end)\n"
            "  --resume=DIR            continue exactly where that checkpoint left off\n"
            "output:\n"
            "  --trace=FILE            every rank's steps as a Chrome trace (Perfetto, chrome://tracing)\n"
            "  --trace-steps=N         the steps traced, from the first, 1 to 100000 (default %d)\n"
            "  --out=DIR               the Gantt chart and the epochs' CSV (default " CH6_OUT_DIR ")\n"
            "  --plot                  the default run (for make plots)\n"
            "stories and figures:\n"
            "  --demo=NAME             eval-hang, save-timeout, uneven, slower, world-size, or all\n"
            "  --bench=NAME            accuracy, overhead, scaling, host, same-bits or model: the benchmarks\n"
            "                          (make bench runs bench.sh; scaling writes scaling.csv and .png to --out);\n"
            "                          --batch sets the per-rank batch they start from\n"
            "  --help                  this text\n",
            "784-256-128-10", CH6_BATCH, CH6_EPOCHS, CH6_TRACE_STEPS);
}

enum {
    O_BACKEND = 256, O_WORLD, O_TIMEOUT, O_DATA, O_TEST, O_TRAIN_SIZE, O_BATCH, O_DROP_LAST, O_NO_SHUFFLE, O_SEED,
    O_WORKERS, O_AUGMENT, O_EPOCHS, O_STEPS, O_HIDDEN, O_BATCHNORM, O_OPTIMIZER, O_LR, O_MOMENTUM, O_WD, O_SCHEDULE,
    O_INIT, O_SAVE, O_BUCKET_CAP, O_FIRST_BUCKET, O_NO_OVERLAP, O_ACCUMULATE, O_COMPRESS, O_BROADCAST, O_EVAL,
    O_CHECK, O_CHECKPOINT, O_CHECKPOINT_EVERY, O_RESUME, O_TRACE, O_TRACE_STEPS, O_OUT, O_PLOT, O_DEMO, O_BENCH,
    O_FAULT, O_DEVICE, O_DROP_EVENT, O_HW, O_TOPOLOGY, O_ALGO, O_SAME_BITS, O_GLOBAL_BATCH, O_WRITE_CHECK,
};

static const char *const ch6_devices[] = {"sim", "cuda", NULL};
static const char *const ch6_events[] = {"copy", "bucket-ready", "bucket-done", NULL};

static const struct option ch6_longopts[] = {
    {"backend", required_argument, 0, O_BACKEND},       {"world", required_argument, 0, O_WORLD},
    {"device", required_argument, 0, O_DEVICE},         {"drop-event", required_argument, 0, O_DROP_EVENT},
    {"timeout", required_argument, 0, O_TIMEOUT},       {"data", required_argument, 0, O_DATA},
    {"test-data", required_argument, 0, O_TEST},        {"train-size", required_argument, 0, O_TRAIN_SIZE},
    {"batch", required_argument, 0, O_BATCH},           {"drop-last", no_argument, 0, O_DROP_LAST},
    {"no-shuffle", no_argument, 0, O_NO_SHUFFLE},       {"seed", required_argument, 0, O_SEED},
    {"workers", required_argument, 0, O_WORKERS},       {"augment", required_argument, 0, O_AUGMENT},
    {"epochs", required_argument, 0, O_EPOCHS},         {"steps", required_argument, 0, O_STEPS},
    {"hidden", required_argument, 0, O_HIDDEN},         {"batchnorm", no_argument, 0, O_BATCHNORM},
    {"optimizer", required_argument, 0, O_OPTIMIZER},   {"lr", required_argument, 0, O_LR},
    {"momentum", required_argument, 0, O_MOMENTUM},     {"weight-decay", required_argument, 0, O_WD},
    {"schedule", required_argument, 0, O_SCHEDULE},     {"init", required_argument, 0, O_INIT},
    {"save", required_argument, 0, O_SAVE},             {"bucket-cap-mb", required_argument, 0, O_BUCKET_CAP},
    {"first-bucket-kb", required_argument, 0, O_FIRST_BUCKET}, {"no-overlap", no_argument, 0, O_NO_OVERLAP},
    {"accumulate", required_argument, 0, O_ACCUMULATE}, {"compress", required_argument, 0, O_COMPRESS},
    {"broadcast-buffers", required_argument, 0, O_BROADCAST}, {"eval", required_argument, 0, O_EVAL},
    {"check", no_argument, 0, O_CHECK},                 {"checkpoint", required_argument, 0, O_CHECKPOINT},
    {"checkpoint-every", required_argument, 0, O_CHECKPOINT_EVERY}, {"resume", required_argument, 0, O_RESUME},
    {"trace", required_argument, 0, O_TRACE},           {"trace-steps", required_argument, 0, O_TRACE_STEPS},
    {"out", required_argument, 0, O_OUT},               {"plot", no_argument, 0, O_PLOT},
    {"demo", required_argument, 0, O_DEMO},             {"bench", required_argument, 0, O_BENCH},
    {"fault", required_argument, 0, O_FAULT},           {"hw", required_argument, 0, O_HW},
    {"topology", required_argument, 0, O_TOPOLOGY},     {"algo", required_argument, 0, O_ALGO},
    {"same-bits", no_argument, 0, O_SAME_BITS},         {"global-batch", required_argument, 0, O_GLOBAL_BATCH},
    {"write-check", required_argument, 0, O_WRITE_CHECK}, {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

struct ch6_cli {
    struct ch6_run run;
    const char *data, *test, *demo, *bench;
    const struct hw_profile *hw; /* --hw, NULL: none */
    const char *topology;        /* --topology's text, NULL: none */
    uint64_t global_batch;       /* --global-batch, 0: none */
    struct cli_given given;
};

static int ch6_parse(int argc, char **argv, struct ch6_cli *cli)
{
    static const char *const onoff[] = {"on", "off", NULL};
    static const char *const ch6_algos[] = {"ring", "tree", "hier", NULL};
    static const enum comm_algo ch6_algo_of[] = {COMM_ALGO_RING, COMM_ALGO_TREE, COMM_ALGO_HIER};
    static const char *const augments[] = {"none", "flip", NULL};
    static const char *const write_checks[] = {"bytes", "trap", NULL};
    static const enum device_write_check write_check_of[] = {DEVICE_WRITE_CHECK_BYTES, DEVICE_WRITE_CHECK_TRAP};
    static const char *const evals[] = {"all-ranks", "rank0-wrapped", "rank0-unwrapped", "none", NULL};
    static const enum train_eval eval_of[] = {TRAIN_EVAL_EVERY_RANK, TRAIN_EVAL_RANK0_WRAPPED,
                                              TRAIN_EVAL_RANK0_UNWRAPPED, TRAIN_EVAL_NONE};
    struct ch6_run *run = &cli->run;
    struct train_config *c = &run->train;
    int rc = 0, ch, choice;
    uint64_t v;
    double x;
    opterr = 0;
    while (rc == 0 && (ch = getopt_long(argc, argv, ":", ch6_longopts, NULL)) != -1) {
        cli_given_add(&cli->given, ch);
        switch (ch) {
        case O_BACKEND:
            if ((rc = cli_parse_choice("backend", optarg, backend_table_comm_names(), &choice)) == 0)
                run->backend = backend_table_comm_names()[choice];
            break;
        case O_DEVICE:
            if ((rc = cli_parse_choice("device", optarg, ch6_devices, &choice)) == 0)
                c->device = ch6_devices[choice];
            break;
        case O_DROP_EVENT:
            if ((rc = cli_parse_choice("drop-event", optarg, ch6_events, &choice)) == 0) {
                c->unordered_input = choice == 0;
                if (choice == 0) { /* a congested link: the copy still in flight when compute reads the batch,
                                    * as the bug needs to show (a copy the host saw finish orders it anyway) */
                    snprintf(c->link.title, sizeof c->link.title, "a congested link (100 KB/s)");
                    c->link.bandwidth_bps = c->link.limit_bps = 100e3;
                }
                c->reducer.unordered = choice == 1 ? REDUCER_UNORDERED_READY : choice == 2 ? REDUCER_UNORDERED_REDUCED : 0;
            }
            break;
        case O_HW:
            if ((rc = hw_flag_parse(optarg, &cli->hw)) == 1)
                exit(CLI_EXIT_OK);
            break;
        case O_TOPOLOGY: cli->topology = optarg; break;
        case O_WRITE_CHECK:
            if ((rc = cli_parse_choice("write-check", optarg, write_checks, &choice)) == 0)
                c->write_check = write_check_of[choice];
            break;
        case O_SAME_BITS: c->same_bits = 1; break;
        case O_GLOBAL_BATCH: rc = cli_parse_range("global-batch", optarg, 1, (uint64_t)MODEL_MAX_BATCH * 64, &cli->global_batch); break;
        case O_ALGO:
            if ((rc = cli_parse_choice("algo", optarg, ch6_algos, &choice)) == 0)
                run->algo = ch6_algo_of[choice];
            break;
        case O_WORLD:
            rc = cli_parse_range("world", optarg, 1, 64, &v);
            run->world = (int)v;
            break;
        case O_TIMEOUT: rc = cli_parse_double_range("timeout", optarg, COMM_MIN_TIMEOUT_S, COMM_MAX_TIMEOUT_S,
                                                    &run->timeout_s); break;
        case O_DATA: rc = cli_parse_text("data", optarg, "a path or 'synthetic'", &cli->data); break;
        case O_TEST: rc = cli_parse_text("test-data", optarg, "a path or 'none'", &cli->test); break;
        case O_TRAIN_SIZE: rc = cli_parse_range("train-size", optarg, 1, UINT64_MAX, &c->train_records); break;
        case O_BATCH:
            rc = cli_parse_range("batch", optarg, 1, MODEL_MAX_BATCH, &v);
            c->batch = (uint32_t)v;
            break;
        case O_DROP_LAST: c->drop_last = 1; break;
        case O_NO_SHUFFLE: c->shuffle = 0; break;
        case O_SEED: rc = cli_parse_seed("seed", optarg, &c->seed); break;
        case O_WORKERS:
            rc = cli_parse_range("workers", optarg, 0, 16, &v);
            c->workers = (uint32_t)v;
            break;
        case O_AUGMENT:
            if ((rc = cli_parse_choice("augment", optarg, augments, &choice)) == 0)
                c->augment = choice;
            break;
        case O_EPOCHS: rc = cli_parse_range("epochs", optarg, 1, 100000, &c->epochs); break;
        case O_STEPS: rc = cli_parse_range("steps", optarg, 1, UINT64_MAX, &c->max_steps); break;
        case O_HIDDEN: rc = model_spec_parse_hidden(&c->spec, optarg, "hidden"); break;
        case O_BATCHNORM: c->spec.batchnorm = 1; break;
        case O_OPTIMIZER: {
            enum optim_kind k;
            if ((rc = optim_kind_parse("--optimizer", optarg, &k)) == 0) {
                struct optim_config keep = c->optim;
                optim_config_default(&c->optim, k); /* adam's own defaults, then what was given */
                c->optim.schedule = keep.schedule;
                c->optim.weight_decay = keep.weight_decay;
                if (cli_given_has(&cli->given, O_LR))
                    c->optim.lr = keep.lr;
                if (cli_given_has(&cli->given, O_MOMENTUM))
                    c->optim.momentum = keep.momentum;
            }
            break;
        }
        case O_LR:
            rc = cli_parse_double_range("lr", optarg, 1e-12, 1e6, &c->optim.lr);
            break;
        case O_MOMENTUM: rc = cli_parse_double_range("momentum", optarg, 0, 0.999999, &c->optim.momentum); break;
        case O_WD: rc = cli_parse_double_range("weight-decay", optarg, 0, 1e6, &c->optim.weight_decay); break;
        case O_SCHEDULE: rc = optim_schedule_parse("--schedule", optarg, &c->optim.schedule); break;
        case O_INIT: rc = cli_parse_text("init", optarg, "a file", &c->init_path); break;
        case O_SAVE: rc = cli_parse_text("save", optarg, "a file", &c->save_path); break;
        case O_BUCKET_CAP:
            if ((rc = cli_parse_double_range("bucket-cap-mb", optarg, 1e-4, 1024, &x)) == 0)
                c->reducer.bucket_cap_bytes = (size_t)(x * 1024 * 1024); /* PyTorch: bucket_cap_mb * 1024 * 1024 */
            break;
        case O_FIRST_BUCKET:
            if ((rc = cli_parse_double_range("first-bucket-kb", optarg, 0.1, 1048576, &x)) == 0)
                c->reducer.first_bucket_bytes = (size_t)(x * 1024);
            break;
        case O_NO_OVERLAP: c->overlap = 0; break;
        case O_ACCUMULATE:
            rc = cli_parse_range("accumulate", optarg, 1, 1024, &v);
            c->accumulate = (uint32_t)v;
            break;
        case O_COMPRESS: rc = reducer_compress_parse("--compress", optarg, &c->reducer.compress); break;
        case O_BROADCAST:
            if ((rc = cli_parse_choice("broadcast-buffers", optarg, onoff, &choice)) == 0)
                c->reducer.broadcast_buffers = choice == 0;
            break;
        case O_EVAL:
            if ((rc = cli_parse_choice("eval", optarg, evals, &choice)) == 0)
                c->eval = eval_of[choice];
            break;
        case O_CHECK: c->check = 1; break;
        case O_FAULT: run->faults = optarg; break;
        case O_CHECKPOINT: rc = cli_parse_text("checkpoint", optarg, "a directory", &c->checkpoint_dir); break;
        case O_CHECKPOINT_EVERY: rc = cli_parse_range("checkpoint-every", optarg, 1, UINT64_MAX,
                                                      &c->checkpoint_every); break;
        case O_RESUME: rc = cli_parse_text("resume", optarg, "a directory", &c->resume_dir); break;
        case O_TRACE: rc = cli_parse_text("trace", optarg, "a file", &run->trace_path); break;
        case O_TRACE_STEPS: rc = cli_parse_range("trace-steps", optarg, 1, 100000, &c->trace_steps); break;
        case O_OUT: rc = cli_parse_text("out", optarg, "a directory", &run->out_dir); break;
        case O_PLOT: break; /* the default run is the plotted one */
        case O_DEMO:
            if ((rc = cli_parse_choice("demo", optarg, ch6_demo_names, &choice)) == 0)
                cli->demo = ch6_demo_names[choice];
            break;
        case O_BENCH:
            if ((rc = cli_parse_choice("bench", optarg, ch6_bench_names, &choice)) == 0)
                cli->bench = ch6_bench_names[choice];
            break;
        case 'h': ch6_usage(stdout); exit(CLI_EXIT_OK);
        default: rc = cli_getopt_error(ch, argv[optind - 1], ch6_longopts);
        }
    }
    if (rc == 0 && optind < argc)
        rc = err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
    return rc;
}

/* The flags together. 0, or ERR_ARG naming the flag. */
/* Which device the model computes on, and the pairs of --device and
 * --backend that cannot work, refused before any rank starts. */
static int ch6_choose_device(struct ch6_run *run, int drop_event)
{
    struct train_config *c = &run->train;
    int nccl = strcmp(run->backend, "nccl") == 0, threads = strcmp(run->backend, "sim") == 0;
    const char *want = c->device ? c->device : nccl ? "cuda" : threads ? "sim" : NULL, *chosen;
    int count, rc = backend_table_device_usable(want, &chosen, &count);
    if (rc < 0)
        return err_wrap(ERR_ARG, "--device=%s%s", want ? want : "cuda",
                        c->device ? "" : nccl ? " (what --backend=nccl needs)" : "");
    c->device = chosen;
    if (nccl && strcmp(chosen, "cuda") != 0)
        return err_set(ERR_ARG, "--backend=nccl with --device=%s: NCCL all-reduces GPU memory, and the simulated "
                                "device keeps the model in host memory: use --device=cuda, or --backend=sim or mpi",
                       chosen);
    if (nccl && launch_threads(run->backend) == 1) { /* ranks as threads of this process, rank r on GPU r */
        if (run->world > count)
            return err_set(ERR_ARG, "--backend=nccl --world=%d: NCCL wants one GPU per rank, and this machine has "
                                    "%d: ranks may share a GPU under --backend=mpi (mpirun -np %d build/chapter-6 "
                                    "--backend=mpi --device=cuda)", run->world, count, run->world);
        c->device_per_rank = 1;
    }
    if (threads && strcmp(chosen, "cuda") == 0)
        return err_set(ERR_ARG, "--backend=sim with --device=cuda: the simulated ranks are threads whose "
                                "communicator adds host memory, not GPU memory: on GPUs use --backend=nccl (one "
                                "process per GPU, under torchrun or mpirun)");
    if (drop_event && strcmp(chosen, "sim") != 0)
        return err_set(ERR_ARG, "--drop-event: only the simulated device's detector names the hazard it makes; on "
                                "a GPU it is a rare wrong number: add --device=sim");
    return 0;
}

/* --topology=NODESxGPUS and --algo: the simulator's modelled cluster, which
 * sets the world (a different --world is refused). */
static int ch6_topology(struct ch6_cli *cli)
{
    struct ch6_run *run = &cli->run;
    if ((cli->topology || cli_given_has(&cli->given, O_ALGO)) && strcmp(run->backend, "sim") != 0)
        return err_set(ERR_ARG, "--topology and --algo model the simulator's cluster: under --backend=%s the "
                                "launcher's hosts are the topology and the library picks the algorithm",
                       run->backend);
    if (!cli->topology)
        return 0;
    int nodes, gpus;
    if (comm_topology_parse(cli->topology, &nodes, &gpus) < 0)
        return err_wrap(ERR_ARG, "--topology");
    if (nodes * gpus > 64)
        return err_set(ERR_ARG, "--topology: topology '%s': %d ranks, more than --world's 64", cli->topology, nodes * gpus);
    if (cli_given_has(&cli->given, O_WORLD) && run->world != nodes * gpus)
        return err_set(ERR_ARG, "--world=%d with --topology=%s, which is %d ranks: give one of them", run->world,
                       cli->topology, nodes * gpus);
    run->world = nodes * gpus;
    run->node_size = gpus;
    return 0;
}

/* One file the run reads or writes, for ch6_files_apart(). */
struct ch6_file {
    char path[PATH_MAX];
    const char *flag;
    int input;
};

/* Adds `path` (a printf format) as the file of `flag`; an input only when it
 * is a file on disk ("synthetic", "none" and what is missing are not). */
static void ch6_file_add(struct ch6_file *f, int *n, const char *flag, int input, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void ch6_file_add(struct ch6_file *f, int *n, const char *flag, int input, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f[*n].path, PATH_MAX, fmt, ap);
    va_end(ap);
    struct stat st;
    if (input && (stat(f[*n].path, &st) != 0 || !S_ISREG(st.st_mode)))
        return;
    f[*n].flag = flag;
    f[(*n)++].input = input;
}

/* Every file a training run writes is a file of its own, and none is one it
 * reads: with --save=m --trace=m, --save=OUT/epochs.csv or --trace=DATA, the
 * file written last would replace the other, and the model or the data would
 * be lost. Training on from a file in place (--save=m --init=m, --checkpoint
 * and --resume of one directory) is what those flags are for. 0, or ERR_ARG
 * naming both flags. */
static int ch6_files_apart(const struct ch6_cli *cli)
{
    static const char *const plot_ext[] = {".csv", ".png", ".svg"};
    static const char *const in_place[][2] = {{"--save", "--init"}, {"--checkpoint", "--resume"}};
    const struct ch6_run *run = &cli->run;
    const struct train_config *c = &run->train;
    struct ch6_file f[12];
    int n = 0;
    struct stat st;
    if (c->save_path)
        ch6_file_add(f, &n, "--save", 0, "%s", c->save_path);
    if (run->trace_path)
        ch6_file_add(f, &n, "--trace", 0, "%s", run->trace_path);
    if (c->checkpoint_dir)
        ch6_file_add(f, &n, "--checkpoint", 0, "%s/" CHECKPOINT_FILE, c->checkpoint_dir);
    for (int k = 0; run->out_dir && run->gantt_name && k < 3; k++)
        ch6_file_add(f, &n, "--out", 0, "%s/%s%s", run->out_dir, run->gantt_name, plot_ext[k]);
    if (run->out_dir && run->epochs_name)
        ch6_file_add(f, &n, "--out", 0, "%s/%s.csv", run->out_dir, run->epochs_name);
    if (cli->data)
        ch6_file_add(f, &n, "--data", 1, "%s", cli->data);
    if (cli->test)
        ch6_file_add(f, &n, "--test-data", 1, "%s", cli->test);
    if (c->init_path)
        ch6_file_add(f, &n, "--init", 1, "%s", c->init_path);
    if (c->resume_dir && stat(c->resume_dir, &st) == 0 && S_ISDIR(st.st_mode))
        ch6_file_add(f, &n, "--resume", 1, "%s/" CHECKPOINT_FILE, c->resume_dir);
    else if (c->resume_dir)
        ch6_file_add(f, &n, "--resume", 1, "%s", c->resume_dir);
    for (int i = 0; i < n && !f[i].input; i++) /* the outputs come first */
        for (int j = i + 1; j < n; j++) {
            int allowed = strcmp(f[i].flag, f[j].flag) == 0;
            for (size_t k = 0; k < sizeof in_place / sizeof in_place[0]; k++)
                allowed |= strcmp(f[i].flag, in_place[k][0]) == 0 && strcmp(f[j].flag, in_place[k][1]) == 0;
            if (allowed || !fsutil_same_output(f[i].path, f[j].path))
                continue;
            if (f[j].input)
                return err_set(ERR_ARG, "%s would write over %s, the file %s reads: give it another name", f[i].flag,
                               f[i].path, f[j].flag);
            return err_set(ERR_ARG, "%s and %s both write %s: the one written last would replace the other; give "
                                    "each its own file", f[i].flag, f[j].flag, f[i].path);
        }
    return 0;
}

static int ch6_validate(struct ch6_cli *cli)
{
    struct ch6_run *run = &cli->run;
    struct train_config *c = &run->train;
    const struct cli_given *g = &cli->given;
    int rc;
    if (cli->demo && cli->bench)
        return err_set(ERR_ARG, "--demo and --bench each choose what runs: give one of them");
    if (cli->demo && (rc = cli_refuse_given(g, ch6_longopts, (const int[]){O_BATCH, 0},
                                            "does nothing with --demo (each story sets its own runs)")) < 0)
        return rc;
    if (cli->demo || cli->bench) {
        static const int run_flags[] = {O_BACKEND, O_WORLD, O_TRAIN_SIZE, O_DROP_LAST, O_NO_SHUFFLE,
                                        O_WORKERS, O_AUGMENT, O_EPOCHS, O_STEPS, O_HIDDEN, O_BATCHNORM, O_OPTIMIZER,
                                        O_LR, O_MOMENTUM, O_WD, O_SCHEDULE, O_INIT, O_SAVE, O_BUCKET_CAP,
                                        O_FIRST_BUCKET, O_NO_OVERLAP, O_ACCUMULATE, O_COMPRESS, O_BROADCAST, O_EVAL,
                                        O_CHECK, O_CHECKPOINT, O_CHECKPOINT_EVERY, O_RESUME, O_TRACE, O_TRACE_STEPS,
                                        O_PLOT, O_TIMEOUT, O_FAULT, O_DROP_EVENT, O_HW, O_TOPOLOGY, O_ALGO, O_SAME_BITS, O_GLOBAL_BATCH,
                                        O_WRITE_CHECK, 0};
        if ((rc = cli_refuse_given(g, ch6_longopts, run_flags,
                                   "does nothing with --demo or --bench (each sets up its own runs; --data, "
                                   "--test-data, --seed, --out and, for --bench, --batch apply, and --device for "
                                   "--bench=model)")) < 0)
            return rc;
        if (cli_given_has(g, O_DEVICE) && !(cli->bench && strcmp(cli->bench, "model") == 0))
            return err_set(ERR_ARG, "--device: the demos and --bench=%s run on the simulated device; --device "
                                    "chooses where --bench=model times the model", cli->bench ? cli->bench : "...");
        if (cli->bench && strcmp(cli->bench, "scaling") != 0) {
            char why[128];
            snprintf(why, sizeof why, "does nothing with --bench=%s (of the benchmarks, only --bench=scaling writes a "
                     "file)", cli->bench);
            if ((rc = cli_refuse_given(g, ch6_longopts, (const int[]){O_OUT, 0}, why)) < 0)
                return rc;
        }
    }
    if (cli->bench && strcmp(cli->bench, "model") == 0) { /* one model, no ranks: any device */
        const char *chosen;
        int count;
        if ((rc = backend_table_device_usable(c->device ? c->device : "sim", &chosen, &count)) < 0)
            return err_wrap(ERR_ARG, "--device=%s", c->device);
        c->device = chosen;
        return 0;
    }
    if ((rc = ch6_choose_device(run, cli_given_has(g, O_DROP_EVENT))) < 0)
        return rc;
    if (cli->hw) { /* the link the simulated device times its copies with */
        if (strcmp(c->device, "sim") != 0)
            return err_set(ERR_ARG, "--hw=%s models the simulated device's link; --device=%s copies over the real "
                                    "one: add --device=sim", cli->hw->name, c->device);
        if (c->unordered_input)
            return err_set(ERR_ARG, "--hw with --drop-event=copy: the story sets its own congested link");
        hw_host_link(cli->hw, &c->link);
        c->gemm_flops = hw_gemm_flops(cli->hw); /* and the GPU that times its compute */
        c->gpu_memory_bps = cli->hw->memory_bps;
        run->hw = cli->hw; /* and the links that time its collectives */
    }
    if (cli_given_has(g, O_WRITE_CHECK) && strcmp(c->device, "sim") != 0)
        return err_set(ERR_ARG, "--write-check chooses the simulated device's detector; --device=%s has none (a "
                                "GPU's copy engine reads the pages behind the CPU's back): add --device=sim",
                       c->device);
    if ((rc = ch6_topology(cli)) < 0)
        return rc;
    int threads = launch_threads(run->backend), launched = launch_launcher_world();
    if (threads < 0)
        return threads;
    if (launched < 0)
        return launched;
    if (cli->global_batch) { /* the batch per rank: the world's, or the launcher's */
        int world = threads ? run->world : launched;
        world = world > 0 ? world : 1;
        if (cli_given_has(g, O_BATCH))
            return err_set(ERR_ARG, "--batch and --global-batch both give the batch: give one of them");
        if (cli->global_batch % (uint64_t)world || cli->global_batch / (uint64_t)world > MODEL_MAX_BATCH)
            return err_set(ERR_ARG, "--global-batch=%llu on %d ranks: the batch per rank is G / W, so W must divide "
                                    "G, and G / W be at most %d", (unsigned long long)cli->global_batch, world,
                           MODEL_MAX_BATCH);
        c->batch = (uint32_t)(cli->global_batch / (uint64_t)world);
    }
    if (!threads && cli_given_has(g, O_WORLD))
        return err_set(ERR_ARG, "--world=%d: this process is one rank of a job mpirun started: mpirun -np W sets "
                                "the world", run->world);
    if (threads && launched > 1)
        return err_set(ERR_ARG, "--backend=%s: a launcher (mpirun or torchrun) started this process as one of %d: "
                                "each would run a whole simulated job; under mpirun pass --backend=mpi",
                       run->backend, launched);
    if (run->faults) { /* a flip is the training loop's, under any backend; the others are the simulator's */
        struct fault *faults;
        int nfaults, world = threads ? run->world : launched;
        if ((rc = faults_parse(run->faults, world > 0 ? world : 1, &faults, &nfaults)) < 0)
            return rc;
        for (int i = 0; i < nfaults && !threads; i++)
            if (faults[i].kind != FAULT_FLIP)
                rc = err_set(ERR_ARG, "--fault=%s: kill, delay and skip are the simulator's: they need "
                                      "--backend=sim (flip:R@K runs under any backend)", run->faults);
        free(faults);
        if (rc < 0)
            return rc;
    }
    /* every output, before minutes of training: an empty path, a device, a FIFO or a directory is refused */
    if ((c->save_path && (rc = fsutil_check_output(c->save_path, "--save")) < 0) ||
        (run->trace_path && (rc = fsutil_check_output(run->trace_path, "--trace")) < 0) ||
        (c->checkpoint_dir && (rc = fsutil_check_output_dir(c->checkpoint_dir, "--checkpoint")) < 0) ||
        (run->out_dir && (rc = fsutil_check_output_dir(run->out_dir, "--out")) < 0) ||
        (rc = ch6_files_apart(cli)) < 0)
        return cli_as_usage_error(rc);
    if (c->checkpoint_every && !c->checkpoint_dir)
        return err_set(ERR_ARG, "--checkpoint-every needs --checkpoint=DIR (where to write them)");
    if (c->resume_dir && c->init_path)
        return err_set(ERR_ARG, "--init and --resume both give the starting parameters: give one of them");
    if (c->spec.batchnorm && c->batch == 1)
        return err_set(ERR_ARG, "--batch=1 with --batchnorm: BatchNorm1d needs more than 1 value per channel in "
                                "training");
    if ((rc = model_spec_check(&c->spec)) < 0)
        return err_wrap(rc, "--hidden");
    if (c->optim.kind == OPTIM_ADAM && cli_given_has(g, O_MOMENTUM))
        return err_set(ERR_ARG, "--momentum is SGD's (Adam's moments are its betas, 0.9 and 0.999): add "
                                "--optimizer=sgd");
    struct optim_config oc = c->optim; /* the run sets the schedule's lengths; the rest is checked here */
    oc.total_steps = oc.step_size = 1;
    if ((rc = optim_config_check(&oc)) < 0)
        return rc;
    if (strcmp(run->backend, "sim") == 0)
        c->check = 1; /* the simulator can afford it: every step */
    if (run->trace_path || run->out_dir)
        c->trace_steps = c->trace_steps ? c->trace_steps : CH6_TRACE_STEPS;
    return 0;
}

int main(int argc, char **argv)
{
    struct ch6_cli cli;
    memset(&cli, 0, sizeof cli);
    struct ch6_run *run = &cli.run;
    train_config_default(&run->train);
    ch6_recipe(&run->train);
    run->backend = "sim";
    run->world = 4;
    run->out_dir = CH6_OUT_DIR;
    run->gantt_name = "gantt";
    run->epochs_name = "epochs";
    if (ch6_parse(argc, argv, &cli) < 0)
        return cli_fail(CH6_PROG);
    int rc = ch6_validate(&cli);
    if (rc == ERR_ARG)
        return cli_fail(CH6_PROG);
    if (rc < 0)
        return cli_error(CH6_PROG);

    dataset_t *train = NULL, *test = NULL;
    char note[2048];
    if (ch6_open_data(cli.data, cli.test, &train, &test, note, sizeof note) < 0)
        return cli_error(CH6_PROG);
    run->train.train_set = train;
    run->train.test_set = test;
    run->data_note = note;
    int status;
    if (cli.demo) {
        status = ch6_demo(run, cli.demo);
    } else if (cli.bench) {
        status = ch6_bench(run, cli.bench, getenv("BENCH_QUICK") && strcmp(getenv("BENCH_QUICK"), "1") == 0) < 0
                     ? cli_error(CH6_PROG)
                     : CLI_EXIT_OK;
    } else {
        struct ch6_outcome out;
        rc = ch6_train(run, &out);
        timeline_all_free(out.result.timeline);
        status = rc < 0 ? cli_error(CH6_PROG) : CLI_EXIT_OK;
    }
    dataset_close(train);
    dataset_close(test);
    return cli_exit(CH6_PROG, status); /* the summary into a full disk is no summary */
}
