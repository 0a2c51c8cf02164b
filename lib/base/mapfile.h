/* mapfile: read-only file mappings that are named when their file shrinks.
 *
 * Where it sits: under the datasets, which serve every record straight from
 * mmap()ed files (IDX data and caches, JSONL data, offset indexes and length
 * tables). A mapped file that another process truncates turns a read past its
 * new end into SIGBUS, and the process dies with no word of which file. A
 * mapping made here is registered (sigreg.h), and the SIGBUS handler installed
 * with the first one looks the faulting address up: when it falls in one of
 * ours, it prints
 *
 *     chapter-1: data.jsonl: truncated while mapped: it had 8192 bytes when it
 *     was opened and has 4096 now, and a read of byte 6000 faulted (SIGBUS). ...
 *
 * on stderr, removes this process's temporary files (fsutil.h) and exits with
 * status 1. It cannot do better: the read that faulted is somewhere inside a
 * memcpy, and there is nothing valid to resume it with. A SIGBUS at any other
 * address goes on to the action that was there before (the default: a core
 * dump; a sanitizer's report), as if we were not there.
 *
 * Replace a dataset file by writing a new one and renaming it over the old:
 * the mapping keeps the old inode, and nothing faults.
 */
#ifndef DDP_MAPFILE_H
#define DDP_MAPFILE_H

#include <stddef.h>

/* Maps the first `len` bytes (> 0) of the file open on `fd`, read-only and
 * shared, and registers the mapping under `name` (the path messages use).
 * 0 and *addr, or ERR_IO naming `name`. */
int mapfile_map(int fd, size_t len, const char *name, const void **addr);

/* Unregisters and unmaps a mapping made by mapfile_map(). NULL is allowed. */
void mapfile_unmap(const void *addr, size_t len);

#endif
