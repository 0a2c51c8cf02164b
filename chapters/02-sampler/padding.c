/* padding: chapter 2's plotted experiment (build/chapter-2 --plot), after the
 * samplers (lib/sampler/): what a step computes when records of different
 * lengths are batched and each batch is padded to its longest record (as a
 * collate pads sequences into one tensor).
 *
 * For a memory budget of T tokens per step, from 1 to 64 longest records,
 * one epoch on every rank of two samplers:
 *
 *   plain         PyTorch's BatchSampler over DistributedSampler: B = T / the
 *                 longest record, the most a batch can hold when any of its
 *                 records may be the longest
 *   token budget  the token-budget sampler (lib/sampler/batch.h): sorting
 *                 buffers of --sort-size records per rank, batches grown while
 *                 longest x count stays within T
 *
 * It prints the padding's share of the padded tokens and the real tokens per
 * step of each, writes them to padding.csv and draws plot.gp. The lesson:
 * within the same memory a plain batch of uniform lengths is nearly half
 * padding, so a step carries about half the real tokens the token budget's
 * sorted batches do; and the sorted batches pad more as they grow towards the
 * sorting buffer (a batch can only hold records of one buffer).
 */
#include "padding.h"

#include "base/error.h"
#include "base/plot.h"
#include "sampler/sampler.h"

#include <stdio.h>

#define CH2_PADDING_POINTS 7 /* budgets of 1, 2, 4, ... 64 longest records */

/* One epoch of the plain batch sampler (batches of `batch`) on every rank, into *pad. */
static int ch2_padding_plain(const dataset_t *ds, const struct batch_dynamic_options *opt, uint64_t batch,
                             struct batch_padding *pad)
{
    int rc = 0;
    for (uint32_t r = 0; rc == 0 && r < opt->world; r++) {
        struct sampler_options so;
        sampler_options_default(&so);
        so.size = dataset_info(ds)->length;
        so.world = opt->world;
        so.rank = r;
        so.seed = opt->seed;
        so.shuffle = opt->shuffle;
        so.randperm = opt->randperm;
        sampler_t *s;
        if ((rc = sampler_create(&so, &s)) < 0)
            return rc;
        batch_sampler_t b;
        if ((rc = sampler_begin(s)) == 0 && (rc = batch_sampler_init(&b, index_stream_of_sampler(s), batch, 0)) == 0)
            rc = batch_padding_add_stream(pad, ds, batch_stream_of_sampler(&b));
        sampler_destroy(s);
    }
    return rc;
}

/* One epoch of the token-budget sampler on every rank, into *pad. */
static int ch2_padding_budget(const dataset_t *ds, const struct batch_dynamic_options *base, uint64_t budget,
                              uint64_t longest, struct batch_padding *pad)
{
    int rc = 0;
    for (uint32_t r = 0; rc == 0 && r < base->world; r++) {
        struct batch_dynamic_options o = *base;
        o.rank = r;
        o.type = BATCH_TOKEN;
        o.budget = budget;
        o.max_token_length = longest; /* every record fits: the three samplers see the same records */
        o.max_samples = budget;       /* never the limit: a record has at least one token */
        o.start_step = 0;
        batch_dynamic_t *d;
        if ((rc = batch_dynamic_create(ds, &o, &d)) < 0)
            return rc;
        if ((rc = batch_dynamic_begin(d)) == 0)
            rc = batch_padding_add_stream(pad, ds, batch_stream_of_dynamic(d));
        batch_dynamic_destroy(d);
    }
    return rc;
}

static double ch2_pct_padding(const struct batch_padding *p)
{
    return p->padded ? 100.0 * (double)(p->padded - p->real) / (double)p->padded : 0;
}

static double ch2_real_per_step(const struct batch_padding *p)
{
    return p->batches ? (double)p->real / (double)p->batches : 0;
}

int ch2_padding_plot(const dataset_t *ds, const struct batch_dynamic_options *opt, const char *out_dir)
{
    uint64_t n = dataset_info(ds)->length, shortest = UINT64_MAX, longest = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t length;
        int rc = dataset_length_of(ds, i, &length);
        if (rc < 0)
            return rc;
        shortest = length < shortest ? length : shortest;
        longest = length > longest ? length : longest;
    }
    if (longest == 0)
        return err_set(ERR_ARG, "%s: no record has a length to pad to (%llu records)", dataset_name(ds),
                       (unsigned long long)n);
    char csv_path[PLOT_PATH_MAX], out_path[PLOT_PATH_MAX];
    if (plot_paths(out_dir, CH2_PADDING_PLOT, csv_path, out_path) < 0)
        return err_wrap(ERR_ARG, "--out");
    struct plot_csv csv;
    int rc = plot_csv_open(&csv, csv_path, "--out");
    if (rc < 0)
        return rc;
    fprintf(csv.f, "budget_tokens,plain_batch,plain_padding_pct,budget_padding_pct,plain_real_per_step,"
                   "budget_real_per_step\n");
    printf("padding: %s, %llu records of %llu to %llu tokens, %u ranks, epoch 0; a batch is padded to its longest\n"
           "record. At T tokens a step, the plain batch sampler holds B = T / %llu records (any may be the longest);\n"
           "the token-budget sampler packs up to T from sorting buffers of %llu records per rank.\n\n",
           dataset_name(ds), (unsigned long long)n, (unsigned long long)shortest, (unsigned long long)longest,
           opt->world, (unsigned long long)longest, (unsigned long long)opt->sort_size);
    printf("%9s %6s | %-19s | %-19s\n", "", "", "padding, % of tokens", "real tokens a step");
    printf("%9s %6s | %8s %10s | %8s %10s\n", "budget T", "B", "plain", "budget", "plain", "budget");
    for (int k = 0; rc == 0 && k < CH2_PADDING_POINTS; k++) {
        uint64_t batch = 1ull << k, budget = batch * longest;
        struct batch_padding plain = {0}, packed = {0};
        if ((rc = ch2_padding_plain(ds, opt, batch, &plain)) < 0 ||
            (rc = ch2_padding_budget(ds, opt, budget, longest, &packed)) < 0)
            break;
        printf("%9llu %6llu | %7.1f%% %9.1f%% | %8.0f %10.0f\n", (unsigned long long)budget,
               (unsigned long long)batch, ch2_pct_padding(&plain), ch2_pct_padding(&packed),
               ch2_real_per_step(&plain), ch2_real_per_step(&packed));
        fprintf(csv.f, "%llu,%llu,%.3f,%.3f,%.1f,%.1f\n", (unsigned long long)budget, (unsigned long long)batch,
                ch2_pct_padding(&plain), ch2_pct_padding(&packed), ch2_real_per_step(&plain),
                ch2_real_per_step(&packed));
    }
    if ((rc = plot_csv_close(&csv, rc)) < 0)
        return rc;
    char title[256];
    snprintf(title, sizeof title, "chapter 2: padding at the same memory per step (%llu records of %llu to %llu tokens, "
             "%u ranks)", (unsigned long long)n, (unsigned long long)shortest, (unsigned long long)longest, opt->world);
    rc = plot_render_titled("chapters/02-sampler/plot.gp", csv_path, out_path, title, "--out");
    if (rc == ERR_UNSUPPORTED) { /* no gnuplot: the CSV is there, say so */
        printf("\n(%s)\n", err_msg());
        return 0;
    }
    if (rc == 0)
        printf("\nwrote %s, %s.png and %s.svg\n", csv_path, out_path, out_path);
    return rc;
}
