/* chapter-5: all-reduce. Every rank ends a step with the same averaged
 * gradient; this program measures how fast, in nccl-tests' table layout, and
 * shows how jobs fail when one rank does not come (the fault demos).
 *
 *   build/chapter-5                           the lesson: a short table, then the fault demos
 *   build/chapter-5 --world=4 --min-bytes=1K --max-bytes=64M --step-factor=2 [--algo=ring|tree|naive|hier|all] [--check]
 *   build/chapter-5 --topology=2x4 --algo=hier   hierarchical all-reduce on 2 nodes of 4 ranks
 *   build/chapter-5 --hw=h100-sxm --topology=2x8 --links=256M   which link is busy when, ring against hier
 *   build/chapter-5 --demo=timeout|crash|uneven|mismatch|flip   one failure story; exits 1 with the diagnosis
 *   build/chapter-5 --fault=kill:2@3          a training loop with your own faults (sim/faults.h)
 *   mpirun -np 4 build/chapter-5 --backend=mpi      the same table with one process per rank
 *   torchrun --no_python --nproc_per_node=4 build/chapter-5 --launch-check   can every rank reach rank 0?
 *
 * Read first: README.md beside this file; then lib/comm/comm.h.
 */
#include "chapter5.h"

#include "backend_table.h"
#include "base/cli.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "sim/faults.h"
#include "base/plot.h"
#include "comm/costmodel_hw.h"
#include "sim/launch.h"
#include "transfer/device.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CH5_OUT_DIR PLOT_OUT_ROOT "/chapter-5"
#define CH5_PROG "chapter-5" /* the name every message starts with */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: chapter-5 [options]\n"
            "\n"
            "With no options: the lesson (a short simulator table with the cost model, then every\n"
            "fault demo and its diagnosis); exits 0 when every demo failed the way it should.\n"
            "\n"
            "benchmark (nccl-tests' all_reduce_perf layout):\n"
            "  --backend=sim|mpi|nccl   communicator backend (default sim; mpi under mpirun)\n"
            "  --world=W                ranks, for thread backends (default 4)\n"
            "  --topology=NODESxGPUS    sim: the ranks as NODES nodes of GPUS each (e.g. 2x4); sets the world\n"
            "                           to NODES x GPUS (a different --world is refused); with --hw, the\n"
            "                           model prices the hops across nodes from that system's network\n"
            "  --min-bytes=SIZE         first message size, at least 4 (default 1K; K, M, G suffixes)\n"
            "  --max-bytes=SIZE         last message size (default 64M)\n"
            "  --step-factor=F          size multiplier per row, at least 2 (default 2)\n"
            "  --algo=ring|tree|naive|hier|all  simulator algorithm (default ring); hier: reduce-scatter in\n"
            "                           each node, all-reduce across nodes, all-gather in the node (the ring\n"
            "                           on one node); all: ring, tree, naive, and hier when --topology has\n"
            "                           more than one node and more than one GPU per node\n"
            "  --op=sum|avg             reduction (default sum)\n"
            "  --iters=N --warmup=N     timed and untimed iterations per size (default 20 and 5, as nccl-tests)\n"
            "  --check                  compare result checksums across ranks after every collective\n"
            "  --timeout=SECONDS        per-collective watchdog timeout, 0.01 to 1e6 (default 30; demos use 1);\n"
            "                           0 = no watchdog (mpi only: blocking MPI_Allreduce, as make bench runs it)\n"
            "  --plot                   all algorithms (1K..16M, factor 4 unless given): CSV, PNG, SVG\n"
            "                           {allreduce,busbw}-BACKEND.* in --out\n"
            "  --out=DIR                where --plot and --links write (default " CH5_OUT_DIR ")\n"
            "  --memory-bound           sim ring all-reduce against memcpy bandwidth (make bench)\n"
            "  --links=SIZE             which link is busy when during one all-reduce of SIZE on the modelled\n"
            "                           --hw (default a100) and --topology: ring and hier (or --algo's), each\n"
            "                           phase's links and how busy; CSV, PNG, SVG links.* in --out; runs nothing\n"
            "  --wall-clock             time the simulator's table with this host's wall clock (measured),\n"
            "                           not its modelled clock (the default: the same figures on any host)\n"
            "cost model (alpha-beta-gamma, printed beside the measurements):\n"
            "  --alpha-us=US            latency per message (default: fitted from a 4-byte all-reduce)\n"
            "  --beta-gbps=GB/s         link bandwidth (default: from memcpy measured now)\n"
            "  --gamma-gbps=GB/s        reduction bandwidth (default: measured now)\n"
            "  --cores=N                cores the ranks share (default: online CPUs)\n"
            "  --hw=NAME                price the model from a modelled GPU system instead of this machine:\n"
            "                           " HW_NAMES " (alpha and beta from its GPU-to-GPU\n"
            "                           link, gamma from its memory; --alpha-us, --beta-gbps and --gamma-gbps\n"
            "                           still replace them); --hw=list prints the profiles and their sources\n"
            "failures:\n"
            "  --demo=NAME|all          timeout, crash, uneven, mismatch, flip: run one story, exit 1\n"
            "  --fault=SPEC             faults on a 2-epoch training loop, e.g. kill:2@3, delay:1@2:3000,\n"
            "                           skip:3@4, flip:1@2 (KIND:R@K[:MS]: rank R, collective K from 1; comma-separated)\n"
            "launching:\n"
            "  --launch-check           ranks started torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):\n"
            "                           meet rank 0 over the TCP rendezvous and print its token; no GPU needed\n"
            "                           (the port: MASTER_PORT, +1 under torchrun's agent, or DDP_RENDEZVOUS_PORT)\n"
            "  --ifname=NAME            with --launch-check: rank 0 listens on interface NAME's address only (as\n"
            "                           NCCL_SOCKET_IFNAME picks NCCL's), not on every interface\n"
            "  --help                   this text\n");
}

