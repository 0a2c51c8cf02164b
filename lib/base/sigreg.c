/* sigreg: a registry that a signal handler may read (see sigreg.h). */
#include "base/sigreg.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIGREG_CHUNK_BYTES (64u << 10) /* slots come 64 KiB at a time */

enum { SLOT_FREE, SLOT_WRITING, SLOT_LIVE };

/* Every field is atomic (relaxed where the sequence number orders them), so a
 * reader racing a writer is a well-defined C11 program, not only a correct
 * seqlock in practice. */
struct sigreg_slot {
    _Atomic unsigned state;
    _Atomic unsigned seq; /* odd while the fields below are being written */
    _Atomic pid_t pid;
    _Atomic uintptr_t begin, end;
    _Atomic char text[]; /* text_cap bytes */
};

struct sigreg_chunk {
    struct sigreg_chunk *_Atomic next;
    size_t slots, slot_bytes;
    _Alignas(16) unsigned char slot_space[];
};

static struct sigreg_slot *sigreg_slot_at(struct sigreg_chunk *c, size_t i)
{
    return (struct sigreg_slot *)(c->slot_space + i * c->slot_bytes);
}

static struct sigreg_chunk *sigreg_chunk_new(const struct sigreg *r)
{
    size_t slot_bytes = (sizeof(struct sigreg_slot) + r->text_cap + 15) & ~(size_t)15;
    size_t bytes = SIGREG_CHUNK_BYTES;
    if (bytes < sizeof(struct sigreg_chunk) + 4 * slot_bytes)
        bytes = sizeof(struct sigreg_chunk) + 4 * slot_bytes;
    struct sigreg_chunk *c = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED)
        return NULL;
    c->slots = (bytes - sizeof *c) / slot_bytes; /* mmap's memory is zero: every slot is free */
    c->slot_bytes = slot_bytes;
    return c;
}

/* Claims a free slot, growing the registry by a chunk when all are taken. */
static struct sigreg_slot *sigreg_claim(struct sigreg *r)
{
    struct sigreg_chunk *_Atomic *link = &r->first;
    for (;;) {
        struct sigreg_chunk *c = atomic_load(link);
        if (!c) {
            struct sigreg_chunk *fresh = sigreg_chunk_new(r);
            if (!fresh)
                return NULL;
            if (!atomic_compare_exchange_strong(link, &c, fresh)) /* another thread grew it first */
                munmap(fresh, sizeof *fresh + fresh->slots * fresh->slot_bytes);
            continue;
        }
        for (size_t i = 0; i < c->slots; i++) {
            struct sigreg_slot *s = sigreg_slot_at(c, i);
            unsigned want = SLOT_FREE;
            if (atomic_load(&s->state) == SLOT_FREE && atomic_compare_exchange_strong(&s->state, &want, SLOT_WRITING))
                return s;
        }
        link = &c->next;
    }
}

void *sigreg_add(struct sigreg *r, uintptr_t begin, uintptr_t end, const char *text)
{
    struct sigreg_slot *s = sigreg_claim(r);
    if (!s)
        return NULL;
    atomic_fetch_add(&s->seq, 1); /* odd: a reader that started before keeps nothing */
    atomic_store_explicit(&s->pid, getpid(), memory_order_relaxed);
    atomic_store_explicit(&s->begin, begin, memory_order_relaxed);
    atomic_store_explicit(&s->end, end, memory_order_relaxed);
    size_t i = 0;
    for (; text[i] && i + 1 < r->text_cap; i++)
        atomic_store_explicit(&s->text[i], text[i], memory_order_relaxed);
    atomic_store_explicit(&s->text[i], '\0', memory_order_relaxed);
    atomic_fetch_add(&s->seq, 1); /* even again: consistent */
    atomic_store(&s->state, SLOT_LIVE);
    return s;
}

void sigreg_remove(struct sigreg *r, void *slot)
{
    (void)r;
    if (slot)
        atomic_store(&((struct sigreg_slot *)slot)->state, SLOT_FREE);
}

/* Copies slot s into *e and buf if it is a live entry (of process `me`, when
 * not 0), read consistently; 1 when it is. Async-signal-safe. */
static int sigreg_copy(const struct sigreg *r, struct sigreg_slot *s, pid_t me, struct sigreg_entry *e, char *buf,
                       size_t cap)
{
    if (atomic_load(&s->state) != SLOT_LIVE)
        return 0;
    unsigned seq = atomic_load(&s->seq);
    if (seq & 1)
        return 0;
    e->pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
    e->begin = atomic_load_explicit(&s->begin, memory_order_relaxed);
    e->end = atomic_load_explicit(&s->end, memory_order_relaxed);
    size_t n = r->text_cap < cap ? r->text_cap : cap, i = 0;
    for (; i + 1 < n && (buf[i] = atomic_load_explicit(&s->text[i], memory_order_relaxed)) != '\0'; i++)
        ;
    buf[i] = '\0';
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load(&s->seq) != seq || atomic_load(&s->state) != SLOT_LIVE || (me && e->pid != me))
        return 0;
    e->text = buf;
    return 1;
}

void *sigreg_lookup(struct sigreg *r, uintptr_t begin)
{
    struct sigreg_entry e;
    char none[1];
    for (struct sigreg_chunk *c = atomic_load(&r->first); c; c = atomic_load(&c->next))
        for (size_t i = 0; i < c->slots; i++)
            if (sigreg_copy(r, sigreg_slot_at(c, i), 0, &e, none, sizeof none) && e.begin == begin)
                return sigreg_slot_at(c, i);
    return NULL;
}

int sigreg_find(struct sigreg *r, uintptr_t addr, struct sigreg_entry *e, char *buf, size_t cap)
{
    for (struct sigreg_chunk *c = atomic_load(&r->first); c; c = atomic_load(&c->next))
        for (size_t i = 0; i < c->slots; i++)
            if (sigreg_copy(r, sigreg_slot_at(c, i), 0, e, buf, cap) && e->begin <= addr && addr < e->end)
                return 1;
    return 0;
}

void sigreg_each(struct sigreg *r, void (*fn)(const struct sigreg_entry *e, void *arg), void *arg, char *buf,
                 size_t cap)
{
    pid_t me = getpid();
    struct sigreg_entry e;
    for (struct sigreg_chunk *c = atomic_load(&r->first); c; c = atomic_load(&c->next))
        for (size_t i = 0; i < c->slots; i++)
            if (sigreg_copy(r, sigreg_slot_at(c, i), me, &e, buf, cap))
                fn(&e, arg);
}
