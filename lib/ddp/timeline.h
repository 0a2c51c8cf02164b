/* timeline: what every rank did, and when, during training steps: the data
 * behind chapter 6's Chrome trace (--trace=FILE, opens in Perfetto or
 * chrome://tracing) and its Gantt chart.
 *
 * Where it sits: beside the training loop (lib/ddp/train.h), which marks the
 * start and end of each stage of a step on each rank: the wait for data, the
 * copy to the device, forward, backward, the all-reduce of each gradient
 * bucket (from its launch during backward to its completion, as the
 * communicator saw it: comm_wait_timed), the communication the step waited
 * for, the optimizer. One lane per activity, one process per rank: a bucket
 * whose all-reduce runs under backward shows as a bar in its lane beside the
 * backward bar; one that does not, after it.
 *
 * Each rank records into its own timeline (no locks: a rank is one thread);
 * timeline_gather() then brings every rank's events to rank 0 over the
 * communicator (two all-gathers), in the thread simulator and under mpirun
 * alike. Times are nanoseconds since the rank's timeline_start(), which every
 * rank calls right after a barrier, so the ranks' clocks line up to within a
 * barrier's release (on one machine; across machines, as well as their
 * clocks agree).
 *
 * On a modelled clock, timeline_gather() adds what the communicator's cost
 * model charged each all-reduce (one more process, "links (modelled)": which
 * link is busy when, step by step).
 *
 * Read enum timeline_lane, then timeline_gather() and the two writers.
 */
#ifndef DDP_TIMELINE_H
#define DDP_TIMELINE_H

#include "comm/comm.h"

#include <stddef.h>
#include <stdint.h>

/* The lanes of a rank, in the order they are drawn. Bucket b's all-reduce
 * has lane TIMELINE_BUCKET + b. */
enum timeline_lane {
    TIMELINE_DATA,     /* waiting for the loader's next batch (and issuing its copy) */
    TIMELINE_COPY,     /* waiting for that batch on the device: its copy and its conversion to floats */
    TIMELINE_FORWARD,  /* forward and loss (the buffer broadcast before it is TIMELINE_COMM) */
    TIMELINE_BACKWARD, /* backward, which launches the buckets' all-reduces as they fill */
    TIMELINE_COMM,     /* communication the step waited for: the rest of the all-reduces, buffer broadcasts */
    TIMELINE_OPTIM,    /* the optimizer step */
    TIMELINE_CHECK,    /* the replica check (simulator) */
    TIMELINE_SAVE,     /* writing a checkpoint (rank 0) */
    TIMELINE_EVAL,     /* evaluation on the test set */
    TIMELINE_LINK_INSIDE, /* the links (modelled): GPU-to-GPU links inside a node busy with an all-reduce */
    TIMELINE_LINK_ACROSS, /* ... the network between nodes */
    TIMELINE_LINK_ADDS,   /* ... the GPUs adding what they received */
    TIMELINE_BUCKET,   /* the first bucket's all-reduce; then one lane per bucket */
};

#define TIMELINE_MAX_BUCKETS 64 /* lanes for buckets at most (the MLP has at most 34 parameters) */

/* "data wait", "copy", ..., "all-reduce bucket 2" into buf; returns buf. */
const char *timeline_lane_name(int lane, char *buf, size_t len);

/* One bar of the chart. */
struct timeline_event {
    int32_t lane;
    int32_t rank;
    uint64_t step;           /* the optimizer step it belongs to (0-based, counted over the whole run) */
    uint64_t start_ns;       /* since the rank's timeline_start() */
    uint64_t end_ns;
    uint64_t seq;            /* all-reduces: the collective's sequence number; else 0 */
    uint64_t bytes;          /* all-reduces: the bytes reduced; links: a sender's chunk; else 0 */
    double share;            /* links: the part of the lane's links in use (costmodel_span); else 1 */
};

typedef struct timeline timeline_t;

/* A timeline that keeps the events of steps [first, first + steps) and at
 * most max_events of them (events past either limit are counted, not kept).
 * 0, or ERR_NOMEM. */
