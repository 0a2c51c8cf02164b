/* timeline: every rank's bars, gathered to rank 0 and written as a Chrome
 * trace or a Gantt chart's CSV (see timeline.h). */
#include "ddp/timeline.h"

#include "base/vclock.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "base/plot.h"
#include "comm/costmodel.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMELINE_FIELDS 7 /* int64 words per event on the wire */

struct timeline {
    uint64_t first, steps, cap;
    uint64_t origin_ns;
    struct timeline_event *events;
    uint64_t count, dropped;
};

static const char *const timeline_names[] = {
    [TIMELINE_DATA] = "data wait", [TIMELINE_COPY] = "copy",       [TIMELINE_FORWARD] = "forward",
    [TIMELINE_BACKWARD] = "backward", [TIMELINE_COMM] = "exposed communication",
    [TIMELINE_OPTIM] = "optimizer", [TIMELINE_CHECK] = "replica check", [TIMELINE_SAVE] = "checkpoint",
    [TIMELINE_EVAL] = "evaluation", [TIMELINE_LINK_INSIDE] = "GPU links in a node",
    [TIMELINE_LINK_ACROSS] = "network between nodes", [TIMELINE_LINK_ADDS] = "GPUs adding received chunks",
};

const char *timeline_lane_name(int lane, char *buf, size_t len)
{
    if (lane >= 0 && lane < TIMELINE_BUCKET)
        snprintf(buf, len, "%s", timeline_names[lane]);
    else
        snprintf(buf, len, "all-reduce bucket %d", lane - TIMELINE_BUCKET);
    return buf;
}

int timeline_create(uint64_t first, uint64_t steps, uint64_t max_events, timeline_t **out)
{
    *out = NULL;
    size_t bytes;
    int rc = mem_check_array("timeline: its bars", max_events, sizeof(struct timeline_event), &bytes);
    if (rc < 0)
        return rc;
    timeline_t *t = calloc(1, sizeof *t);
    if (!t || (max_events && !(t->events = calloc(max_events, sizeof *t->events)))) {
        free(t);
        return err_set(ERR_NOMEM, "timeline: out of memory for %llu events", (unsigned long long)max_events);
    }
    t->first = first;
    t->steps = steps;
    t->cap = max_events;
    t->origin_ns = vclock_now_ns();
    *out = t;
    return 0;
}

void timeline_destroy(timeline_t *t)
{
    if (!t)
        return;
    free(t->events);
    free(t);
}

void timeline_start(timeline_t *t)
{
    if (t)
        t->origin_ns = vclock_now_ns();
}

int timeline_wants(const timeline_t *t, uint64_t step) { return t && step >= t->first && step - t->first < t->steps; }

static void timeline_push(timeline_t *t, int lane, uint64_t step, uint64_t start_ns, uint64_t end_ns, uint64_t seq,
                          uint64_t bytes)
{
    if (!timeline_wants(t, step))
        return;
    if (t->count == t->cap) {
        t->dropped++;
        return;
    }
    /* a bar that started before the origin (it cannot, after timeline_start) is clipped */
    uint64_t s = start_ns > t->origin_ns ? start_ns - t->origin_ns : 0;
    uint64_t e = end_ns > t->origin_ns ? end_ns - t->origin_ns : 0;
    t->events[t->count++] = (struct timeline_event){
        .lane = lane, .step = step, .start_ns = s, .end_ns = e < s ? s : e, .seq = seq, .bytes = bytes, .share = 1};
}

void timeline_add(timeline_t *t, int lane, uint64_t step, uint64_t start_ns, uint64_t end_ns)
{
    timeline_push(t, lane, step, start_ns, end_ns, 0, 0);
}

void timeline_add_allreduce(timeline_t *t, int bucket, uint64_t step, uint64_t start_ns, uint64_t end_ns,
                            uint64_t seq, uint64_t bytes)
{
    if (bucket >= 0 && bucket < TIMELINE_MAX_BUCKETS)
        timeline_push(t, TIMELINE_BUCKET + bucket, step, start_ns, end_ns, seq, bytes);
}