enum { OPT_BACKEND = 256, OPT_WORLD, OPT_MIN, OPT_MAX, OPT_STEP, OPT_ALGO, OPT_OP, OPT_ITERS, OPT_WARMUP, OPT_CHECK,
       OPT_TIMEOUT, OPT_PLOT, OPT_MEMBOUND, OPT_ALPHA, OPT_BETA, OPT_GAMMA, OPT_CORES, OPT_DEMO, OPT_FAULT,
       OPT_LAUNCH_CHECK, OPT_IFNAME, OPT_OUT, OPT_HW, OPT_TOPOLOGY, OPT_WALL, OPT_LINKS };

/* --algo=ring|tree|naive|hier|all. "all" is ring, tree and naive, and hier
 * where it differs from the ring: on a topology of several nodes of several
 * ranks (opt->node_size is final: validation calls it again for "all"). */
static int parse_algo(const char *text, struct ch5_opts *opt)
{
    static const char *const names[] = {"ring", "tree", "naive", "hier", "all", NULL};
    static const enum comm_algo algos[] = {COMM_ALGO_RING, COMM_ALGO_TREE, COMM_ALGO_NAIVE, COMM_ALGO_HIER};
    int choice;
    int rc = cli_parse_choice("algo", text, names, &choice);
    if (rc < 0)
        return rc;
    int all = choice == 4, hier = opt->node_size > 1 && opt->node_size < opt->world;
    opt->nalgos = all ? 3 + hier : 1;
    for (int a = 0; a < opt->nalgos; a++)
        opt->algos[a] = algos[all ? a : choice];
    return 0;
}

/* --topology=NODESxGPUS: the world and the ranks per node. */
static int parse_topology(const char *text, struct ch5_opts *opt)
{
    int nodes, gpus;
    if (comm_topology_parse(text, &nodes, &gpus) < 0)
        return err_wrap(ERR_ARG, "--topology");
    if (nodes * gpus > 64)
        return err_set(ERR_ARG, "--topology: topology '%s': %d ranks, more than --world's 64", text, nodes * gpus);
    opt->world = nodes * gpus;
    opt->node_size = gpus;
    opt->model.node_size = gpus;
    return 0;
}

