/* ring_schedule: the ring all-reduce's schedule (see ring_schedule.h; lab 5
 * asks for the four schedule functions). */
#include "sim/ring_schedule.h"

/* (a mod w) in 0 .. w-1 for any int a, including negative ones. */
static int ring_mod(int a, int w) { return ((a % w) + w) % w; }

int ring_rs_send(int rank, int world, int step)
{
    // LAB:BEGIN rs-send
    /* Step 0 sends this rank's own input of chunk r-1; each later step
     * forwards the chunk just reduced, so after W-1 steps the chunk reduced
     * last is r itself. */
    return ring_mod(rank - step - 1, world);
    // LAB:STUB (void)rank; (void)world; (void)step;
    // LAB:STUB return LAB_TODO("rs-send");
    // LAB:END
}

int ring_rs_recv(int rank, int world, int step)
{
    // LAB:BEGIN rs-recv
    /* what the left neighbour sends at this step */
    return ring_mod(rank - step - 2, world);
    // LAB:STUB (void)rank; (void)world; (void)step;
    // LAB:STUB return LAB_TODO("rs-recv");
    // LAB:END
}

int ring_ag_send(int rank, int world, int step)
{
    // LAB:BEGIN ag-send
    /* Rank r starts with its finished chunk r and forwards what it receives. */
    return ring_mod(rank - step, world);
    // LAB:STUB (void)rank; (void)world; (void)step;
    // LAB:STUB return LAB_TODO("ag-send");
    // LAB:END
}

int ring_ag_recv(int rank, int world, int step)
{
    // LAB:BEGIN ag-recv
    /* what the left neighbour sends at this step */
    return ring_mod(rank - step - 1, world);
    // LAB:STUB (void)rank; (void)world; (void)step;
    // LAB:STUB return LAB_TODO("ag-recv");
    // LAB:END
}

void ring_chunk(size_t count, int world, int chunk, size_t *offset, size_t *length)
{
    size_t w = (size_t)world, c = (size_t)chunk;
    size_t base = count / w, extra = count % w;
    *offset = c * base + (c < extra ? c : extra);
    *length = base + (c < extra ? 1 : 0);
}
