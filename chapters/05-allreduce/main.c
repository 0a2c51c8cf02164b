/* chapter-5: all-reduce. Every rank ends a step with the same averaged
 * gradient; this program measures how fast, in nccl-tests' table layout, and
 * shows how jobs fail when one rank does not come (the fault demos).
 *
 *   build/chapter-5                           the lesson: a short table, then the fault demos
 *   build/chapter-5 --world=4 --min-bytes=1K --max-bytes=64M --step-factor=2 [--algo=ring|tree|naive|all] [--check]
 *   build/chapter-5 --demo=timeout|crash|uneven|mismatch|flip   one failure story; exits 1 with the diagnosis
 *   build/chapter-5 --fault=kill:2@3          a training loop with your own faults (sim/faults.h)
 *   mpirun -np 4 build/chapter-5 --backend=mpi      the same table with one process per rank
 *   torchrun --no_python --nproc_per_node=4 build/chapter-5 --launch-check   can every rank reach rank 0?
 *
 * Read first: README.md beside this file; then lib/comm/comm.h.
 */
#include "chapter5.h"

#include "base/cli.h"
#include "base/error.h"
#include "sim/faults.h"
#include "base/plot.h"
#include "sim/launch.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CH5_OUT_DIR "notebooks-out/chapter-5"

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
            "  --min-bytes=SIZE         first message size, at least 4 (default 1K; K, M, G suffixes)\n"
            "  --max-bytes=SIZE         last message size (default 64M)\n"
            "  --step-factor=F          size multiplier per row, at least 2 (default 2)\n"
            "  --algo=ring|tree|naive|all  simulator algorithm (default ring)\n"
            "  --op=sum|avg             reduction (default sum)\n"
            "  --iters=N --warmup=N     timed and untimed iterations per size (default 20 and 5, as nccl-tests)\n"
            "  --check                  compare result checksums across ranks after every collective\n"
            "  --timeout=SECONDS        per-collective watchdog timeout, at most 1e6 (default 30; demos use 1);\n"
            "                           0 = no watchdog (mpi only: blocking MPI_Allreduce, as make bench runs it)\n"
            "  --plot                   all algorithms (1K..16M, factor 4 unless given): CSV, PNG, SVG\n"
            "                           {allreduce,busbw}-BACKEND.* in --out\n"
            "  --out=DIR                where --plot writes (default " CH5_OUT_DIR ")\n"
            "  --memory-bound           sim ring all-reduce against memcpy bandwidth (make bench)\n"
            "cost model (alpha-beta-gamma, printed beside the measurements):\n"
            "  --alpha-us=US            latency per message (default: fitted from a 4-byte all-reduce)\n"
            "  --beta-gbps=GB/s         link bandwidth (default: from memcpy measured now)\n"
            "  --gamma-gbps=GB/s        reduction bandwidth (default: measured now)\n"
            "  --cores=N                cores the ranks share (default: online CPUs)\n"
            "failures:\n"
            "  --demo=NAME|all          timeout, crash, uneven, mismatch, flip: run one story, exit 1\n"
            "  --fault=SPEC             faults on a 2-epoch training loop, e.g. kill:2@3, delay:1@2:3000,\n"
            "                           skip:3@4, flip:1@2 (KIND:RANK@COLLECTIVE[:MS], comma-separated)\n"
            "launching:\n"
            "  --launch-check           ranks started torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):\n"
            "                           meet rank 0 over the TCP rendezvous and print its token; no GPU needed\n"
            "                           (the port: MASTER_PORT, +1 under torchrun's agent, or DDP_RENDEZVOUS_PORT)\n"
            "  --help                   this text\n");
}

enum { OPT_BACKEND = 256, OPT_WORLD, OPT_MIN, OPT_MAX, OPT_STEP, OPT_ALGO, OPT_OP, OPT_ITERS, OPT_WARMUP, OPT_CHECK,
       OPT_TIMEOUT, OPT_PLOT, OPT_MEMBOUND, OPT_ALPHA, OPT_BETA, OPT_GAMMA, OPT_CORES, OPT_DEMO, OPT_FAULT,
       OPT_LAUNCH_CHECK, OPT_OUT };