/* The sizes of the sweep (after --plot's and the lesson's defaults): at
 * least one float32 element, min <= max, so the table is never empty. Sizes
 * that are not a multiple of 4 are cut down to whole elements, as
 * nccl-tests' setupArgs does (count = size / wordSize). */
static int ch5_check_sizes(const struct ch5_opts *opt)
{
    if (opt->min_bytes < 4)
        return err_set(ERR_ARG, "--min-bytes: must be at least 4 (one float32 element), got %llu",
                       (unsigned long long)opt->min_bytes);
    if (opt->min_bytes > opt->max_bytes)
        return err_set(ERR_ARG, "--min-bytes (%llu) is larger than --max-bytes (%llu)",
                       (unsigned long long)opt->min_bytes, (unsigned long long)opt->max_bytes);
    return 0;
}

/* GB/s from a flag into seconds per byte. */
static int parse_gbps(const char *flag, const char *text, double *s_per_byte)
{
    double gbps;
    int rc = cli_parse_double_range(flag, text, 1e-9, 1e9, &gbps);
    if (rc == 0)
        *s_per_byte = 1.0 / (gbps * 1e9);
    return rc;
}

/* Everything the flags say, beyond the options the other files read. */
struct ch5_cli {
    struct ch5_opts opt;
    const char *demo, *out_dir, *ifname;
    int plot, membound, sizes_given, launch_check, world_given, lesson;
    int world_flag;          /* --world's value, before --topology sets the world */
    uint64_t links;          /* --links=SIZE; 0 = none */
    const char *topology;    /* --topology's text, NULL = none */
    const char *algo_text;   /* --algo's text: "all" depends on the topology, read last */
    struct cli_given given; /* which flags were given, to refuse those the run would ignore */
    double beta, gamma; /* seconds per byte from --beta-gbps / --gamma-gbps, 0: measure */
    char csv_path[PLOT_PATH_MAX], plot_path[PLOT_PATH_MAX];
};

