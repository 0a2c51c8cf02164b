/* progress: a rate-limited one-line bar on stderr (see progress.h). */
#include "base/progress.h"

#include "base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROGRESS_PERIOD_NS 100000000u /* 10 draws a second is smooth and cheap */

void progress_begin(progress_t *p, const char *label, uint64_t total)
{
    const char *force = getenv("DDP_PROGRESS");
    p->label = label;
    p->total = total;
    p->start_ns = clock_now_ns();
    p->next_draw_ns = p->start_ns + PROGRESS_PERIOD_NS;
    p->enabled = force ? strcmp(force, "0") != 0 : isatty(STDERR_FILENO);
}

static void progress_draw(const progress_t *p, uint64_t done, const char *end)
{
    double secs = (double)(clock_now_ns() - p->start_ns) * 1e-9;
    if (p->total) {
        int width = 30, filled = (int)((double)width * (double)done / (double)p->total);
        if (filled > width)
            filled = width;
        fprintf(stderr, "\r%s [%.*s%*s] %5.1f%% %.1fs%s", p->label, filled,
                "##############################", width - filled, "",
                100.0 * (double)done / (double)p->total, secs, end);
    } else {
        fprintf(stderr, "\r%s %llu %.1fs%s", p->label, (unsigned long long)done, secs, end);
    }
}

void progress_update(progress_t *p, uint64_t done)
{
    if (!p->enabled)
        return;
    uint64_t now = clock_now_ns();
    if (now < p->next_draw_ns)
        return;
    p->next_draw_ns = now + PROGRESS_PERIOD_NS;
    progress_draw(p, done, "");
}

void progress_end(progress_t *p, uint64_t done)
{
    if (p->enabled)
        progress_draw(p, done, "\n");
}
