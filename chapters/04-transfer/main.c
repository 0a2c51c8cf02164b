/* chapter-4: pinned transfer. Does pin_memory help, when, and by how much?
 *
 * Where it sits: the fourth program of the course (read
 * chapters/04-transfer/README.md alongside). It moves batches from host
 * memory to a device (a GPU, or the simulated one when there is none) and
 * measures every step of the way:
 *
 *   build/chapter-4                     the lesson: the size sweep, the cost of pinning, the
 *                                       training loop with and without double buffering, plots
 *   build/chapter-4 --only=sweep|pinning|loop   one section
 *   build/chapter-4 --only=loop --topology=1x8 --algo=ring   each step ending with the
 *                                       gradients' all-reduce, on the link the batches use
 *   build/chapter-4 --demo=race         a loader slot handed back too early, caught by the detector
 *   build/chapter-4 --bench             the benchmarks' verdicts (make bench)
 *
 * The logic lives in lib/transfer/ (device.h, pinned_pool.h, prefetch.h) and
 * sim/device_sim.h; this program teaches and measures.
 */
#include "chapter4.h"

#include "backend_table.h"
#include "base/cli.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/units.h"
#include "comm/comm.h"
#include "transfer/hw.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CH4_PROG "chapter-4" /* the name every message starts with */

static void ch4_usage(FILE *f)
{
    fprintf(f,
            "usage: chapter-4 [--only=sweep|pinning|loop] [options]\n"
            "       chapter-4 --demo=race | --bench\n"
            "\n"
            "Chapter 4, pinned transfer: how batches get from host memory to the device, and what pinned\n"
            "(page-locked) memory, asynchronous copies and double buffering change. With no flags (or\n"
            "--plot): the whole lesson; tables on stdout, CSV, PNG and SVG in --out.\n"
            "\n"
            "device:\n"
            "  --backend=sim|cuda      the simulated device or a GPU (default: cuda when one is found, else sim)\n"
            "  --link=pcie3|pcie4|pcie5  the simulated link, PCIe x16 of that generation (default " LINK_DEFAULT ")\n"
            "  --link-gbps=G           ... or a link of G GB/s (1e9 bytes/s), 0.001 to 10000\n"
            "  --link-latency-us=US    its fixed cost per copy, 0 to 1000000 (default 5 us)\n"
            "  --hw=NAME               the link of a modelled GPU system: " HW_NAMES "\n"
            "                          (its PCIe host link; not with --link; --link-gbps and --link-latency-us\n"
            "                          still replace its figures); --hw=list prints the profiles and their sources\n"
            "  --topology=NODESxGPUS   sim: the GPUs of a node copy at once, each its own batches; with\n"
            "  --host-links=K          they reach the host through K links (a PCIe switch's uplinks, default\n"
            "                          one per GPU; K divides GPUS), and each GPU gets K/GPUS of one\n"
            "                          (the loop's default compute stays one batch's copy on a link of its own)\n"
            "  --algo=ring|tree|naive|hier  the loop, with --topology: each step ends with the gradients'\n"
            "                          all-reduce over the topology's GPUs, and the part of it that crosses\n"
            "                          this GPU's host link (all of it where the GPUs talk over PCIe; where\n"
            "                          --hw gives them NVLink, what goes to other nodes) shares the link with\n"
            "                          the batches' copies (the reduction and its NVLink and network time:\n"
            "                          chapters 5 and 6)\n"
            "  --grad-bytes=SIZE       the gradients it reduces, 1 to 256M (default: as large as a batch);\n"
            "                          the simulator copies the link's share for real, at most 4G a step\n"
            "  --pool=SIZE             the pinned pool's limit (default 512M; K, M, G suffixes)\n"
            "size sweep:\n"
            "  --min-bytes=SIZE        the smallest copy, at least 1 (default 64K)\n"
            "  --max-bytes=SIZE        the largest, at most --pool (default 256M); sizes go up 4x per row\n"
            "training loop:\n"
            "  --data=PATH             dataset (IDX images or 'synthetic'; default Fashion-MNIST if installed)\n"
            "  --batch=N               samples per batch (default 1024)\n"
            "  --steps=N               measured steps per setting (default 48), after --warmup=N (default 4)\n"
            "  --workers=K             loader worker threads (default 1)\n"
            "  --compute-ms=MS         the model's compute per step (default: as long as one batch's copy)\n"
            "  --loop-gbps=G           sim: the loop's link (default 1 GB/s: a batch's copy lasts as long\n"
            "                          as a step, and this machine's memcpy, which plays the copy engine,\n"
            "                          stays far below the modelled time)\n"
            "other:\n"
            "  --demo=race             the slot-reused-too-early bug, caught by the detector, then fixed\n"
            "  --bench                 the benchmarks: PASS/MISS against the model and the link (make bench)\n"
            "  --out=DIR               where CSV, PNG and SVG go (default " CH4_OUT_DIR ")\n"
            "  --plot                  the lesson (the default run), for `make plots`\n"
            "  --help                  this text\n");
}

