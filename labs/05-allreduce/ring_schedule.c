/* Lab file generated from sim/ring_schedule.c by labs/labgen.awk: write the LAB regions (see labs/05-allreduce/README.md). */
#include "lab_todo.h"
/* ring_schedule: the ring all-reduce's schedule (see ring_schedule.h; lab 5
 * asks for the four schedule functions). */
#include "sim/ring_schedule.h"

/* (a mod w) in 0 .. w-1 for any int a, including negative ones. */
static int ring_mod(int a, int w) { return ((a % w) + w) % w; }

int ring_rs_send(int rank, int world, int step)
{
    /* LAB rs-send: your code here (see labs/05-allreduce/README.md). */
    (void)rank; (void)world; (void)step;
    return LAB_TODO("rs-send");
}

int ring_rs_recv(int rank, int world, int step)
{
    /* LAB rs-recv: your code here (see labs/05-allreduce/README.md). */
    (void)rank; (void)world; (void)step;
    return LAB_TODO("rs-recv");
}

int ring_ag_send(int rank, int world, int step)
{
    /* LAB ag-send: your code here (see labs/05-allreduce/README.md). */
    (void)rank; (void)world; (void)step;
    return LAB_TODO("ag-send");
}

int ring_ag_recv(int rank, int world, int step)
{
    /* LAB ag-recv: your code here (see labs/05-allreduce/README.md). */
    (void)rank; (void)world; (void)step;
    return LAB_TODO("ag-recv");
}

void ring_chunk(size_t count, int world, int chunk, size_t *offset, size_t *length)
{
    size_t w = (size_t)world, c = (size_t)chunk;
    size_t base = count / w, extra = count % w;
    *offset = c * base + (c < extra ? c : extra);
    *length = base + (c < extra ? 1 : 0);
}