static const struct option ch5_longopts[] = {
    {"backend", required_argument, 0, OPT_BACKEND}, {"world", required_argument, 0, OPT_WORLD},
    {"min-bytes", required_argument, 0, OPT_MIN},   {"max-bytes", required_argument, 0, OPT_MAX},
    {"step-factor", required_argument, 0, OPT_STEP}, {"algo", required_argument, 0, OPT_ALGO},
    {"op", required_argument, 0, OPT_OP},           {"iters", required_argument, 0, OPT_ITERS},
    {"warmup", required_argument, 0, OPT_WARMUP},   {"check", no_argument, 0, OPT_CHECK},
    {"timeout", required_argument, 0, OPT_TIMEOUT}, {"plot", no_argument, 0, OPT_PLOT},
    {"memory-bound", no_argument, 0, OPT_MEMBOUND}, {"alpha-us", required_argument, 0, OPT_ALPHA},
    {"beta-gbps", required_argument, 0, OPT_BETA},  {"gamma-gbps", required_argument, 0, OPT_GAMMA},
    {"cores", required_argument, 0, OPT_CORES},     {"demo", required_argument, 0, OPT_DEMO},
    {"fault", required_argument, 0, OPT_FAULT},     {"launch-check", no_argument, 0, OPT_LAUNCH_CHECK},
    {"ifname", required_argument, 0, OPT_IFNAME},   {"out", required_argument, 0, OPT_OUT},
    {"hw", required_argument, 0, OPT_HW},           {"topology", required_argument, 0, OPT_TOPOLOGY},
    {"wall-clock", no_argument, 0, OPT_WALL},       {"links", required_argument, 0, OPT_LINKS},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* Reads the flags into *cli. 0, or ERR_ARG naming the flag; --help prints
 * the usage and exits 0. */
static int ch5_parse(int argc, char **argv, struct ch5_cli *cli)
{
    struct ch5_opts *o = &cli->opt;
    const char *demo_names[16];
    ch5_demo_names(demo_names, 16);
    int choice, c, rc = 0;
    uint64_t v;
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":h", ch5_longopts, NULL)) != -1) {
        cli_given_add(&cli->given, c);
        switch (c) {
        case OPT_BACKEND:
            if ((rc = cli_parse_choice("backend", optarg, backend_table_comm_names(), &choice)) == 0)
                o->backend = backend_table_comm_names()[choice];
            break;
        case OPT_WORLD:
            rc = cli_parse_range("world", optarg, 1, 64, &v);
            cli->world_flag = (int)v;
            cli->world_given = 1;
            break;
        case OPT_TOPOLOGY: cli->topology = optarg; break;
        /* at least one float32 and min <= max: ch5_check_sizes(), once --plot's defaults are in */
        case OPT_MIN: rc = cli_parse_bytes("min-bytes", optarg, 0, UINT64_MAX, &o->min_bytes); break;
        case OPT_MAX:
            rc = cli_parse_bytes("max-bytes", optarg, 0, UINT64_MAX, &o->max_bytes);
            cli->sizes_given = 1;
            break;
        case OPT_STEP:
            /* nccl-tests multiplies by the factor only when it is above 1 (src/common.cu,
             * TimeTest) and otherwise steps by --stepbytes, which this program does not have */
            rc = cli_parse_range("step-factor", optarg, 2, UINT64_MAX, &o->step_factor);
            cli->sizes_given = 1;
            break;
        case OPT_ALGO:
            rc = parse_algo(optarg, o);
            cli->algo_text = optarg;
            break;
        case OPT_OP: {
            static const char *const ops[] = {"sum", "avg", NULL};
            if ((rc = cli_parse_choice("op", optarg, ops, &choice)) == 0)
                o->op = choice ? COMM_AVG : COMM_SUM;
            break;
        }
        case OPT_ITERS:
        case OPT_WARMUP:
            rc = cli_parse_range(c == OPT_ITERS ? "iters" : "warmup", optarg, c == OPT_ITERS, 100000, &v);
            *(c == OPT_ITERS ? &o->iters : &o->warmup) = (int)v;
            break;
        case OPT_CHECK: o->check = 1; break;
        case OPT_TIMEOUT: /* rejects inf and nan */
            rc = cli_parse_double_range("timeout", optarg, 0, COMM_MAX_TIMEOUT_S, &o->timeout_s);
            if (rc == 0 && o->timeout_s > 0 && o->timeout_s < COMM_MIN_TIMEOUT_S)
                rc = err_set(ERR_ARG, "--timeout: 0 (no watchdog) or %g to %g seconds, got '%s': a shorter watchdog "
                             "fires on ranks that are only waiting for a core", COMM_MIN_TIMEOUT_S,
                             COMM_MAX_TIMEOUT_S, optarg);
            if (rc == 0 && o->timeout_s == 0)
                o->timeout_s = COMM_NO_TIMEOUT;
            break;
        case OPT_PLOT: cli->plot = 1; break;
        case OPT_MEMBOUND: cli->membound = 1; break;
        case OPT_WALL: cli->opt.wall_clock = 1; break;
        case OPT_LINKS: rc = cli_parse_bytes("links", optarg, 4, 1ull << 40, &cli->links); break;
        case OPT_ALPHA: {
            double us;
            rc = cli_parse_double_range("alpha-us", optarg, 0, 1e9, &us);
            o->model.alpha_s = us * 1e-6;
            o->alpha_given = 1;
            break;
        }
        case OPT_BETA: rc = parse_gbps("beta-gbps", optarg, &cli->beta); break;
        case OPT_GAMMA: rc = parse_gbps("gamma-gbps", optarg, &cli->gamma); break;
        case OPT_CORES:
            rc = cli_parse_range("cores", optarg, 1, 4096, &v);
            o->model.cores = (int)v;
            break;
        case OPT_DEMO:
            if ((rc = cli_parse_choice("demo", optarg, demo_names, &choice)) == 0)
                cli->demo = demo_names[choice];
            break;
        case OPT_FAULT: o->fault = optarg; break;
        case OPT_LAUNCH_CHECK: cli->launch_check = 1; break;
        case OPT_IFNAME: rc = cli_parse_text("ifname", optarg, "a network interface", &cli->ifname); break;
        case OPT_OUT: rc = cli_parse_text("out", optarg, "a directory", &cli->out_dir); break;
        case OPT_HW:
            if ((rc = hw_flag_parse(optarg, &o->hw)) == 1)
                exit(CLI_EXIT_OK);
            break;
        case 'h': usage(stdout); exit(CLI_EXIT_OK);
        default: rc = cli_getopt_error(c, argv[optind - 1], ch5_longopts);
        }
    }
    if (rc == 0 && optind < argc)
        rc = err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
    if (rc == 0 && cli->world_given)
        o->world = cli->world_flag;
    if (rc == 0 && cli->topology && (rc = parse_topology(cli->topology, o)) == 0 && cli->world_given &&
        cli->world_flag != o->world)
        rc = err_set(ERR_ARG, "--world=%d conflicts with --topology=%s (%d ranks): give one of them", cli->world_flag,
                     cli->topology, o->world);
    if (rc == 0 && cli->algo_text) /* again, now that the topology is known */
        rc = parse_algo(cli->algo_text, o);
    cli->lesson = argc == 1;
    return rc;
}