static int parse_algo(const char *text, struct ch5_opts *opt)
{
    if (strcmp(text, "all") == 0) {
        opt->algos[0] = COMM_ALGO_RING, opt->algos[1] = COMM_ALGO_TREE, opt->algos[2] = COMM_ALGO_NAIVE;
        opt->nalgos = 3;
        return 0;
    }
    opt->nalgos = 1;
    int rc = comm_algo_parse(text, &opt->algos[0]);
    return rc < 0 ? err_wrap(rc, "--algo") : 0;
}

/* The sizes of the sweep (after --plot's and the lesson's defaults): at
 * least one float32 element, min <= max, so the table is never empty.
 * --step-factor >= 2 is checked when parsed: nccl-tests multiplies by the
 * factor only when it is above 1 (src/common.cu, TimeTest) and otherwise
 * steps by --stepbytes, which this program does not have. Sizes that are not
 * a multiple of 4 are cut down to whole elements, as nccl-tests' setupArgs
 * does (count = size / wordSize). */
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
    if (cli_parse_double(flag, text, &gbps) < 0)
        return ERR_ARG;
    if (gbps <= 0)
        return err_set(ERR_ARG, "--%s: must be positive, got %s", flag, text);
    *s_per_byte = 1.0 / (gbps * 1e9);
    return 0;
}

