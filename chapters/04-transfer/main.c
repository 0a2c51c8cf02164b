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
 *   build/chapter-4 --demo=race         a loader slot handed back too early, caught by the detector
 *   build/chapter-4 --bench             the benchmarks' verdicts (make bench)
 *
 * The logic lives in lib/transfer/ (device.h, pinned_pool.h, prefetch.h) and
 * sim/device_sim.h; this program teaches and measures.
 */
#include "chapter4.h"

#include "base/cli.h"
#include "base/error.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
            "  --link=NAME             the simulated link: pcie3, pcie4, pcie5 (x16 each; default " LINK_DEFAULT ")\n"
            "  --link-gbps=G           ... or a link of G GB/s (1e9 bytes/s)\n"
            "  --link-latency-us=US    its fixed cost per copy (default 5 us)\n"
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

int ch4_device_open(const struct ch4_opts *o, const struct link_profile *link, device_t **out)
{
    struct device_config cfg;
    device_config_default(&cfg);
    cfg.backend = o->backend;
    cfg.link = *link;
    return device_open(&cfg, out);
}

static int ch4_gate_open;

static void ch4_gate_fn(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&ch4_gate_open, __ATOMIC_ACQUIRE))
        usleep(100);
}

int ch4_gate_hold(device_stream_t *s)
{
    __atomic_store_n(&ch4_gate_open, 0, __ATOMIC_RELEASE);
    struct device_kernel gate = {.name = "gate", .batch = -1, .fn = ch4_gate_fn};
    return device_launch(s, &gate);
}

void ch4_gate_release(void) { __atomic_store_n(&ch4_gate_open, 1, __ATOMIC_RELEASE); }

const char *ch4_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = (double)bytes;
    while (v >= 1024 && u < 4)
        v /= 1024, u++;
    if (v == (double)(uint64_t)v)
        snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

enum { O_BACKEND = 256, O_LINK, O_GBPS, O_LATENCY, O_POOL, O_MIN, O_MAX, O_DATA, O_BATCH, O_STEPS, O_WARMUP,
       O_WORKERS, O_COMPUTE, O_LOOP_GBPS, O_DEMO, O_BENCH, O_OUT, O_PLOT, O_ONLY };

/* A count flag in [lo, hi]. */
static int ch4_count(const char *flag, const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    int rc = cli_parse_u64(flag, text, out);
    if (rc == 0 && (*out < lo || *out > hi))
        rc = err_set(ERR_ARG, "--%s: expected %llu to %llu, got %s", flag, (unsigned long long)lo,
                     (unsigned long long)hi, text);
    return rc;
}

static int ch4_gbps(const char *flag, const char *text, double *out)
{
    int rc = cli_parse_double(flag, text, out);
    if (rc == 0 && !(*out > 0 && *out <= 10000))
        rc = err_set(ERR_ARG, "--%s: expected more than 0 and at most 10000 GB/s, got %s", flag, text);
    return rc;
}

/* Every size against every other and against the machine, before anything
 * starts. 0 or ERR_ARG naming the flag. */
static int ch4_validate(struct ch4_opts *o, int max_given)
{
    uint64_t memory = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    char a[32], b[32];
    if (o->pool_bytes == 0)
        return err_set(ERR_ARG, "--pool: a pinned pool of 0 bytes holds nothing");
    if (o->pool_bytes > memory / 2)
        return err_set(ERR_ARG, "--pool: %s is more than half this machine's memory (%s): pinned memory cannot be "
                       "swapped out", ch4_size(o->pool_bytes, a, sizeof a), ch4_size(memory, b, sizeof b));
    if (!max_given && o->max_bytes > o->pool_bytes) /* the default sweep stops at what the pool holds */
        o->max_bytes = o->pool_bytes;
    if (o->min_bytes == 0)
        return err_set(ERR_ARG, "--min-bytes: a copy of 0 bytes moves nothing: give at least 1");
    if (o->max_bytes < o->min_bytes)
        return err_set(ERR_ARG, "--max-bytes (%llu) is smaller than --min-bytes (%llu)",
                       (unsigned long long)o->max_bytes, (unsigned long long)o->min_bytes);
    if (o->max_bytes > o->pool_bytes)
        return err_set(ERR_ARG, "--max-bytes: %llu bytes do not fit in the pinned pool of %llu bytes (--pool=%s): "
                       "one copy's pinned buffer comes from it", (unsigned long long)o->max_bytes,
                       (unsigned long long)o->pool_bytes, ch4_size(o->pool_bytes, a, sizeof a));
    return 0;
}