uint64_t timeline_dropped(const timeline_t *t) { return t ? t->dropped : 0; }

/* The order of every gathered timeline: by rank, then start, then lane. */
static int timeline_by_rank_then_start(const void *a, const void *b)
{
    const struct timeline_event *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    return x->lane < y->lane ? -1 : x->lane > y->lane;
}

/* ---- the links (a modelled clock) ------------------------------------------------------- */

/* The link lane of a cost model's span. */
static int timeline_link_lane(enum costmodel_lane lane)
{
    return lane == COSTMODEL_LANE_INSIDE ? TIMELINE_LINK_INSIDE
           : lane == COSTMODEL_LANE_ACROSS ? TIMELINE_LINK_ACROSS
                                           : TIMELINE_LINK_ADDS;
}

/* The events of all-reduce ar's spans (n of them), from `start` (ns, the
 * timeline's) and at most to ar's end, appended to all->events. */
static void timeline_push_spans(struct timeline_all *all, const struct timeline_event *ar,
                                const struct costmodel_span *sp, int n, uint64_t start)
{
    for (int k = 0; k < n; k++) {
        uint64_t s = start + vclock_ns_of_s(sp[k].start_s), e = start + vclock_ns_of_s(sp[k].end_s);
        all->events[all->count++] = (struct timeline_event){
            .lane = timeline_link_lane(sp[k].lane), .rank = all->world, .step = ar->step,
            .start_ns = s < ar->end_ns ? s : ar->end_ns, .end_ns = e < ar->end_ns ? e : ar->end_ns, .seq = ar->seq,
            .bytes = (uint64_t)sp[k].bytes, .share = sp[k].share};
    }
}

/* Adds the links (see timeline_gather) of every bucket all-reduce of rank 0,
 * as model m charged it with algo. */
static int timeline_add_links(struct timeline_all *all, const struct costmodel *m, enum comm_algo algo)
{
    if (algo == COMM_ALGO_TREE || algo == COMM_ALGO_NAIVE)
        return 0;
    size_t add = 0, most = 0; /* spans to add, and the most of one all-reduce */
    for (size_t i = 0; i < all->count; i++) {
        const struct timeline_event *e = &all->events[i];
        if (e->rank != 0 || e->lane < TIMELINE_BUCKET)
            continue;
        int n = costmodel_allreduce_spans(m, algo, all->world, (double)e->bytes, NULL, 0);
        add += n > 0 ? (size_t)n : 0;
        most = n > 0 && (size_t)n > most ? (size_t)n : most;
    }
    all->links = 1;
    if (!add)
        return 0;
    struct timeline_event *grown = realloc(all->events, (all->count + add) * sizeof *grown);
    struct costmodel_span *sp = calloc(most, sizeof *sp);
    if (grown)
        all->events = grown;
    if (!grown || !sp) {
        free(sp);
        return err_set(ERR_NOMEM, "timeline: out of memory for %zu link spans", add);
    }
    size_t count = all->count; /* the ranks' events: the loop below appends after them */
    for (size_t i = 0; i < count; i++) {
        const struct timeline_event ar = all->events[i];
        if (ar.rank != 0 || ar.lane < TIMELINE_BUCKET)
            continue;
        int n = costmodel_allreduce_spans(m, algo, all->world, (double)ar.bytes, sp, (int)most);
        uint64_t cost = vclock_ns_of_s(costmodel_allreduce(m, algo, all->world, (double)ar.bytes));
        timeline_push_spans(all, &ar, sp, n, ar.end_ns > cost ? ar.end_ns - cost : 0);
    }
    free(sp);
    qsort(all->events, all->count, sizeof *all->events, timeline_by_rank_then_start);
    return 0;
}

/* ---- gathering ---------------------------------------------------------------- */