/* Everything the flags say, beyond the options the sections read. */
struct ch4_cli {
    struct ch4_opts opt;
    const char *demo, *only;
    const struct hw_profile *hw; /* --hw, NULL: none */
    int link_given;
    double gbps, latency_us, loop_gbps; /* < 0: the profile's own */
    const char *topology;               /* --topology, NULL: none */
    uint64_t host_links;                /* --host-links, 0: one per GPU */
    int grad_given;                     /* --grad-bytes */
    int bench, max_given;
    struct cli_given given; /* which flags were given, to refuse those the run would ignore */
};

enum { O_BACKEND = 256, O_LINK, O_GBPS, O_LATENCY, O_POOL, O_MIN, O_MAX, O_DATA, O_BATCH, O_STEPS, O_WARMUP,
       O_WORKERS, O_COMPUTE, O_LOOP_GBPS, O_DEMO, O_BENCH, O_OUT, O_PLOT, O_ONLY, O_HW, O_TOPOLOGY, O_HOST_LINKS,
       O_ALGO, O_GRAD_BYTES };

static const struct option ch4_longopts[] = {
    {"backend", required_argument, 0, O_BACKEND}, {"link", required_argument, 0, O_LINK},
    {"link-gbps", required_argument, 0, O_GBPS},  {"link-latency-us", required_argument, 0, O_LATENCY},
    {"pool", required_argument, 0, O_POOL},       {"min-bytes", required_argument, 0, O_MIN},
    {"max-bytes", required_argument, 0, O_MAX},   {"data", required_argument, 0, O_DATA},
    {"batch", required_argument, 0, O_BATCH},     {"steps", required_argument, 0, O_STEPS},
    {"warmup", required_argument, 0, O_WARMUP},   {"workers", required_argument, 0, O_WORKERS},
    {"compute-ms", required_argument, 0, O_COMPUTE}, {"loop-gbps", required_argument, 0, O_LOOP_GBPS},
    {"demo", required_argument, 0, O_DEMO},       {"bench", no_argument, 0, O_BENCH},
    {"out", required_argument, 0, O_OUT},         {"plot", no_argument, 0, O_PLOT},
    {"only", required_argument, 0, O_ONLY},       {"hw", required_argument, 0, O_HW},
    {"topology", required_argument, 0, O_TOPOLOGY}, {"host-links", required_argument, 0, O_HOST_LINKS},
    {"algo", required_argument, 0, O_ALGO},       {"grad-bytes", required_argument, 0, O_GRAD_BYTES},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* Reads the flags into *cli. 0, or ERR_ARG naming the flag; --help prints
 * the usage and exits 0. */
static int ch4_parse(int argc, char **argv, struct ch4_cli *cli)
{
    static const char *const demos[] = {"race", NULL};
    static const char *const sections[] = {"sweep", "pinning", "loop", NULL};
    struct ch4_opts *o = &cli->opt;
    int rc = 0, c, choice;
    double compute_ms;
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":", ch4_longopts, NULL)) != -1) {
        cli_given_add(&cli->given, c);
        switch (c) {
        case O_BACKEND:
            if ((rc = cli_parse_choice("backend", optarg, backend_table_device_names(), &choice)) == 0)
                o->backend = backend_table_device_names()[choice];
            break;
        case O_LINK:
            if ((rc = link_profile_find(optarg, &o->link)) < 0)
                rc = err_wrap(ERR_ARG, "--link");
            cli->link_given = 1;
            break;
        case O_HW:
            if ((rc = hw_flag_parse(optarg, &cli->hw)) == 1)
                exit(CLI_EXIT_OK);
            break;
        case O_TOPOLOGY: cli->topology = optarg; break; /* comm_topology_parse() reads it */
        case O_HOST_LINKS:
            rc = cli_parse_range("host-links", optarg, 1, COMM_TOPOLOGY_MAX_RANKS, &cli->host_links);
            break;
        case O_ALGO:
            if ((rc = cli_parse_choice("algo", optarg, ch4_algo_choices(), &choice)) == 0) {
                o->allreduce = 1;
                o->algo = ch4_algo_of(choice);
            }
            break;
        case O_GRAD_BYTES:
            rc = cli_parse_bytes("grad-bytes", optarg, 1, 256u << 20, &o->grad_bytes);
            cli->grad_given = 1;
            break;
        /* the link's limits are link_profile_set()'s: more than 0 and at most 10000 GB/s, 0 to 1e6 us */
        case O_GBPS: rc = cli_parse_double_range("link-gbps", optarg, 1e-3, 1e4, &cli->gbps); break;
        case O_LATENCY: rc = cli_parse_double_range("link-latency-us", optarg, 0, 1e6, &cli->latency_us); break;
        case O_LOOP_GBPS: rc = cli_parse_double_range("loop-gbps", optarg, 1e-3, 1e4, &cli->loop_gbps); break;
        /* sizes against each other and the machine: ch4_validate() */
        case O_POOL: rc = cli_parse_bytes("pool", optarg, 0, UINT64_MAX, &o->pool_bytes); break;
        case O_MIN: rc = cli_parse_bytes("min-bytes", optarg, 0, UINT64_MAX, &o->min_bytes); break;
        case O_MAX:
            rc = cli_parse_bytes("max-bytes", optarg, 0, UINT64_MAX, &o->max_bytes);
            cli->max_given = 1;
            break;
        case O_DATA: rc = cli_parse_text("data", optarg, "a path or 'synthetic'", &o->data); break;
        case O_BATCH: rc = cli_parse_range("batch", optarg, 1, 1u << 20, &o->batch); break;
        case O_STEPS: rc = cli_parse_range("steps", optarg, 1, 100000, &o->steps); break;
        case O_WARMUP: rc = cli_parse_range("warmup", optarg, 0, 100000, &o->warmup); break;
        case O_WORKERS: rc = cli_parse_range("workers", optarg, 0, 64, &o->workers); break;
        case O_COMPUTE:
            if ((rc = cli_parse_double_range("compute-ms", optarg, 0, 10000, &compute_ms)) == 0)
                o->compute_s = compute_ms * 1e-3;
            break;
        case O_DEMO:
            if ((rc = cli_parse_choice("demo", optarg, demos, &choice)) == 0)
                cli->demo = demos[choice];
            break;
        case O_BENCH: cli->bench = 1; break;
        case O_OUT: rc = cli_parse_text("out", optarg, "a directory", &o->out_dir); break;
        case O_PLOT: break; /* the default run is the plotted lesson */
        case O_ONLY:
            if ((rc = cli_parse_choice("only", optarg, sections, &choice)) == 0)
                cli->only = sections[choice];
            break;
        case 'h': ch4_usage(stdout); exit(CLI_EXIT_OK);
        default: rc = cli_getopt_error(c, argv[optind - 1], ch4_longopts);
        }
    }
    if (rc == 0 && optind < argc)
        rc = err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
    return rc;
}