int main(int argc, char **argv)
{
    struct ch5_opts opt = {
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
    };
    static const struct option longopts[] = {
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
        {"out", required_argument, 0, OPT_OUT},         {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *demo = NULL, *out_dir = CH5_OUT_DIR;
    int plot = 0, membound = 0, sizes_given = 0, launch_check = 0, world_given = 0;
    char csv_path[PLOT_PATH_MAX], plot_path[PLOT_PATH_MAX];
    double beta = 0, gamma = 0;
    uint64_t v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case OPT_BACKEND: opt.backend = optarg; break;
        case OPT_WORLD:
            rc = cli_parse_u64("world", optarg, &v);
            if (rc == 0 && (v < 1 || v > 64))
                rc = err_set(ERR_ARG, "--world: must be 1 .. 64, got %s", optarg);
            opt.world = (int)v;
            world_given = 1;
            break;
        case OPT_MIN:
            rc = cli_parse_bytes("min-bytes", optarg, &opt.min_bytes);
            break;
        case OPT_MAX:
            rc = cli_parse_bytes("max-bytes", optarg, &opt.max_bytes);
            sizes_given = 1;
            break;
        case OPT_STEP:
            sizes_given = 1;
            rc = cli_parse_u64("step-factor", optarg, &opt.step_factor);
            if (rc == 0 && opt.step_factor < 2)
                rc = err_set(ERR_ARG, "--step-factor: must be at least 2, got %s", optarg);
            break;
        case OPT_ALGO: rc = parse_algo(optarg, &opt); break;
        case OPT_OP: rc = comm_op_parse(optarg, &opt.op) < 0 ? err_wrap(ERR_ARG, "--op") : 0; break;
        case OPT_ITERS:
        case OPT_WARMUP:
            rc = cli_parse_u64(c == OPT_ITERS ? "iters" : "warmup", optarg, &v);
            if (rc == 0 && (v > 100000 || (c == OPT_ITERS && v == 0)))
                rc = err_set(ERR_ARG, "--%s: out of range: %s", c == OPT_ITERS ? "iters" : "warmup", optarg);
            *(c == OPT_ITERS ? &opt.iters : &opt.warmup) = (int)v;
            break;
        case OPT_CHECK: opt.check = 1; break;
        case OPT_TIMEOUT:
            rc = cli_parse_double("timeout", optarg, &opt.timeout_s); /* rejects inf and nan */
            if (rc == 0 && (opt.timeout_s < 0 || opt.timeout_s > COMM_MAX_TIMEOUT_S))
                rc = err_set(ERR_ARG, "--timeout: must be 0 .. %g seconds, got %s", COMM_MAX_TIMEOUT_S, optarg);
            if (rc == 0 && opt.timeout_s == 0)
                opt.timeout_s = COMM_NO_TIMEOUT;
            break;
        case OPT_PLOT: plot = 1; break;
        case OPT_MEMBOUND: membound = 1; break;
        case OPT_ALPHA: {
            double us;
            rc = cli_parse_double("alpha-us", optarg, &us);
            if (rc == 0 && us < 0)
                rc = err_set(ERR_ARG, "--alpha-us: must not be negative, got %s", optarg);
            opt.model.alpha_s = us * 1e-6;
            opt.alpha_given = 1;
            break;
        }
        case OPT_BETA: rc = parse_gbps("beta-gbps", optarg, &beta); break;
        case OPT_GAMMA: rc = parse_gbps("gamma-gbps", optarg, &gamma); break;
        case OPT_CORES:
            rc = cli_parse_u64("cores", optarg, &v);
            if (rc == 0 && (v < 1 || v > 4096))
                rc = err_set(ERR_ARG, "--cores: must be 1 .. 4096, got %s", optarg);
            opt.model.cores = (int)v;
            break;
        case OPT_DEMO: demo = optarg; break;
        case OPT_FAULT: opt.fault = optarg; break;
        case OPT_LAUNCH_CHECK: launch_check = 1; break;
        case OPT_OUT: out_dir = optarg; break;
        case 'h': usage(stdout); return 0;
        case ':': /* opterr = 0: the messages are ours, naming the option */
            err_set(ERR_ARG, "option '%s' needs a value (%s=VALUE)", argv[optind - 1], argv[optind - 1]);
            return cli_fail(argv[0]);
        default:
            err_set(ERR_ARG, "unrecognized option '%s'", argv[optind - 1]);
            return cli_fail(argv[0]);
        }
        if (rc < 0)
            return cli_fail(argv[0]);
    }
    if (optind < argc) {
        err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
        return cli_fail(argv[0]);
    }
    if (launch_check) {
        if (opt.timeout_s == COMM_NO_TIMEOUT) {
            err_set(ERR_ARG, "--launch-check needs a timeout above 0 (a rank that never comes must be named)");
            return cli_fail(argv[0]);
        }
        if (ch5_launch_check(opt.timeout_s > 0 ? opt.timeout_s : COMM_DEFAULT_TIMEOUT_S) < 0) {
            fprintf(stderr, "chapter-5: %s\n", err_msg());
            return 1;
        }
        return 0;
    }
    if (opt.timeout_s == COMM_NO_TIMEOUT && strcmp(opt.backend, "mpi") != 0) {
        err_set(ERR_ARG, "--timeout=0 (no watchdog) is for --backend=mpi only; %s always has one", opt.backend);
        return cli_fail(argv[0]);
    }
    if ((demo || opt.fault) && strcmp(opt.backend, "sim") != 0) {
        err_set(ERR_ARG, "--demo and --fault need --backend=sim (the simulator injects the faults)");
        return cli_fail(argv[0]);
    }

    if (opt.fault) { /* a bad spec is a usage error: check it before starting anything */
        struct fault *faults;
        int nfaults;
        if (faults_parse(opt.fault, opt.world, &faults, &nfaults) < 0)
            return cli_fail(argv[0]);
        free(faults);
    }
    if (demo) {
        int bad = ch5_demos(&opt, demo, 0);
        if (bad == ERR_ARG)
            return cli_fail(argv[0]);
        return 1; /* a demo is a failure story: it ends the way the job would */
    }
    if (opt.fault) {
        int rc = ch5_fault_run(&opt);
        if (rc < 0) {
            fprintf(stderr, "chapter-5: %s\n", err_msg());
            return 1;
        }
        return 0;
    }

    int threads = launch_threads(opt.backend); /* an unknown or unbuilt backend stops here, before any output file */
    if (threads < 0) {
        fprintf(stderr, "chapter-5: %s\n", err_msg());
        return 1;
    }
    if (world_given && !threads) {
        err_set(ERR_ARG, "--world=%d: this process is one rank of a job its launcher started (mpirun -np W, "
                "torchrun --nproc_per_node=W): the launcher sets the world, not --world", opt.world);
        return cli_fail(argv[0]);
    }
    /* each rank holds a send, a receive and a checking buffer of max-bytes: refuse what
     * cannot fit rather than be killed by the OOM killer halfway through the table */
    double ranks_here = threads ? opt.world : 1;
    double need = 3.0 * (double)opt.max_bytes * ranks_here;
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > 0.8 * have) {
        err_set(ERR_ARG, "--max-bytes=%llu needs %.1f GiB for %g rank(s), more than this machine's %.1f GiB allows",
                (unsigned long long)opt.max_bytes, need / (1 << 30), ranks_here, have / (1 << 30));
        return cli_fail(argv[0]);
    }
    int lesson = argc == 1;
    if (lesson) { /* short enough for `make demo` */
        opt.max_bytes = 1 << 20;
        opt.step_factor = 4;
        opt.iters = 10;
        opt.warmup = 2;
    }
    if (plot) { /* three algorithms: a coarser sweep unless sizes were given */
        if (opt.nalgos == 1 && opt.algos[0] == COMM_ALGO_RING)
            parse_algo("all", &opt);
        if (!sizes_given) {
            opt.max_bytes = 16 << 20;
            opt.step_factor = 4;
        }
        char name[64];
        snprintf(name, sizeof name, "allreduce-%s", opt.backend);
        int rc = plot_paths(out_dir, name, csv_path, NULL);
        snprintf(name, sizeof name, "busbw-%s", opt.backend);
        if (rc < 0 || plot_paths(out_dir, name, NULL, plot_path) < 0) {
            err_wrap(ERR_ARG, "--out");
            return cli_fail(argv[0]);
        }
        opt.csv_path = csv_path;
    }
    if (membound) /* one size: the largest */
        opt.min_bytes = opt.max_bytes;
    if (ch5_check_sizes(&opt) < 0)
        return cli_fail(argv[0]);
    if (beta > 0)
        opt.model.beta_s_per_b = beta;
    if (gamma > 0)
        opt.model.gamma_s_per_b = gamma;
    ch5_calibrate(&opt, stdout);
    if (beta > 0)
        opt.model.beta_s_per_b = beta;
    if (gamma > 0)
        opt.model.gamma_s_per_b = gamma;

    if (membound) {
        if (ch5_memory_bound(&opt) < 0) {
            fprintf(stderr, "chapter-5: %s\n", err_msg());
            return 1;
        }
        return 0;
    }

    uint64_t wrong = 0;
    if (ch5_sweep(&opt, &wrong, NULL) < 0) {
        fprintf(stderr, "chapter-5: %s\n", err_msg());
        return 1;
    }
    if (plot) {
        int rc = launch_leader() ? plot_render("chapters/05-allreduce/plot.gp", opt.csv_path, plot_path) : 0;
        if (rc == ERR_UNSUPPORTED)
            fprintf(stderr, "chapter-5: %s\n", err_msg());
        else if (rc < 0) {
            fprintf(stderr, "chapter-5: %s\n", err_msg());
            return 1;
        } else if (launch_leader()) {
            printf("# plot: %s.png and .svg (data: %s)\n", plot_path, opt.csv_path);
        }
    }
    if (wrong) {
        fprintf(stderr, "chapter-5: %llu wrong elements (see the #wrong columns)\n", (unsigned long long)wrong);
        return 1;
    }
    if (lesson)
        return ch5_demos(&opt, "all", 1) == 0 ? 0 : 1;
    return 0;
}
