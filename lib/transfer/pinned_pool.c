/* pinned_pool: a bounded cache of pinned blocks (see pinned_pool.h).
 *
 * Blocks are whole pages (the unit the OS locks), kept in an array with an
 * in-use flag. An allocation takes the smallest free block that fits and is
 * at most twice the request (a 256 MiB block is not spent on a 4 KiB
 * request), else pins a new one. Giving back goes largest free block first:
 * the fewest unpins to make room.
 */
#include "transfer/pinned_pool.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/units.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pinned_block {
    void *ptr;
    uint64_t bytes;
    int in_use;
};

struct pinned_pool {
    device_t *dev;
    enum device_host_kind kind;
    pthread_mutex_t mu;
    struct pinned_block *blocks;
    uint32_t n, cap;
    struct pinned_pool_stats st;
};

int pinned_pool_create(device_t *dev, uint64_t limit_bytes, enum device_host_kind kind, pinned_pool_t **out)
{
    *out = NULL;
    if (limit_bytes == 0)
        return err_set(ERR_ARG, "pinned pool: a limit of 0 bytes holds nothing");
    if (kind != DEVICE_HOST_PINNED && kind != DEVICE_HOST_WRITE_COMBINED)
        return err_set(ERR_ARG, "pinned pool: %s memory is not pinned (pinned or write-combined)",
                       device_host_kind_name(kind));
    pinned_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(ERR_NOMEM, "pinned pool: out of memory");
    p->dev = dev;
    p->kind = kind;
    p->st.limit_bytes = limit_bytes;
    pthread_mutex_init(&p->mu, NULL);
    *out = p;
    return 0;
}

void pinned_pool_destroy(pinned_pool_t *pool)
{
    if (!pool)
        return;
    for (uint32_t i = 0; i < pool->n; i++)
        device_host_free(pool->dev, pool->blocks[i].ptr);
    free(pool->blocks);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

/* Gives the block at i back to the OS (mu held). */
static void pool_unpin(pinned_pool_t *p, uint32_t i)
{
    uint64_t t0 = clock_now_ns();
    device_host_free(p->dev, p->blocks[i].ptr);
    p->st.unpin_s += (double)(clock_now_ns() - t0) * 1e-9;
    p->st.unpins++;
    p->st.held_bytes -= p->blocks[i].bytes;
    p->st.blocks--;
    p->blocks[i] = p->blocks[--p->n];
}

int pinned_pool_alloc(pinned_pool_t *p, uint64_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0)
        return err_set(ERR_ARG, "pinned pool: 0 bytes asked");
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    char asked[16], limit[16], held[16], used[16];
    units_format_bytes(p->st.limit_bytes, limit, sizeof limit);
    if (bytes > p->st.limit_bytes)
        return err_set(ERR_NOMEM, "pinned pool: %llu bytes (%s) asked, more than the pool's whole limit of %s: raise "
                       "the limit or ask for less", (unsigned long long)bytes,
                       units_format_bytes(bytes, asked, sizeof asked), limit);
    if (bytes > UINT64_MAX - page)
        return err_set(ERR_NOMEM, "pinned pool: %llu bytes asked: no machine has that much", (unsigned long long)bytes);
    uint64_t want = (bytes + page - 1) / page * page;
    pthread_mutex_lock(&p->mu);
    /* 1. a cached block that fits */
    int best = -1;
    for (uint32_t i = 0; i < p->n; i++) {
        const struct pinned_block *b = &p->blocks[i];
        if (!b->in_use && b->bytes >= want && b->bytes / 2 <= want && (best < 0 || b->bytes < p->blocks[best].bytes))
            best = (int)i;
    }
    if (best >= 0) {
        p->blocks[best].in_use = 1;
        p->st.in_use_bytes += p->blocks[best].bytes;
        p->st.blocks_in_use++;
        p->st.reuses++;
        *out = p->blocks[best].ptr;
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    /* 2. room for a new one: cached blocks go first, largest first */
    while (p->st.held_bytes + want > p->st.limit_bytes) {
        int victim = -1;
        for (uint32_t i = 0; i < p->n; i++)
            if (!p->blocks[i].in_use && (victim < 0 || p->blocks[i].bytes > p->blocks[victim].bytes))
                victim = (int)i;
        if (victim < 0)
            break;
        pool_unpin(p, (uint32_t)victim);
    }
    int rc = 0;
    if (p->st.held_bytes + want > p->st.limit_bytes) {
        rc = err_set(ERR_NOMEM, "pinned pool: %s asked, but %s of the pool's %s limit are held and in use (%u "
                     "block%s): release batches or buffers first, or raise the limit",
                     units_format_bytes(want, asked, sizeof asked),
                     units_format_bytes(p->st.in_use_bytes, used, sizeof used), limit, p->st.blocks_in_use,
                     p->st.blocks_in_use == 1 ? "" : "s");
    } else if (p->n == p->cap) {
        uint32_t cap = p->cap ? p->cap * 2 : 8;
        struct pinned_block *b = realloc(p->blocks, cap * sizeof *b);
        if (!b)
            rc = err_set(ERR_NOMEM, "pinned pool: out of memory for the block table");
        else
            p->blocks = b, p->cap = cap;
    }
    if (rc == 0) {
        char name[48];
        snprintf(name, sizeof name, "pinned pool block %llu", (unsigned long long)p->st.pins + 1);
        uint64_t t0 = clock_now_ns();
        void *ptr;
        rc = device_host_alloc(p->dev, p->kind, want, name, &ptr);
        if (rc) {
            rc = err_wrap(ERR_NOMEM, "pinned pool: %s asked, %s held (%s in use) of %s: the device could not pin "
                          "more", units_format_bytes(want, asked, sizeof asked),
                          units_format_bytes(p->st.held_bytes, held, sizeof held),
                          units_format_bytes(p->st.in_use_bytes, used, sizeof used), limit);
        } else {
            p->st.pin_s += (double)(clock_now_ns() - t0) * 1e-9;
            p->st.pins++;
            p->st.pinned_bytes += want;
            p->st.held_bytes += want;
            p->st.in_use_bytes += want;
            p->st.blocks++;
            p->st.blocks_in_use++;
            p->blocks[p->n++] = (struct pinned_block){ptr, want, 1};
            *out = ptr;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void pinned_pool_free(pinned_pool_t *p, void *ptr)
{
    if (!ptr)
        return;
    pthread_mutex_lock(&p->mu);
    uint32_t i = 0;
    while (i < p->n && p->blocks[i].ptr != ptr)
        i++;
    assert(i < p->n && p->blocks[i].in_use && "pinned_pool_free: not a block in use of this pool");
    if (i < p->n && p->blocks[i].in_use) {
        p->blocks[i].in_use = 0;
        p->st.in_use_bytes -= p->blocks[i].bytes;
        p->st.blocks_in_use--;
    }
    pthread_mutex_unlock(&p->mu);
}

void pinned_pool_stats(pinned_pool_t *p, struct pinned_pool_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->st;
    pthread_mutex_unlock(&p->mu);
}

static void *pool_loader_alloc(void *user, uint64_t bytes)
{
    void *p;
    return pinned_pool_alloc(user, bytes, &p) == 0 ? p : NULL;
}

static void pool_loader_free(void *user, void *ptr, uint64_t bytes)
{
    (void)bytes;
    pinned_pool_free(user, ptr);
}

struct loader_allocator pinned_pool_loader_allocator(pinned_pool_t *pool)
{
    return (struct loader_allocator){pool_loader_alloc, pool_loader_free, pool};
}