/* --topology=NODESxGPUS and --host-links=K: the GPUs of one node copying at
 * once through K shared host links. Each node's host feeds its own GPUs, so
 * only GPUS matters here. The share is modelled, so the simulated device is
 * the one that runs it. */
static int ch4_topology(struct ch4_cli *cli)
{
    struct ch4_opts *o = &cli->opt;
    if (cli->grad_given && !o->allreduce)
        return err_set(ERR_ARG, "--grad-bytes: the size of the all-reduce that --algo adds to each step; give "
                                "--algo=ring|tree|naive|hier");
    if (!cli->topology) {
        if (cli->host_links)
            return err_set(ERR_ARG, "--host-links: the links the GPUs of a node share; give --topology=NODESxGPUS "
                                    "to say how many GPUs there are");
        if (o->allreduce)
            return err_set(ERR_ARG, "--algo: an all-reduce needs more than one GPU; give --topology=NODESxGPUS "
                                    "(for example 1x8 or 2x8)");
        return 0;
    }
    int nodes, gpus;
    if (comm_topology_parse(cli->topology, &nodes, &gpus) < 0)
        return err_wrap(ERR_ARG, "--topology");
    if (o->allreduce && nodes * gpus == 1)
        return err_set(ERR_ARG, "--algo: --topology=%s is one GPU, which has no one to all-reduce with", cli->topology);
    if (o->backend && strcmp(o->backend, "sim") != 0)
        return err_set(ERR_ARG, "--topology models GPUs sharing their host links on the simulated device: under "
                                "--backend=%s each copy takes the link it has", o->backend);
    o->backend = "sim";
    o->node_gpus = gpus;
    o->nodes = nodes;
    o->nvlink = cli->hw && cli->hw->nvlink_bidir_bps > 0;
    o->host_links = cli->host_links ? (int)cli->host_links : gpus;
    int rc = link_profile_share(&o->link, gpus, o->host_links);
    if (rc == 0)
        rc = link_profile_share(&o->loop_link, gpus, o->host_links);
    return rc < 0 ? err_wrap(ERR_ARG, "--host-links") : 0;
}

