/* sigreg: a registry that a signal handler may read.
 *
 * Where it sits: under fsutil (the temporary files a SIGINT or SIGTERM must
 * not leave behind) and mapfile (the mappings a SIGBUS names). Ordinary code
 * adds and removes entries; a signal handler, which may interrupt that code
 * at any instruction and may call only async-signal-safe functions (POSIX.1-
 * 2017, 2.4.3), looks them up. So nothing here takes a lock or calls malloc:
 *
 * - slots are claimed with a compare-and-swap of their state;
 * - each slot has a sequence number that is odd while the slot is being
 *   written, so a reader copies an entry and keeps the copy only if the number
 *   was even and unchanged around the copy (a seqlock);
 * - slots live in chunks obtained from mmap() and never given back, so a
 *   reader never touches freed memory, and the registry grows without limit.
 *
 * An entry is (owner pid, begin, end, text). fork() copies the registry with
 * the rest of memory: a child inherits its parent's mappings, so lookups by
 * address see every entry, but not its parent's temporary files, so
 * sigreg_each() visits only the entries its own process added. Read
 * sigreg_add() first.
 */
#ifndef DDP_SIGREG_H
#define DDP_SIGREG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sigreg_chunk;

struct sigreg {
    size_t text_cap;                      /* bytes of text per entry, its NUL included */
    struct sigreg_chunk *_Atomic first;   /* NULL until the first sigreg_add() */
};

/* A registry whose entries hold up to `cap` - 1 bytes of text: static
 * storage, zero-initialised, ready to use. */
#define SIGREG_INIT(cap) {.text_cap = (cap), .first = NULL}

/* One entry, as sigreg_find() or sigreg_each() copies it out. */
struct sigreg_entry {
    pid_t pid;
    uintptr_t begin, end;
    const char *text; /* the reader's copy, valid during the call only */
};

/* Adds (getpid(), begin, end, text), the text cut to the registry's
 * capacity. Returns the slot (pass it to sigreg_remove()), or NULL when no
 * memory is left for a new chunk (the caller goes on unregistered). Not
 * async-signal-safe; thread-safe. */
void *sigreg_add(struct sigreg *r, uintptr_t begin, uintptr_t end, const char *text);

/* Frees a slot sigreg_add() returned. NULL is allowed. Thread-safe. */
void sigreg_remove(struct sigreg *r, void *slot);

/* The slot whose entry has this `begin`, or NULL (for callers that keep
 * addresses, not slots). Thread-safe. */
void *sigreg_lookup(struct sigreg *r, uintptr_t begin);

/* Async-signal-safe. Copies the first entry whose range holds addr
 * (begin <= addr < end) into *e, its text into buf[0..cap); 1 when found,
 * else 0. */
int sigreg_find(struct sigreg *r, uintptr_t addr, struct sigreg_entry *e, char *buf, size_t cap);

/* Async-signal-safe. Calls fn(entry, arg) for every entry of this process,
 * each copied into buf[0..cap) first. */
void sigreg_each(struct sigreg *r, void (*fn)(const struct sigreg_entry *e, void *arg), void *arg, char *buf,
                 size_t cap);

#endif
