/* costmodel: alpha-beta-gamma predictions of all-reduce time (see costmodel.h). */
#include "comm/costmodel.h"

#include <math.h>

/* Messages needed to move `bytes` in segments. */
static double costmodel_messages(const struct costmodel *m, double bytes)
{
    if (bytes <= 0)
        return 0;
    return m->segment_bytes > 0 ? ceil(bytes / m->segment_bytes) : 1;
}

double costmodel_allreduce(const struct costmodel *m, enum comm_algo algo, int world, double bytes)
{
    if (world <= 1 || bytes <= 0)
        return 0;
    double W = world, n = bytes, path, work;
    switch (algo) {
    case COMM_ALGO_TREE: {
        /* the root receives and sends one copy per level, segment by segment:
         * its links set the pace, whether or not the segments are pipelined */
        double depth = ceil(log2(W));
        path = 2 * depth * (costmodel_messages(m, n) * m->alpha_s + n * m->beta_s_per_b) + depth * n * m->gamma_s_per_b;
        work = 2 * (W - 1) * n * m->beta_s_per_b + (W - 1) * n * m->gamma_s_per_b;
        break;
    }
    case COMM_ALGO_NAIVE:
        path = 2 * (W - 1) * (costmodel_messages(m, n) * m->alpha_s + n * m->beta_s_per_b) +
               (W - 1) * n * m->gamma_s_per_b;
        work = path;
        break;
    default: {
        /* 2(W-1) steps, each moving one chunk of n/W in segments */
        double chunk = n / W;
        path = 2 * (W - 1) * (costmodel_messages(m, chunk) * m->alpha_s + chunk * m->beta_s_per_b) +
               (W - 1) * chunk * m->gamma_s_per_b;
        work = W * path;
        break;
    }
    }
    double cores = m->cores > 0 && m->cores < world ? m->cores : W;
    return fmax(path, work / cores);
}