/* The size sweep's sizes against each other and the pinned pool, which hands
 * out whole pages of `page` bytes. 0 or ERR_ARG naming the flag. */
static int ch4_check_sizes(struct ch4_cli *cli, uint64_t page)
{
    struct ch4_opts *o = &cli->opt;
    char a[32];
    uint64_t holds = o->pool_bytes / page * page; /* the pool hands out whole pages */
    if (!cli->max_given && o->max_bytes > holds) /* the default sweep stops at what the pool holds */
        o->max_bytes = holds;
    if (o->min_bytes == 0)
        return err_set(ERR_ARG, "--min-bytes: a copy of 0 bytes moves nothing: give at least 1");
    if (!cli->max_given && o->max_bytes < o->min_bytes) /* the pool cut the default: name the flag given */
        return err_set(ERR_ARG, "--pool: %llu bytes hold no copy of --min-bytes (%llu): one copy's pinned buffer comes "
                       "from it", (unsigned long long)o->pool_bytes, (unsigned long long)o->min_bytes);
    if (o->max_bytes < o->min_bytes)
        return err_set(ERR_ARG, "--max-bytes (%llu) is smaller than --min-bytes (%llu)",
                       (unsigned long long)o->max_bytes, (unsigned long long)o->min_bytes);
    if (o->max_bytes > holds)
        return err_set(ERR_ARG, "--max-bytes: %llu bytes do not fit in the pinned pool of %llu bytes (--pool=%s): "
                       "one copy's pinned buffer comes from it, in whole pages of %llu bytes",
                       (unsigned long long)o->max_bytes, (unsigned long long)o->pool_bytes,
                       units_format_bytes(o->pool_bytes, a, sizeof a), (unsigned long long)page);
    return 0;
}

/* The flags together, every size against every other and against the
 * machine, before anything starts. 0 or ERR_ARG naming the flag. */
static int ch4_validate(struct ch4_cli *cli)
{
    struct ch4_opts *o = &cli->opt;
    if (!!cli->demo + cli->bench + !!cli->only > 1)
        return err_set(ERR_ARG, "--demo, --bench and --only each choose what runs: give one of them");
    int rc;
    if (cli->demo && (rc = cli_refuse_given(&cli->given, ch4_longopts,
                                            (const int[]){O_BACKEND, O_LINK, O_GBPS, O_HW, O_TOPOLOGY, O_HOST_LINKS,
                                                          O_ALGO, O_GRAD_BYTES, O_MIN, O_MAX, O_DATA, O_BATCH,
                                                          O_STEPS, O_WARMUP, O_WORKERS, O_COMPUTE, O_LOOP_GBPS, O_OUT,
                                                          O_PLOT, 0},
                                            "does nothing with --demo=race (it runs its own loop of synthetic "
                                            "batches on the simulated device, over a slow link, and writes no file; "
                                            "--pool and --link-latency-us apply)")) < 0)
        return rc;
    if (cli->bench && (rc = cli_refuse_given(&cli->given, ch4_longopts,
                                             (const int[]){O_MIN, O_MAX, O_OUT, O_PLOT, O_ALGO, O_GRAD_BYTES, 0},
                                             "does nothing with --bench (it times its own sizes and the training "
                                             "loop, and writes no file)")) < 0)
        return rc;
    char why[128];
    snprintf(why, sizeof why, "does nothing with --only=%s (only the training loop reads it: the lesson, --only=loop "
             "or --bench)", cli->only ? cli->only : "");
    if (cli->only && strcmp(cli->only, "loop") != 0 &&
        (rc = cli_refuse_given(&cli->given, ch4_longopts,
                               (const int[]){O_DATA, O_BATCH, O_STEPS, O_WARMUP, O_WORKERS, O_COMPUTE, O_LOOP_GBPS,
                                             O_ALGO, O_GRAD_BYTES, 0},
                               why)) < 0)
        return rc;
    snprintf(why, sizeof why, "does nothing with --only=%s (only the size sweep reads it: the lesson or --only=sweep)",
             cli->only ? cli->only : "");
    if (cli->only && strcmp(cli->only, "sweep") != 0 &&
        (rc = cli_refuse_given(&cli->given, ch4_longopts, (const int[]){O_MIN, O_MAX, 0}, why)) < 0)
        return rc;
    if (cli->hw && cli->link_given)
        return err_set(ERR_ARG, "--hw=%s and --link both choose the link (the %s sits on PCIe Gen%d x16, "
                       "--link=pcie%d): give one of them", cli->hw->name, cli->hw->title, cli->hw->pcie_gen,
                       cli->hw->pcie_gen);
    if (cli->hw)
        hw_host_link(cli->hw, &o->link); /* chapter 4's kernels declare their seconds: the GPU's peaks time nothing here */
    rc = link_profile_set(&o->link, cli->gbps, cli->latency_us); /* in range: parsed so */
    o->loop_link = o->link;
    if (rc == 0)
        rc = link_profile_set(&o->loop_link, cli->loop_gbps, -1);
    o->own_loop_link = o->loop_link;
    if (rc == 0)
        rc = ch4_topology(cli);
    if (rc < 0)
        return rc;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), memory = (uint64_t)sysconf(_SC_PHYS_PAGES) * page;
    char a[32], b[32];
    if (o->pool_bytes == 0)
        return err_set(ERR_ARG, "--pool: a pinned pool of 0 bytes holds nothing");
    if (o->pool_bytes > memory / 2)
        return err_set(ERR_ARG, "--pool: %s is more than half this machine's memory (%s): pinned memory cannot be "
                       "swapped out", units_format_bytes(o->pool_bytes, a, sizeof a), units_format_bytes(memory, b, sizeof b));
    if (!cli->demo && !cli->bench && (!cli->only || strcmp(cli->only, "sweep") == 0) &&
        (rc = ch4_check_sizes(cli, page)) < 0) /* only the sweep copies them */
        return rc;
    if (cli->demo || cli->bench) /* they write no file */
        return 0;
    return fsutil_check_output_dir(o->out_dir, "--out"); /* before the runs that fill it */
}

