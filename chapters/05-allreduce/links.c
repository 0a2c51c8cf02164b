/* links: which link is busy when during one all-reduce on a modelled
 * cluster (--links=SIZE). The cost model's time for ring and hier, cut into
 * its steps (costmodel_allreduce_spans): per phase, how long each link class
 * works and how much of it; then a CSV and a Gantt chart of the spans, one
 * row a link class and algorithm, bars as tall as the share of the links in
 * use. Nothing runs: it is the formula the simulator charges every
 * all-reduce (sim/comm_sim.c), drawn out.
 *
 * Where it sits: called by main.c; reads the model main.c priced from --hw
 * and --topology. */
#include "chapter5.h"

#include "base/error.h"
#include "base/plot.h"
#include "base/units.h"

#include <stdlib.h>
#include <string.h>

#define LINKS_LANES 3 /* costmodel_lane: inside, across, reduce */

/* What each lane is called on this system: its GPU-to-GPU link, its network. */
static void links_lane_names(const struct hw_profile *hw, const char *names[LINKS_LANES])
{
    const struct hw_net *net = hw_net_of(hw);
    names[COSTMODEL_LANE_INSIDE] = hw->nvlink_bidir_bps > 0 ? "NVLink" : "PCIe";
    names[COSTMODEL_LANE_ACROSS] = net ? net->title : "network";
    names[COSTMODEL_LANE_REDUCE] = "GPU adds";
}

/* The share of a lane in words: "1 of 8 ports", "7 of 8 GPUs' links". */
static void links_share(enum costmodel_lane lane, double share, int node_gpus, int ports, char *buf, size_t len)
{
    if (lane == COSTMODEL_LANE_ACROSS)
        snprintf(buf, len, ", %.0f of %d ports", share * ports, ports);
    else if (lane == COSTMODEL_LANE_INSIDE && share < 1)
        snprintf(buf, len, ", %.0f of %d GPUs' links", share * node_gpus, node_gpus);
    else
        buf[0] = 0;
}

/* One line per phase (a run of spans of one name): when, how many steps of
 * how much, and each lane's busy time within it. */
static void links_print_phases(const struct costmodel_span *sp, int n, const char *const names[LINKS_LANES],
                               int node_gpus, int ports)
{
    for (int i = 0; i < n;) {
        int j = i;
        double start = sp[i].start_s, end = sp[i].end_s, busy[LINKS_LANES] = {0}, share[LINKS_LANES] = {0}, chunk = 0;
        for (; j < n && strcmp(sp[j].phase, sp[i].phase) == 0; j++) {
            busy[sp[j].lane] += sp[j].end_s - sp[j].start_s;
            share[sp[j].lane] = sp[j].share;
            end = sp[j].end_s > end ? sp[j].end_s : end;
            chunk = sp[j].bytes > 0 ? sp[j].bytes : chunk;
        }
        char size[32];
        units_format_bytes((uint64_t)chunk, size, sizeof size);
        printf("  %7.3f - %7.3f ms  %-27s %3d steps of %-9s", start * 1e3, end * 1e3, sp[i].phase,
               sp[j - 1].step - sp[i].step + 1, size);
        for (int l = 0; l < LINKS_LANES; l++) {
            if (busy[l] <= 0)
                continue;
            char words[48];
            links_share(l, share[l], node_gpus, ports, words, sizeof words);
            printf("  %s %.0f %%%s", names[l], 100 * busy[l] / (end - start), words);
        }
        printf("\n");
        i = j;
    }
}

/* The rows of one algorithm in the CSV: one a lane it uses, in lane order,
 * from *row on. */
static void links_write_rows(FILE *f, const char *algo, const struct costmodel_span *sp, int n,
                            const char *const names[LINKS_LANES], int *row)
{
    int rows[LINKS_LANES], used[LINKS_LANES] = {0};
    for (int i = 0; i < n; i++)
        used[sp[i].lane] = 1;
    for (int l = 0; l < LINKS_LANES; l++)
        rows[l] = used[l] ? (*row)++ : -1;
    for (int i = 0; i < n; i++)
        fprintf(f, "%s,%d,%s: %s,%d,%s,%d,%.0f,%.6f,%.6f,%.4f\n", algo, rows[sp[i].lane], algo, names[sp[i].lane],
                (int)sp[i].lane, sp[i].phase, sp[i].step, sp[i].bytes, sp[i].start_s * 1e3, sp[i].end_s * 1e3,
                sp[i].share);
}

int ch5_links(const struct ch5_opts *opt, uint64_t bytes, const char *csv_path, const char *plot_path)
{
    const struct hw_profile *hw = opt->hw;
    int rc;
    const char *names[LINKS_LANES];
    links_lane_names(hw, names);
    int world = opt->world, gpus = opt->node_size > 0 && opt->node_size < world ? opt->node_size : world;
    int ports = opt->model.inter_ports > 0 ? opt->model.inter_ports : gpus;
    char size[32];
    units_format_bytes(bytes, size, sizeof size);
    char across[96] = ""; /* the network, when there is more than one node */
    if (gpus < world)
        snprintf(across, sizeof across, ", %d ports of %s a node", ports, names[COSTMODEL_LANE_ACROSS]);
    printf("# one all-reduce of %s on %d node%s of %d %s (modelled: %s in a node%s): which link is busy when\n", size,
           world / gpus, world / gpus == 1 ? "" : "s", gpus, hw->title, hw->peer, across);

    struct plot_csv csv = {.f = NULL};
    if ((rc = plot_csv_open(&csv, csv_path, "--out")) < 0)
        return rc;
    fprintf(csv.f, "algo,row,label,lane,phase,step,bytes,start_ms,end_ms,share\n");
    int row = 0;
    for (int a = 0; rc == 0 && a < opt->nalgos; a++) {
        const char *algo = comm_algo_name(opt->algos[a]);
        int n = costmodel_allreduce_spans(&opt->model, opt->algos[a], world, (double)bytes, NULL, 0);
        struct costmodel_span *sp = n > 0 ? calloc((size_t)n, sizeof *sp) : NULL;
        if (n < 0)
            rc = err_wrap(ERR_ARG, "--links with --algo=%s", algo);
        else if (n == 0)
            rc = err_set(ERR_ARG, "--links: one rank moves nothing: give --topology or --world of 2 or more");
        else if (!sp)
            rc = err_set(ERR_NOMEM, "--links: %d spans", n);
        if (rc < 0)
            break;
        costmodel_allreduce_spans(&opt->model, opt->algos[a], world, (double)bytes, sp, n);
        double total = costmodel_allreduce(&opt->model, opt->algos[a], world, (double)bytes);
        printf("%s: %.3f ms (busbw %.1f GB/s)\n", algo, total * 1e3, bytes / total * 2 * (world - 1) / world / 1e9);
        links_print_phases(sp, n, names, gpus, ports);
        links_write_rows(csv.f, algo, sp, n, names, &row);
        free(sp);
    }
    if ((rc = plot_csv_close(&csv, rc)) < 0)
        return rc;
    printf("# data: %s\n", csv_path);
    char title[160];
    snprintf(title, sizeof title, "one all-reduce of %s on %dx%d %s (modelled): which link is busy when", size,
             world / gpus, gpus, hw->title);
    rc = plot_render_titled("chapters/05-allreduce/links.gp", csv_path, plot_path, title, "--out");
    if (rc == ERR_UNSUPPORTED) { /* no gnuplot: the CSV is there */
        fprintf(stderr, "chapter-5: %s\n", err_msg());
        return 0;
    }
    if (rc == 0)
        printf("# plot: %s.png and .svg\n", plot_path);
    return rc;
}
