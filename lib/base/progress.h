/* progress: the one-line progress bar every long-running command shows on
 * stderr (index builds, file generation, benchmark sweeps). It draws only when
 * stderr is a terminal (or DDP_PROGRESS=1), at most ten times a second, so logs
 * and tests stay clean and the hot loop pays one comparison per update. */
#ifndef DDP_PROGRESS_H
#define DDP_PROGRESS_H

#include <stdint.h>

typedef struct progress {
    const char *label;
    uint64_t total;      /* 0: unknown, show a count instead of a percentage */
    uint64_t start_ns;
    uint64_t next_draw_ns;
    int enabled;
} progress_t;

/* Starts a bar labelled `label` for `total` units. */
void progress_begin(progress_t *p, const char *label, uint64_t total);

/* Reports `done` units finished; draws if the last draw is old enough. */
void progress_update(progress_t *p, uint64_t done);

/* Draws the final state and ends the line. */
void progress_end(progress_t *p, uint64_t done);

#endif