int timeline_gather(timeline_t *t, comm_t *c, struct timeline_all **out)
{
    *out = NULL;
    int world = comm_world(c), rank = comm_rank(c);
    int64_t mine = t ? (int64_t)t->count : 0;
    int64_t *counts = calloc((size_t)world, sizeof *counts);
    if (!counts)
        return err_set(ERR_NOMEM, "timeline: out of memory");
    int rc = comm_allgather(c, &mine, counts, 1, COMM_INT64);
    int64_t most = 0;
    for (int r = 0; rc == 0 && r < world; r++)
        most = counts[r] > most ? counts[r] : most;
    size_t per = (size_t)most * TIMELINE_FIELDS;
    int64_t *send = NULL, *recv = NULL;
    if (rc == 0 && most > 0) {
        send = calloc(per, sizeof *send);
        recv = calloc(per * (size_t)world, sizeof *recv);
        if (!send || !recv)
            rc = err_set(ERR_NOMEM, "timeline: out of memory for %d x %lld events", world, (long long)most);
    }
    for (int64_t i = 0; rc == 0 && i < mine; i++) {
        const struct timeline_event *e = &t->events[i];
        int64_t *w = send + i * TIMELINE_FIELDS;
        w[0] = e->lane, w[1] = (int64_t)e->step, w[2] = (int64_t)e->start_ns, w[3] = (int64_t)e->end_ns;
        w[4] = (int64_t)e->seq, w[5] = (int64_t)e->bytes, w[6] = 0;
    }
    if (rc == 0 && most > 0)
        rc = comm_allgather(c, send, recv, per, COMM_INT64);
    struct timeline_all *all = NULL;
    if (rc == 0 && rank == 0) {
        size_t total = 0;
        for (int r = 0; r < world; r++)
            total += (size_t)counts[r];
        all = calloc(1, sizeof *all);
        if (all && total)
            all->events = calloc(total, sizeof *all->events);
        if (!all || (total && !all->events))
            rc = err_set(ERR_NOMEM, "timeline: out of memory for %zu events", total);
        for (int r = 0; rc == 0 && r < world; r++) {
            for (int64_t i = 0; i < counts[r]; i++) {
                const int64_t *w = recv + ((size_t)r * per + (size_t)i * TIMELINE_FIELDS);
                struct timeline_event *e = &all->events[all->count++];
                *e = (struct timeline_event){.lane = (int32_t)w[0], .rank = r, .step = (uint64_t)w[1],
                                             .start_ns = (uint64_t)w[2], .end_ns = (uint64_t)w[3],
                                             .seq = (uint64_t)w[4], .bytes = (uint64_t)w[5], .share = 1};
                if (e->lane + 1 > all->nlanes)
                    all->nlanes = e->lane + 1;
            }
        }
        if (rc == 0) {
            all->world = world;
            if (all->nlanes < TIMELINE_BUCKET)
                all->nlanes = TIMELINE_BUCKET;
            qsort(all->events, all->count, sizeof *all->events, timeline_by_rank_then_start);
        }
        struct costmodel m;
        enum comm_algo algo;
        if (rc == 0 && comm_cost_model(c, &m, &algo)) /* the modelled clock: what each all-reduce was charged */
            rc = timeline_add_links(all, &m, algo);
    }
    free(counts);
    free(send);
    free(recv);
    if (rc < 0) {
        timeline_all_free(all);
        return rc;
    }
    *out = all;
    return 0;
}

void timeline_all_free(struct timeline_all *all)
{
    if (!all)
        return;
    free(all->events);
    free(all);
}

/* ---- the Chrome trace ------------------------------------------------------------ */

/* Appends `ev` (a new reference) to `arr`; 0 or -1 (and ev released). */
static int timeline_append(json_t *arr, json_t *ev) { return ev ? json_array_append_new(arr, ev) : -1; }

static json_t *timeline_meta(const char *what, int pid, int tid, json_t *args)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:o}", "name", what, "ph", "M", "pid", pid, "tid", tid, "args", args);
}