/* A flag the chosen run would ignore is refused: the user asked for another
 * run than the one that would happen. */
static int ch5_refuse_unused(const struct ch5_cli *cli)
{
    const struct cli_given *g = &cli->given;
    /* what only the table (the sweep) reads */
    static const int table_only[] = {OPT_MIN, OPT_MAX, OPT_STEP, OPT_OP, OPT_ITERS, OPT_WARMUP, OPT_PLOT, OPT_OUT,
                                     OPT_ALPHA, OPT_BETA, OPT_GAMMA, OPT_CORES, OPT_MEMBOUND, OPT_HW, OPT_WALL, 0};
    if (cli->launch_check) {
        static const int all_but_timeout[] = {OPT_BACKEND, OPT_WORLD, OPT_TOPOLOGY, OPT_ALGO, OPT_CHECK, OPT_DEMO,
                                              OPT_FAULT, OPT_MIN, OPT_MAX, OPT_STEP, OPT_OP, OPT_ITERS, OPT_WARMUP,
                                              OPT_PLOT, OPT_OUT, OPT_ALPHA, OPT_BETA, OPT_GAMMA, OPT_CORES,
                                              OPT_MEMBOUND, OPT_HW, OPT_WALL, OPT_LINKS, 0};
        return cli_refuse_given(g, ch5_longopts, all_but_timeout,
                                "does nothing with --launch-check (it only meets rank 0 over TCP; --timeout and "
                                "--ifname apply)");
    }
    int rc = 0;
    if ((rc = cli_refuse_given(g, ch5_longopts, (const int[]){OPT_IFNAME, 0},
                               "does nothing without --launch-check (only its rendezvous listens on a port)")) < 0)
        return rc;
    if (cli->links &&
        (rc = cli_refuse_given(g, ch5_longopts,
                               (const int[]){OPT_BACKEND, OPT_MIN, OPT_MAX, OPT_STEP, OPT_OP, OPT_ITERS, OPT_WARMUP,
                                             OPT_PLOT, OPT_ALPHA, OPT_BETA, OPT_GAMMA, OPT_CORES, OPT_MEMBOUND,
                                             OPT_WALL, OPT_CHECK, OPT_DEMO, OPT_FAULT, 0},
                               "does nothing with --links (it draws the cost model's all-reduce on --hw's "
                               "--topology; nothing runs)")) < 0)
        return rc;
    if (cli->demo && (rc = cli_refuse_given(g, ch5_longopts,
                                            (const int[]){OPT_WORLD, OPT_TOPOLOGY, OPT_ALGO, OPT_CHECK, OPT_FAULT, 0},
                                            "does nothing with --demo (each story sets its own world, faults and "
                                            "checks; --timeout applies)")) < 0)
        return rc;
    if ((cli->demo || cli->opt.fault) &&
        (rc = cli_refuse_given(g, ch5_longopts, table_only,
                               "does nothing with --demo or --fault (they run a small training loop of 1024-float "
                               "all-reduces, no table)")) < 0)
        return rc;
    if (cli->membound &&
        (rc = cli_refuse_given(g, ch5_longopts,
                               (const int[]){OPT_MIN, OPT_STEP, OPT_ALGO, OPT_TOPOLOGY, OPT_ITERS, OPT_WARMUP,
                                             OPT_PLOT, OPT_OUT, OPT_ALPHA, OPT_BETA, OPT_GAMMA, OPT_HW,
                                             OPT_WALL, 0},
                               "does nothing with --memory-bound (it times the ring at --max-bytes, against memcpy)")) < 0)
        return rc;
    if (cli->opt.hw && (rc = cli_refuse_given(g, ch5_longopts, (const int[]){OPT_CORES, 0},
                                              "does nothing with --hw (each modelled GPU reduces its own data)")) < 0)
        return rc;
    if (!cli->plot && !cli->links &&
        (rc = cli_refuse_given(g, ch5_longopts, (const int[]){OPT_OUT, 0},
                               "does nothing without --plot or --links (only they write files)")) < 0)
        return rc;
    if (strcmp(cli->opt.backend, "sim") != 0) {
        char why[160];
        snprintf(why, sizeof why, "does nothing with --backend=%s: the library chooses its own algorithm (NCCL_ALGO, "
                 "Open MPI's coll_tuned parameters)", cli->opt.backend);
        if ((rc = cli_refuse_given(g, ch5_longopts, (const int[]){OPT_ALGO, 0}, why)) < 0)
            return rc;
        snprintf(why, sizeof why, "does nothing with --backend=%s: the simulator models a topology; the machines "
                 "the launcher started are the real one", cli->opt.backend);
        if ((rc = cli_refuse_given(g, ch5_longopts, (const int[]){OPT_TOPOLOGY, 0}, why)) < 0)
            return rc;
        snprintf(why, sizeof why, "does nothing with --backend=%s: its times are measured already (only the "
                 "simulator has a modelled clock)", cli->opt.backend);
        rc = cli_refuse_given(g, ch5_longopts, (const int[]){OPT_WALL, 0}, why);
    }
    return rc;
}