int timeline_create(uint64_t first, uint64_t steps, uint64_t max_events, timeline_t **out);
void timeline_destroy(timeline_t *t);

/* Sets the rank's time origin to now; call it on every rank right after a
 * barrier. */
void timeline_start(timeline_t *t);

/* Whether events of `step` are kept: a caller can skip reading the clock. */
int timeline_wants(const timeline_t *t, uint64_t step);

/* Records a bar from start_ns to end_ns (vclock_now_ns() values: modelled time on the simulator). A NULL
 * timeline records nothing. */
void timeline_add(timeline_t *t, int lane, uint64_t step, uint64_t start_ns, uint64_t end_ns);

/* Records bucket b's all-reduce: its collective's sequence number and bytes. */
void timeline_add_allreduce(timeline_t *t, int bucket, uint64_t step, uint64_t start_ns, uint64_t end_ns,
                            uint64_t seq, uint64_t bytes);

/* Events dropped for lack of room. */
uint64_t timeline_dropped(const timeline_t *t);

/* Every rank's events together, on rank 0. */
struct timeline_all {
    int world;
    int links;                     /* events of rank `world` are the links' (timeline_gather) */
    int nlanes;                    /* TIMELINE_BUCKET + the most buckets any rank had */
    struct timeline_event *events; /* sorted by rank, then start */
    size_t count;
};

/* Collective: every rank sends its events to rank 0 (two all-gathers of
 * int64). On rank 0 *out is set (free it with timeline_all_free), on the
 * others it is NULL. When the communicator charges its collectives on the
 * modelled clock (comm_cost_model: the simulator's, or MPI between simulated
 * devices), rank 0's also holds the links every bucket all-reduce of rank 0
 * kept busy, as that model charged it: the collective ends where its bar ends
 * and starts its modelled time before; in between come the spans of
 * costmodel_allreduce_spans(), as events of rank `world` (the process "links
 * (modelled)"), lanes TIMELINE_LINK_*. Tree and naive add none (no span of
 * theirs says which link). 0, ERR_NOMEM, or the communicator's error. */
int timeline_gather(timeline_t *t, comm_t *c, struct timeline_all **out);
void timeline_all_free(struct timeline_all *all);

/* Writes the Chrome trace event format (JSON object form: "traceEvents",
 * complete events "ph": "X" in microseconds, one process per rank named
 * "rank R", one thread per lane named after it), with `notes` (key, value
 * pairs, NULL-terminated; may be NULL) under "otherData". The JSON is built
 * with jansson and written atomically (lib/base/fsutil.h). 0, or ERR_IO /
 * ERR_NOMEM naming the file. */
int timeline_write_chrome(const struct timeline_all *all, const char *path, const char *const *notes);

/* Writes steps [first, last] as CSV for the Gantt chart (chapters/06-ddp/
 * plot.gp): rank,row,lane,label,step,start_ms,end_ms,share, one line per bar
 * (lane: enum timeline_lane; label: "rank 2: backward", "links: network
 * between nodes"), times from
 * the first bar of step `first` on any rank, rows numbered from the top (rank
 * 0's first lane) with a gap between ranks, the links' rows last; a last
 * column, share, is a link's share in use (1 for the rest). Lanes no rank
 * used in those steps get no row. 0, or ERR_IO naming the file. */
int timeline_write_gantt_csv(const struct timeline_all *all, const char *path, uint64_t first, uint64_t last);

/* How bucket b's all-reduce sat against backward in steps [first, last] of
 * every rank: means over the (rank, step) pairs that hold both bars. This is
 * what overlap buys: time launched before backward ended, and time hidden
 * under it, of an all-reduce this long. */
struct timeline_overlap {
    uint64_t pairs;       /* (rank, step) pairs with both bars; 0: the means are 0 */
    double lead_ns;       /* backward's end minus the all-reduce's launch, 0 when launched after it */
    double hidden_ns;     /* the part of the all-reduce that ran while backward did */
    double length_ns;     /* the all-reduce, launch to completion */
};
void timeline_bucket_overlap(const struct timeline_all *all, int bucket, uint64_t first, uint64_t last,
                             struct timeline_overlap *out);

#endif