int timeline_write_chrome(const struct timeline_all *all, const char *path, const char *const *notes)
{
    json_t *root = json_object(), *events = json_array(), *other = json_object();
    int bad = !root || !events || !other;
    char lane[64];
    /* which lanes each rank (and the links) used: only those get a name */
    int procs = all->world + all->links;
    unsigned char *used = calloc((size_t)procs * (size_t)all->nlanes, 1);
    bad = bad || !used;
    for (size_t i = 0; !bad && i < all->count; i++)
        used[(size_t)all->events[i].rank * (size_t)all->nlanes + (size_t)all->events[i].lane] = 1;
    for (int r = 0; !bad && r < procs; r++) {
        char name[32];
        if (r < all->world)
            snprintf(name, sizeof name, "rank %d", r);
        else
            snprintf(name, sizeof name, "links (modelled)");
        if (r == all->world && !memchr(used + (size_t)r * (size_t)all->nlanes, 1, (size_t)all->nlanes))
            break; /* no all-reduce had a link to show */
        bad = timeline_append(events, timeline_meta("process_name", r, 0, json_pack("{s:s}", "name", name))) ||
              timeline_append(events, timeline_meta("process_sort_index", r, 0, json_pack("{s:i}", "sort_index", r)));
        for (int l = 0; !bad && l < all->nlanes; l++) {
            if (!used[(size_t)r * (size_t)all->nlanes + (size_t)l])
                continue;
            timeline_lane_name(l, lane, sizeof lane);
            bad = timeline_append(events, timeline_meta("thread_name", r, l, json_pack("{s:s}", "name", lane))) ||
                  timeline_append(events, timeline_meta("thread_sort_index", r, l, json_pack("{s:i}", "sort_index", l)));
        }
    }
    for (size_t i = 0; !bad && i < all->count; i++) {
        const struct timeline_event *e = &all->events[i];
        json_t *args;
        char name[96];
        if (e->lane >= TIMELINE_BUCKET) {
            snprintf(name, sizeof name, "all-reduce bucket %d (#%llu)", e->lane - TIMELINE_BUCKET,
                     (unsigned long long)e->seq);
            args = json_pack("{s:I, s:I, s:i, s:I}", "step", (json_int_t)e->step, "seq", (json_int_t)e->seq,
                             "bucket", e->lane - TIMELINE_BUCKET, "bytes", (json_int_t)e->bytes);
        } else if (e->rank == all->world) { /* a link: which all-reduce, how much a sender moves, in what share */
            timeline_lane_name(e->lane, name, sizeof name);
            args = json_pack("{s:I, s:I, s:I, s:f}", "step", (json_int_t)e->step, "seq", (json_int_t)e->seq,
                             "chunk_bytes", (json_int_t)e->bytes, "share", e->share);
        } else {
            timeline_lane_name(e->lane, name, sizeof name);
            args = json_pack("{s:I}", "step", (json_int_t)e->step);
        }
        /* microseconds, as the format wants them; fractions keep the nanoseconds */
        bad = !args || timeline_append(events, json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i, s:o}", "name", name,
                                                         "cat", e->lane >= TIMELINE_BUCKET ? "comm"
                                                                : e->rank == all->world  ? "link"
                                                                                         : "step",
                                                         "ph",
                                                         "X", "ts", (double)e->start_ns / 1e3, "dur",
                                                         (double)(e->end_ns - e->start_ns) / 1e3, "pid", e->rank,
                                                         "tid", e->lane, "args", args));
    }
    for (int k = 0; !bad && notes && notes[k] && notes[k + 1]; k += 2)
        bad = json_object_set_new(other, notes[k], json_string(notes[k + 1]));
    free(used);
    if (!bad) { /* the _new setters take the reference, failing or not */
        bad = json_object_set_new(root, "traceEvents", events) | json_object_set_new(root, "otherData", other) |
              json_object_set_new(root, "displayTimeUnit", json_string("ms"));
        events = other = NULL;
    }
    char *text = bad ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    json_decref(events);
    json_decref(other);
    if (!text)
        return err_set(ERR_NOMEM, "%s: cannot build the trace's JSON", path);
    struct fsutil_tmp tmp;
    int rc = fsutil_tmp_open(&tmp, path, NULL);
    if (rc == 0) {
        rc = fsutil_write_all(tmp.fd, text, strlen(text), path);
        if (rc == 0)
            rc = fsutil_write_all(tmp.fd, "\n", 1, path);
        rc = fsutil_tmp_finish(&tmp, rc, 0);
    }
    free(text);
    return rc;
}