/* --links: ring and hier unless --algo names one of them (tree and naive
 * have no link timeline: the model charges their every level at the slowest
 * link), on two ranks or more, its files writable in --out. */
static int ch5_validate_links(struct ch5_cli *cli)
{
    struct ch5_opts *o = &cli->opt;
    if (!cli->algo_text || strcmp(cli->algo_text, "all") == 0) {
        o->algos[0] = COMM_ALGO_RING;
        o->algos[1] = COMM_ALGO_HIER;
        o->nalgos = o->node_size > 1 && o->node_size < o->world ? 2 : 1; /* on one node hier is the ring */
    }
    if (o->algos[0] == COMM_ALGO_TREE || o->algos[0] == COMM_ALGO_NAIVE)
        return err_set(ERR_ARG, "--links draws ring and hier (--algo=ring, hier or all), not %s: the model charges "
                       "its every level at the slowest link, so it cannot say which link a level uses",
                       comm_algo_name(o->algos[0]));
    if (o->world < 2)
        return err_set(ERR_ARG, "--links: one rank moves nothing: give --topology or --world of 2 or more");
    if (plot_paths(cli->out_dir, "links", cli->csv_path, cli->plot_path) < 0)
        return err_wrap(ERR_ARG, "--out");
    return plot_check(cli->out_dir, "links", "--out");
}