/* Runs what the flags asked for; returns the exit status. */
static int ch4_run(const struct ch4_cli *cli)
{
    const struct ch4_opts *o = &cli->opt;
    int rc = 0;
    if (o->node_gpus > 1) {
        int per = o->node_gpus / o->host_links;
        printf("(--topology=%s: the %d GPUs of a node copy at once, each its own batches, through %d host link%s",
               cli->topology, o->node_gpus, o->host_links, o->host_links == 1 ? "" : "s");
        if (per > 1)
            printf(", %d on each: a GPU's copies get 1/%d of a link, a fixed share (modelled)", per, per);
        else
            printf(", one each: nothing is shared");
        printf(". Each node's host feeds its own GPUs, so the number of nodes changes %s.)\n\n",
               o->allreduce ? "only the all-reduce" : "nothing here");
    }
    if (cli->demo)
        rc = ch4_demo_race(o);
    else if (cli->bench) {
        if ((rc = ch4_loop_check(o, 1)) == 0) /* the loop's, before any verdict */
            rc = ch4_bench(o);
    } else {
        if (!cli->only || strcmp(cli->only, "loop") == 0)
            rc = ch4_loop_check(o, 0);
        if (rc == 0 && (!cli->only || strcmp(cli->only, "sweep") == 0))
            rc = ch4_sweep(o);
        if (rc == 0 && (!cli->only || strcmp(cli->only, "pinning") == 0))
            rc = ch4_pinning(o);
        if (rc == 0 && (!cli->only || strcmp(cli->only, "loop") == 0))
            rc = ch4_loop(o);
    }
    rc = cli_stdout_status(rc); /* the tables into a full disk are no tables */
    return rc < 0 ? cli_error(CH4_PROG) : CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    struct ch4_cli cli = {
        .opt = {
            .min_bytes = 64 << 10, .max_bytes = 256u << 20, .pool_bytes = 512u << 20, .batch = 1024, .steps = 48,
            .warmup = 4, .workers = 1, .compute_s = -1, .out_dir = CH4_OUT_DIR,
        },
        .gbps = -1,
        .latency_us = -1,
        .loop_gbps = 1, /* see --help: a batch's copy as long as a step */
    };
    link_profile_find(LINK_DEFAULT, &cli.opt.link);
    if (ch4_parse(argc, argv, &cli) < 0 || ch4_validate(&cli) < 0)
        return cli_fail(CH4_PROG);
    return ch4_run(&cli);
}