int main(int argc, char **argv)
{
    struct ch4_opts o = {
        .min_bytes = 64 << 10, .max_bytes = 256u << 20, .pool_bytes = 512u << 20, .batch = 1024, .steps = 48,
        .warmup = 4, .workers = 1, .compute_s = -1, .out_dir = CH4_OUT_DIR,
    };
    static const struct option longopts[] = {
        {"backend", required_argument, 0, O_BACKEND}, {"link", required_argument, 0, O_LINK},
        {"link-gbps", required_argument, 0, O_GBPS},  {"link-latency-us", required_argument, 0, O_LATENCY},
        {"pool", required_argument, 0, O_POOL},       {"min-bytes", required_argument, 0, O_MIN},
        {"max-bytes", required_argument, 0, O_MAX},   {"data", required_argument, 0, O_DATA},
        {"batch", required_argument, 0, O_BATCH},     {"steps", required_argument, 0, O_STEPS},
        {"warmup", required_argument, 0, O_WARMUP},   {"workers", required_argument, 0, O_WORKERS},
        {"compute-ms", required_argument, 0, O_COMPUTE}, {"loop-gbps", required_argument, 0, O_LOOP_GBPS},
        {"demo", required_argument, 0, O_DEMO},       {"bench", no_argument, 0, O_BENCH},
        {"out", required_argument, 0, O_OUT},         {"plot", no_argument, 0, O_PLOT},
        {"only", required_argument, 0, O_ONLY},       {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *link_name = LINK_DEFAULT, *demo = NULL, *only = NULL;
    double gbps = -1, latency_us = -1, loop_gbps = 1, compute_ms;
    int bench = 0, max_given = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case O_BACKEND:
            o.backend = optarg;
            if (strcmp(optarg, "sim") != 0 && strcmp(optarg, "cuda") != 0)
                rc = err_set(ERR_ARG, "--backend: expected sim or cuda, got '%s'", optarg);
            break;
        case O_LINK: link_name = optarg; break;
        case O_GBPS: rc = ch4_gbps("link-gbps", optarg, &gbps); break;
        case O_LATENCY:
            rc = cli_parse_double("link-latency-us", optarg, &latency_us);
            if (rc == 0 && !(latency_us >= 0 && latency_us <= 1e6))
                rc = err_set(ERR_ARG, "--link-latency-us: expected 0 to 1000000, got %s", optarg);
            break;
        case O_POOL: rc = cli_parse_bytes("pool", optarg, &o.pool_bytes); break;
        case O_MIN: rc = cli_parse_bytes("min-bytes", optarg, &o.min_bytes); break;
        case O_MAX:
            rc = cli_parse_bytes("max-bytes", optarg, &o.max_bytes);
            max_given = 1;
            break;
        case O_DATA: o.data = optarg; break;
        case O_BATCH: rc = ch4_count("batch", optarg, 1, 1u << 20, &o.batch); break;
        case O_STEPS: rc = ch4_count("steps", optarg, 1, 100000, &o.steps); break;
        case O_WARMUP: rc = ch4_count("warmup", optarg, 0, 100000, &o.warmup); break;
        case O_WORKERS: rc = ch4_count("workers", optarg, 0, 64, &o.workers); break;
        case O_COMPUTE:
            rc = cli_parse_double("compute-ms", optarg, &compute_ms);
            if (rc == 0 && !(compute_ms >= 0 && compute_ms <= 10000))
                rc = err_set(ERR_ARG, "--compute-ms: expected 0 to 10000, got %s", optarg);
            o.compute_s = compute_ms * 1e-3;
            break;
        case O_LOOP_GBPS: rc = ch4_gbps("loop-gbps", optarg, &loop_gbps); break;
        case O_DEMO:
            demo = optarg;
            if (strcmp(demo, "race") != 0)
                rc = err_set(ERR_ARG, "--demo: unknown demo '%s' (race)", demo);
            break;
        case O_BENCH: bench = 1; break;
        case O_OUT: o.out_dir = optarg; break;
        case O_PLOT: break; /* the default run is the plotted lesson */
        case O_ONLY:
            only = optarg;
            if (strcmp(only, "sweep") != 0 && strcmp(only, "pinning") != 0 && strcmp(only, "loop") != 0)
                rc = err_set(ERR_ARG, "--only: expected sweep, pinning or loop, got '%s'", only);
            break;
        case 'h': ch4_usage(stdout); return 0;
        case ':':
            err_set(ERR_ARG, "option '%s' needs a value (%s=VALUE)", argv[optind - 1], argv[optind - 1]);
            return cli_fail("chapter-4");
        default:
            err_set(ERR_ARG, "unrecognized option '%s'", argv[optind - 1]);
            return cli_fail("chapter-4");
        }
        if (rc < 0)
            return cli_fail("chapter-4");
    }
    if (optind < argc) {
        err_set(ERR_ARG, "unexpected argument '%s'", argv[optind]);
        return cli_fail("chapter-4");
    }
    /* validate: every size and link before anything starts */
    if (link_profile_find(link_name, &o.link) || link_profile_set(&o.link, gbps, latency_us)) {
        err_wrap(ERR_ARG, "--link");
        return cli_fail("chapter-4");
    }
    o.loop_link = o.link;
    link_profile_set(&o.loop_link, loop_gbps, -1);
    if (ch4_validate(&o, max_given))
        return cli_fail("chapter-4");

    int rc;
    if (demo) {
        rc = ch4_demo_race(&o);
    } else if (bench) {
        rc = ch4_bench(&o);
    } else {
        rc = 0;
        if (rc == 0 && (!only || strcmp(only, "sweep") == 0))
            rc = ch4_sweep(&o);
        if (rc == 0 && (!only || strcmp(only, "pinning") == 0))
            rc = ch4_pinning(&o);
        if (rc == 0 && (!only || strcmp(only, "loop") == 0))
            rc = ch4_loop(&o);
    }
    if (rc) {
        fprintf(stderr, "chapter-4: %s\n", err_msg());
        return 1;
    }
    return 0;
}