/* The flags together, and the defaults each mode implies. 0; ERR_ARG for a
 * usage error; another ERR_* for what only running can tell (a backend this
 * build lacks). */
static int ch5_validate(struct ch5_cli *cli)
{
    struct ch5_opts *o = &cli->opt;
    int unused = ch5_refuse_unused(cli);
    if (unused < 0)
        return unused;
    if ((cli->plot || cli->links) && (unused = fsutil_check_output_dir(cli->out_dir, "--out")) < 0) /* before any table */
        return cli_as_usage_error(unused);
    int launched = cli->launch_check ? 0 : launch_launcher_world(); /* --launch-check reads torchrun's itself */
    if (launched < 0)
        return launched;
    if (strcmp(o->backend, "sim") == 0 && launched > 1)
        return err_set(ERR_ARG, "--backend=sim: a launcher (%s) started this process as one of %d: each would run a "
                                "whole simulated job; pass --backend=mpi under mpirun, or --launch-check",
                       launch_launcher_name(), launched);
    if (cli->links)
        return ch5_validate_links(cli);
    if (cli->launch_check) {
        if (o->timeout_s == COMM_NO_TIMEOUT)
            return err_set(ERR_ARG, "--launch-check needs a timeout above 0 (a rank that never comes must be named)");
        return 0;
    }
    if (o->timeout_s == COMM_NO_TIMEOUT && strcmp(o->backend, "mpi") != 0)
        return err_set(ERR_ARG, "--timeout=0 (no watchdog) is for --backend=mpi only; %s always has one", o->backend);
    if ((cli->demo || o->fault) && strcmp(o->backend, "sim") != 0)
        return err_set(ERR_ARG, "--demo and --fault need --backend=sim (the simulator injects the faults)");
    if (o->fault) { /* a bad spec is a usage error: check it before starting anything */
        struct fault *faults;
        int nfaults;
        int rc = faults_parse(o->fault, o->world, &faults, &nfaults);
        if (rc < 0)
            return rc;
        free(faults);
    }
    if (cli->demo || o->fault)
        return 0;
    int threads = launch_threads(o->backend); /* an unbuilt backend stops here, before any output file */
    if (threads < 0)
        return threads;
    if (cli->world_given && !threads)
        return err_set(ERR_ARG, "--world=%d: this process is one rank of a job its launcher started (mpirun -np W, "
                       "torchrun --nproc_per_node=W): the launcher sets the world, not --world", o->world);
    if (cli->lesson) { /* short enough for `make demo` */
        o->max_bytes = 1 << 20;
        o->step_factor = 4;
        o->iters = 10;
        o->warmup = 2;
    }
    if (cli->plot) { /* three algorithms: a coarser sweep unless sizes were given */
        if (o->nalgos == 1 && o->algos[0] == COMM_ALGO_RING)
            parse_algo("all", o);
        if (!cli->sizes_given) {
            o->max_bytes = 16 << 20;
            o->step_factor = 4;
        }
        char name[64];
        snprintf(name, sizeof name, "allreduce-%s", o->backend);
        int rc = plot_paths(cli->out_dir, name, cli->csv_path, NULL);
        snprintf(name, sizeof name, "busbw-%s", o->backend);
        if (rc < 0 || plot_paths(cli->out_dir, name, NULL, cli->plot_path) < 0)
            return err_wrap(ERR_ARG, "--out");
        o->csv_path = cli->csv_path;
    }
    if (cli->membound) /* one size: the largest */
        o->min_bytes = o->max_bytes;
    int rc = ch5_check_sizes(o);
    if (rc < 0)
        return rc;
    /* each rank holds a send, a receive and a checking buffer of max-bytes: refuse what
     * cannot fit rather than be killed by the OOM killer halfway through the table */
    char what[96];
    size_t bytes;
    snprintf(what, sizeof what, "--max-bytes=%llu: 3 buffers on each of %d rank(s)", (unsigned long long)o->max_bytes,
             threads ? o->world : 1);
    return cli_as_usage_error(mem_check_array(what, o->max_bytes, 3 * (uint64_t)(threads ? o->world : 1), &bytes));
}