/* ---- the Gantt chart's CSV ---------------------------------------------------------- */

int timeline_write_gantt_csv(const struct timeline_all *all, const char *path, uint64_t first, uint64_t last)
{
    size_t lanes = (size_t)all->nlanes;
    unsigned char *used = calloc(2 * lanes, 1); /* [0, lanes): the ranks'; [lanes, 2 lanes): the links' */
    if (!used)
        return err_set(ERR_NOMEM, "timeline: out of memory");
    uint64_t origin = UINT64_MAX;
    for (size_t i = 0; i < all->count; i++) {
        const struct timeline_event *e = &all->events[i];
        if (e->step < first || e->step > last)
            continue;
        used[(e->rank == all->world ? lanes : 0) + (size_t)e->lane] = 1;
        origin = e->start_ns < origin ? e->start_ns : origin;
    }
    /* rows: every used lane of rank 0 from the top, a blank row, then rank 1's ..., the links' last */
    int *row_of = calloc(2 * lanes, sizeof *row_of);
    int nrows = 0, nlinks = 0;
    for (size_t l = 0; row_of && l < lanes; l++) {
        row_of[l] = used[l] ? nrows++ : -1;
        row_of[lanes + l] = used[lanes + l] ? nlinks++ : -1;
    }
    struct plot_csv csv;
    int rc = row_of ? plot_csv_open(&csv, path, NULL) : err_set(ERR_NOMEM, "timeline: out of memory");
    if (rc == 0) {
        fprintf(csv.f, "rank,row,lane,label,step,start_ms,end_ms,share\n");
        char name[64], who[16];
        for (size_t i = 0; i < all->count; i++) {
            const struct timeline_event *e = &all->events[i];
            if (e->step < first || e->step > last)
                continue;
            int link = e->rank == all->world;
            if (link)
                snprintf(who, sizeof who, "links");
            else
                snprintf(who, sizeof who, "rank %d", e->rank);
            fprintf(csv.f, "%d,%d,%d,%s: %s,%llu,%.4f,%.4f,%.4f\n", e->rank,
                    e->rank * (nrows + 1) + row_of[(link ? lanes : 0) + (size_t)e->lane], e->lane, who,
                    timeline_lane_name(e->lane, name, sizeof name), (unsigned long long)e->step,
                    (double)(e->start_ns - origin) / 1e6, (double)(e->end_ns - origin) / 1e6, e->share);
        }
        rc = plot_csv_close(&csv, 0);
    }
    free(row_of);
    free(used);
    return rc;
}

/* ---- overlap ------------------------------------------------------------------ */

void timeline_bucket_overlap(const struct timeline_all *all, int bucket, uint64_t first, uint64_t last,
                             struct timeline_overlap *out)
{
    *out = (struct timeline_overlap){0};
    for (size_t i = 0; i < all->count; i++) {
        const struct timeline_event *r = &all->events[i];
        if (r->lane != TIMELINE_BUCKET + bucket || r->step < first || r->step > last)
            continue;
        for (size_t k = 0; k < all->count; k++) { /* its step's backward on the same rank */
            const struct timeline_event *b = &all->events[k];
            if (b->lane != TIMELINE_BACKWARD || b->rank != r->rank || b->step != r->step)
                continue;
            uint64_t from = r->start_ns > b->start_ns ? r->start_ns : b->start_ns;
            uint64_t to = r->end_ns < b->end_ns ? r->end_ns : b->end_ns;
            out->pairs++;
            out->lead_ns += b->end_ns > r->start_ns ? (double)(b->end_ns - r->start_ns) : 0;
            out->hidden_ns += to > from ? (double)(to - from) : 0;
            out->length_ns += (double)(r->end_ns - r->start_ns);
            break;
        }
    }
    if (out->pairs) {
        out->lead_ns /= (double)out->pairs;
        out->hidden_ns /= (double)out->pairs;
        out->length_ns /= (double)out->pairs;
    }
}