/* Runs what the flags asked for; returns the exit status. */
static int ch5_run(struct ch5_cli *cli)
{
    struct ch5_opts *o = &cli->opt;
    if (cli->launch_check)
        return ch5_launch_check(o->timeout_s > 0 ? o->timeout_s : COMM_DEFAULT_TIMEOUT_S, cli->ifname) < 0 ? cli_error(CH5_PROG)
                                                                                              : CLI_EXIT_OK;
    if (cli->demo) {
        ch5_demos(o, cli->demo, 0);
        return CLI_EXIT_FAILED; /* a demo is a failure story: it ends the way the job would */
    }
    if (o->fault)
        return ch5_fault_run(o) < 0 ? cli_error(CH5_PROG) : CLI_EXIT_OK;
    if (cli->links) { /* the simulator's model: --hw's, or its default profile's */
        if (!o->hw && hw_profile_find(DEVICE_GPU_DEFAULT, &o->hw) < 0)
            return cli_error(CH5_PROG);
        costmodel_from_hw(&o->model, o->hw);
        return ch5_links(o, cli->links, cli->csv_path, cli->plot_path) < 0 ? cli_error(CH5_PROG) : CLI_EXIT_OK;
    }

    if (o->hw) { /* the profile's alpha, beta and gamma, under what the flags gave */
        struct costmodel given = o->model;
        costmodel_from_hw(&o->model, o->hw);
        if (o->alpha_given)
            o->model.alpha_s = given.alpha_s;
        o->alpha_given = 1; /* the profile's or the flag's: not fitted to this machine */
    }
    if (cli->beta > 0)
        o->model.beta_s_per_b = cli->beta;
    if (cli->gamma > 0)
        o->model.gamma_s_per_b = cli->gamma;
    ch5_calibrate(o, stdout);
    if (cli->membound)
        return ch5_memory_bound(o) < 0 ? cli_error(CH5_PROG) : CLI_EXIT_OK;

    uint64_t wrong = 0;
    if (ch5_sweep(o, &wrong, NULL) < 0)
        return cli_error(CH5_PROG);
    if (cli->plot && launch_leader()) {
        int rc = plot_render("chapters/05-allreduce/plot.gp", o->csv_path, cli->plot_path, "--out");
        if (rc == ERR_UNSUPPORTED) /* no gnuplot: the CSV is there, say so and go on */
            fprintf(stderr, "%s: %s\n", CH5_PROG, err_msg());
        else if (rc < 0)
            return cli_error(CH5_PROG);
        else
            printf("# plot: %s.png and .svg (data: %s)\n", cli->plot_path, o->csv_path);
    }
    if (wrong) {
        err_set(ERR_STATE, "%llu wrong elements (see the #wrong columns)", (unsigned long long)wrong);
        return cli_error(CH5_PROG);
    }
    if (cli->lesson)
        return ch5_demos(o, "all", 1) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    struct ch5_cli cli = {
        .opt = {
            .backend = "sim",
            .world = 4,
            .min_bytes = 1024,
            .max_bytes = 64ull << 20,
            .step_factor = 2,
            .algos = {COMM_ALGO_RING},
            .nalgos = 1,
            .op = COMM_SUM,
            .iters = 20, /* nccl-tests' defaults: 20 timed, 5 warm-up iterations */
            .warmup = 5,
        },
        .out_dir = CH5_OUT_DIR,
    };
    if (ch5_parse(argc, argv, &cli) < 0)
        return cli_fail(CH5_PROG);
    int rc = ch5_validate(&cli);
    if (rc == ERR_ARG)
        return cli_fail(CH5_PROG);
    if (rc < 0)
        return cli_error(CH5_PROG);
    return cli_exit(CH5_PROG, ch5_run(&cli)); /* tables into a full disk are no tables */
}
