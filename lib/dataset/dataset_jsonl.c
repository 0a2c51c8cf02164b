/* dataset_jsonl: JSON Lines by index, through a sidecar offset index (chapter 1).
 *
 * Where it sits: behind dataset.h (read that first). A JSONL corpus is one
 * record per line; to read line i without scanning the file we need where it
 * starts. That answer is built once, by one memchr() pass over the mmapped
 * data, and written beside the data as `<data>.offsets` (or, when the data's
 * directory is not writable, in the user's cache directory: cache_dir.h says
 * which). Every later open mmaps that index: opening a
 * 200-million-line file costs two mmap() calls, and the kernel's page cache,
 * not our heap, holds whatever is read.
 *
 * The index file, native byte order:
 *
 *     header (struct jsonl_header, 72 bytes): magic "DDPJSONL", version, flags,
 *            the data file's size, mtime (ns) and a checksum of its first and
 *            last 4 KiB, a hash of the length field's name, the record count,
 *            an upper bound on record bytes, and a checksum of the header
 *     entries, count + 1 of them, each 8 bytes (the record's start offset) or
 *            16 bytes (start offset, then the length field's value) when
 *            flags has JSONL_HAS_LENGTHS; the last is a sentinel whose offset
 *            is the data's size
 *
 * An index whose header does not match the data (another file, the data
 * edited since, another length field), or whose size does not match its count
 * (truncated), is rebuilt, never used. It is written to a temporary file and
 * renamed into place, so a reader sees either the old index or the whole new
 * one. Limit: an edit in the middle of the data that keeps its size and
 * mtime (restored on purpose) is not detected; the checksum covers only the
 * head and the tail so that checking stays O(1).
 *
 * What a record is (the definition the lab and the tests share):
 * - a record is one line, without its line end and without trailing JSON
 *   whitespace (space, tab, CR, LF: RFC 8259 section 2), so CRLF files read
 *   like LF files;
 * - a blank line (empty, or JSON whitespace only) is not a record: it is
 *   skipped, as `if not line.strip(): continue` does in Python;
 * - the last line counts even without a final newline;
 * - with a length field ("num_tokens"), every record must be a JSON object
 *   whose field is a non-negative integer; the build parses each line once with
 *   jansson and stores the value, so dataset_length_of() is O(1) and nobody
 *   parses twice. Without one, the length is the record's byte count and no
 *   JSON is parsed at all.
 *
 * Reads copy the record's bytes into the caller's buffer: no allocation, no
 * lock, no shared state that changes, so any number of threads may read. As
 * with any mmapped file, the data must not be truncated while it is open (the
 * kernel answers a read past the new end with SIGBUS); replace it by renaming
 * a new file over it instead, and the next open rebuilds the index.
 */
#include "dataset/dataset_impl.h"

#include "dataset/cache_dir.h"
#include "base/error.h"
#include "base/hash.h"
#include "base/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define JSONL_MAGIC "DDPJSONL"
#define JSONL_VERSION 1u
#define JSONL_HAS_LENGTHS 1u
#define JSONL_CHECK_BYTES 4096u         /* head and tail checksummed: one page each */
#define JSONL_WRITE_ENTRIES 65536u      /* entries buffered before a write(): 0.5 or 1 MiB */
#define JSONL_RELEASE_BYTES (64u << 20) /* scanned data given back to the page cache every 64 MiB */

struct jsonl_header {
    char magic[8];
    uint32_t version;
    uint32_t flags;
    uint64_t data_size;
    uint64_t data_mtime_ns;
    uint64_t data_checksum;
    uint64_t field_hash;
    uint64_t count;
    uint64_t max_record_bytes;
    uint64_t header_checksum; /* of every byte above */
};

struct jsonl {
    const char *data; /* the whole data file, mmapped read-only */
    uint64_t data_size;
    void *index_map; /* the whole index file, mmapped read-only */
    uint64_t index_bytes;
    const uint64_t *entries;
    unsigned words; /* uint64 words per entry: 1, or 2 with lengths */
    char index_path[4096];
};

static int jsonl_is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* ---- the build: one pass over the data, entries streamed to a file --------- */

struct jsonl_builder {
    const char *path; /* the data file, for messages */
    const char *data;
    uint64_t size;
    const char *field; /* NULL: byte lengths, nothing parsed */
    int fd;            /* the temporary index file */
    uint64_t *buf;
    uint64_t buffered; /* entries in buf */
    uint64_t count;
    uint64_t max_bytes;
    uint64_t released; /* data before this offset has been handed back (MADV_DONTNEED) */
    progress_t progress;
};

static int jsonl_builder_flush(struct jsonl_builder *b)
{
    unsigned words = b->field ? 2 : 1;
    const char *p = (const char *)b->buf;
    size_t left = b->buffered * words * sizeof(uint64_t);
    while (left > 0) {
        ssize_t n = write(b->fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return err_set(ERR_IO, "%s: writing its offset index: %s", b->path, n < 0 ? strerror(errno) : "short write");
        p += n;
        left -= (size_t)n;
    }
    b->buffered = 0;
    return 0;
}

/* The 1-based line number of byte `pos`: only error messages need it, so it is
 * counted then, not on every line of the build. */
static uint64_t jsonl_line_of(const char *data, uint64_t pos)
{
    uint64_t line = 1;
    for (const char *p = data, *end = data + pos; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        line++;
    return line;
}

/* The value of the length field in the line [pos, end). */
static int jsonl_parse_length(const struct jsonl_builder *b, uint64_t pos, uint64_t end, uint64_t *length)
{
    json_error_t jerr;
    json_t *root = json_loadb(b->data + pos, (size_t)(end - pos), 0, &jerr);
    const char *why = NULL;
    json_t *value = NULL;
    if (!root)
        why = jerr.text;
    else if (!json_is_object(root))
        why = "not a JSON object";
    else if (!(value = json_object_get(root, b->field)))
        why = "the length field is missing";
    else if (!json_is_integer(value))
        why = "the length field is not an integer";
    else if (json_integer_value(value) < 0)
        why = "the length field is negative";
    else
        *length = (uint64_t)json_integer_value(value);
    json_decref(root);
    if (!why)
        return 0;
    return err_set(ERR_FORMAT, "%s: record %llu (line %llu, byte offset %llu): %s (length field \"%s\")", b->path,
                   (unsigned long long)b->count, (unsigned long long)jsonl_line_of(b->data, pos),
                   (unsigned long long)pos, why, b->field);
}

/* Records the line [pos, end) (end: its '\n', or the data's end) as the next
 * record. The scan below calls it for every line that is not blank. */
static int jsonl_builder_add(struct jsonl_builder *b, uint64_t pos, uint64_t end)
{
    unsigned words = b->field ? 2 : 1;
    uint64_t *entry = b->buf + b->buffered * words;
    entry[0] = pos;
    if (b->field) {
        int rc = jsonl_parse_length(b, pos, end, &entry[1]);
        if (rc < 0)
            return rc;
    }
    if (end - pos > b->max_bytes)
        b->max_bytes = end - pos;
    b->count++;
    if (++b->buffered == JSONL_WRITE_ENTRIES) {
        int rc = jsonl_builder_flush(b);
        if (rc < 0)
            return rc;
        progress_update(&b->progress, pos);
    }
    /* The scanned pages are still in the page cache; dropping our mapping of
     * them keeps the build's resident set flat whatever the file's size. */
    if (pos - b->released >= JSONL_RELEASE_BYTES) {
        uint64_t upto = pos & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
        madvise((void *)(b->data + b->released), (size_t)(upto - b->released), MADV_DONTNEED);
        b->released = upto;
    }
    return 0;
}

/* Finds every line of data[0, size) and hands each one that is not blank to
 * jsonl_builder_add(b, start, end), in order. */
static int jsonl_scan(struct jsonl_builder *b, const char *data, uint64_t size)
{
    // LAB:BEGIN index-scan
    uint64_t pos = 0;
    while (pos < size) {
        const char *nl = memchr(data + pos, '\n', (size_t)(size - pos));
        uint64_t end = nl ? (uint64_t)(nl - data) : size; /* no final newline: the line ends at EOF */
        uint64_t first = pos;
        while (first < end && jsonl_is_space(data[first]))
            first++;
        if (first < end) { /* one byte that is not whitespace: a record */
            int rc = jsonl_builder_add(b, pos, end);
            if (rc < 0)
                return rc;
        }
        pos = end + 1;
    }
    return 0;
    // LAB:STUB (void)b;
    // LAB:STUB (void)data;
    // LAB:STUB (void)size;
    // LAB:STUB return LAB_TODO("index-scan");
    // LAB:END
}

static void jsonl_header_seal(struct jsonl_header *h)
{
    h->header_checksum = hash_fnv1a(HASH_FNV1A_BASIS, h, offsetof(struct jsonl_header, header_checksum));
}

static int jsonl_write_all_at(int fd, const void *p, size_t n, off_t at)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p = (const char *)p + w;
        n -= (size_t)w;
        at += w;
    }
    return 0;
}

/* Builds the index of `path` into `index_path` through a temporary file and a
 * rename. `want` carries the data's fingerprint; its count and max are filled. */
static int jsonl_build(const char *path, const char *data, const char *field, struct jsonl_header *want,
                       const char *index_path)
{
    char tmp[4096 + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", index_path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return err_set(ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    fchmod(fd, 0644); /* mkstemp's 0600 would hide the index from other users of the data */
    struct jsonl_builder b = {.path = path, .data = data, .size = want->data_size, .field = field, .fd = fd};
    int rc = 0;
    b.buf = malloc(JSONL_WRITE_ENTRIES * 2 * sizeof(uint64_t));
    if (!b.buf)
        rc = err_set(ERR_NOMEM, "%s: out of memory for the index write buffer", path);
    if (rc == 0 && lseek(fd, (off_t)sizeof *want, SEEK_SET) < 0)
        rc = err_set(ERR_IO, "%s: seeking in %s: %s", path, tmp, strerror(errno));
    if (rc == 0) {
        madvise((void *)data, (size_t)want->data_size, MADV_SEQUENTIAL);
        progress_begin(&b.progress, "jsonl: building the offset index", want->data_size);
        rc = jsonl_scan(&b, data, want->data_size);
        progress_end(&b.progress, want->data_size);
        madvise((void *)data, (size_t)want->data_size, MADV_NORMAL);
    }
    if (rc == 0 && b.count == 0)
        rc = err_set(ERR_FORMAT, "%s: no records (%llu bytes, only blank lines)", path,
                     (unsigned long long)want->data_size);
    if (rc == 0) { /* the sentinel: where the last record's line region ends */
        b.buf[b.buffered * (field ? 2 : 1)] = want->data_size;
        if (field)
            b.buf[b.buffered * 2 + 1] = 0;
        b.buffered++;
        rc = jsonl_builder_flush(&b);
    }
    if (rc == 0) {
        want->count = b.count;
        want->max_record_bytes = b.max_bytes;
        jsonl_header_seal(want);
        if (jsonl_write_all_at(fd, want, sizeof *want, 0) < 0)
            rc = err_set(ERR_IO, "%s: writing %s: %s", path, tmp, strerror(errno));
    }
    free(b.buf);
    /* No fsync: after a crash a torn index fails the header or size check and
     * is rebuilt, which costs one scan, not the data. */
    if (close(fd) != 0 && rc == 0)
        rc = err_set(ERR_IO, "%s: closing %s: %s", path, tmp, strerror(errno));
    if (rc == 0 && rename(tmp, index_path) != 0)
        rc = err_set(ERR_IO, "%s: cannot rename %s to %s: %s", path, tmp, index_path, strerror(errno));
    if (rc < 0)
        unlink(tmp);
    return rc;
}

/* ---- opening: find a valid index, or build one ------------------------------ */

/* Maps `index_path` if it exists and belongs to the data described by `want`.
 * 1 when it does (j's index fields are set), 0 when it is absent, stale,
 * truncated or foreign (rebuild it), negative only for an mmap failure. */
static int jsonl_index_map(struct jsonl *j, const char *index_path, const struct jsonl_header *want)
{
    int fd = open(index_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO planted here must not block us */
    if (fd < 0)
        return 0;
    struct stat st;
    struct jsonl_header h;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= sizeof h &&
             pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h;
    if (ok) {
        uint64_t words = (h.flags & JSONL_HAS_LENGTHS) ? 2 : 1;
        uint64_t entry_bytes = words * sizeof(uint64_t);
        uint64_t body = (uint64_t)st.st_size - sizeof h;
        ok = memcmp(h.magic, JSONL_MAGIC, 8) == 0 && h.version == JSONL_VERSION &&
             h.header_checksum == hash_fnv1a(HASH_FNV1A_BASIS, &h, offsetof(struct jsonl_header, header_checksum)) &&
             h.flags == (want->flags) && h.data_size == want->data_size &&
             h.data_mtime_ns == want->data_mtime_ns && h.data_checksum == want->data_checksum &&
             h.field_hash == want->field_hash && h.count > 0 && h.max_record_bytes <= h.data_size &&
             body % entry_bytes == 0 && body / entry_bytes - 1 == h.count;
    }
    void *map = MAP_FAILED;
    if (ok) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return err_set(ERR_IO, "%s: cannot mmap: %s", index_path, strerror(e));
        }
    }
    close(fd);
    if (!ok)
        return 0;
    j->index_map = map;
    j->index_bytes = (uint64_t)st.st_size;
    j->words = (h.flags & JSONL_HAS_LENGTHS) ? 2 : 1;
    j->entries = (const uint64_t *)((const char *)map + sizeof h);
    if (j->entries[h.count * j->words] != h.data_size) { /* the sentinel */
        munmap(map, (size_t)st.st_size);
        j->index_map = NULL;
        return 0;
    }
    snprintf(j->index_path, sizeof j->index_path, "%s", index_path);
    return 1;
}

/* The index's second home, for data in a read-only directory: the user's
 * cache directory `dir`, under a name made from the data's real path. */
static int jsonl_cached_path(const char *path, const char *dir, char cached[4096])
{
    char real[4096];
    if (!realpath(path, real))
        snprintf(real, sizeof real, "%s", path);
    const char *base = strrchr(real, '/');
    base = base ? base + 1 : real;
    if (snprintf(cached, 4096, "%s/%016llx-%s.offsets", dir,
                 (unsigned long long)hash_fnv1a(HASH_FNV1A_BASIS, real, strlen(real)), base) >= 4096)
        return err_set(ERR_ARG, "%s: cache path too long", path);
    return 0;
}

static int jsonl_index_open(struct jsonl *j, const char *path, const char *field, struct jsonl_header *want)
{
    char beside[4096], dir[4096], cached[4096];
    if (snprintf(beside, sizeof beside, "%s.offsets", path) >= (int)sizeof beside)
        return err_set(ERR_ARG, "%s: path too long", path);
    int rc = jsonl_index_map(j, beside, want);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* A cache directory that cannot be named is only a problem when we must build there. */
    if (cache_dir_path(dir, sizeof dir) == 0 && jsonl_cached_path(path, dir, cached) == 0) {
        rc = jsonl_index_map(j, cached, want);
        if (rc != 0)
            return rc < 0 ? rc : 0;
    }
    /* None fits: build beside the data, else in the cache. */
    rc = jsonl_build(path, j->data, field, want, beside);
    if (rc == ERR_IO && access(path, F_OK) == 0) {
        char first[1024];
        snprintf(first, sizeof first, "%s", err_msg());
        rc = cache_dir_create(dir, sizeof dir);
        if (rc == 0)
            rc = jsonl_cached_path(path, dir, cached);
        if (rc == 0)
            rc = jsonl_build(path, j->data, field, want, cached);
        if (rc < 0)
            return err_wrap(rc, "%s; and in the cache", first);
        return jsonl_index_map(j, cached, want) == 1 ? 0 : err_set(ERR_IO, "%s: the index just built is unreadable", cached);
    }
    if (rc < 0)
        return rc;
    rc = jsonl_index_map(j, beside, want);
    if (rc < 0)
        return rc;
    return rc == 1 ? 0 : err_set(ERR_IO, "%s: the index just built is unreadable (the data changed meanwhile?)", beside);
}

/* ---- reading ---------------------------------------------------------------- */

static uint64_t jsonl_offset(const struct jsonl *j, uint64_t i) { return j->entries[i * j->words]; }

/* A corrupt index body (the header was fine) must not send a read outside the
 * data: every span is checked against its neighbours and the data's size. */
static int jsonl_check_span(const dataset_t *ds, uint64_t index, uint64_t start, uint64_t next)
{
    const struct jsonl *j = ds->impl;
    if (start < next && next <= j->data_size)
        return 0;
    return err_set(ERR_FORMAT, "%s: record %llu: entry [%llu, %llu) is corrupt (the data has %llu bytes); delete the index to rebuild it",
                   j->index_path, (unsigned long long)index, (unsigned long long)start, (unsigned long long)next,
                   (unsigned long long)j->data_size);
}

/* Where record `index` lies in the data: *start and *bytes. */
static int jsonl_record_span(const dataset_t *ds, uint64_t index, uint64_t *start, uint64_t *bytes)
{
    const struct jsonl *j = ds->impl;
    // LAB:BEGIN record-lookup
    uint64_t s = jsonl_offset(j, index), end = jsonl_offset(j, index + 1);
    int rc = jsonl_check_span(ds, index, s, end);
    if (rc < 0)
        return rc;
    /* Between this record and the next lie its '\n' (or "\r\n"), then any
     * blank lines; the last record ends at the data's end, newline or not. */
    while (end > s && jsonl_is_space(j->data[end - 1]))
        end--;
    *start = s;
    *bytes = end - s;
    return 0;
    // LAB:STUB (void)j;
    // LAB:STUB *start = *bytes = 0;
    // LAB:STUB return LAB_TODO("record-lookup");
    // LAB:END
}

static int jsonl_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec)
{
    const struct jsonl *j = ds->impl;
    uint64_t start, bytes;
    int rc = jsonl_record_span(ds, index, &start, &bytes);
    if (rc < 0)
        return rc;
    if (bytes > cap)
        return err_set(ERR_RANGE, "%s: record %llu has %llu bytes, the buffer only %llu", ds->name,
                       (unsigned long long)index, (unsigned long long)bytes, (unsigned long long)cap);
    memcpy(dst, j->data + start, (size_t)bytes);
    rec->bytes = bytes;
    rec->length = j->words == 2 ? j->entries[index * 2 + 1] : bytes;
    rec->label = -1;
    return 0;
}

static int jsonl_length_of(const dataset_t *ds, uint64_t index, uint64_t *length)
{
    const struct jsonl *j = ds->impl;
    if (j->words == 2) {
        *length = j->entries[index * 2 + 1];
        return 0;
    }
    uint64_t start;
    return jsonl_record_span(ds, index, &start, length);
}

static void jsonl_close(dataset_t *ds)
{
    struct jsonl *j = ds->impl;
    if (j) {
        if (j->index_map)
            munmap(j->index_map, (size_t)j->index_bytes);
        if (j->data)
            munmap((void *)j->data, (size_t)j->data_size);
        free(j);
    }
    free(ds);
}

static const struct dataset_ops jsonl_ops = {.read = jsonl_read, .length_of = jsonl_length_of, .close = jsonl_close};

int dataset_jsonl_open(const char *path, const struct dataset_options *opt, dataset_t **out)
{
    *out = NULL;
    /* O_NONBLOCK: opening a FIFO (or a device) for reading would wait for a
     * writer forever; this way it opens at once and fails the S_ISREG test.
     * On a regular file the flag changes nothing, and we only mmap it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return err_set(ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(ERR_IO, "%s: not a regular file%s", path,
                       S_ISDIR(st.st_mode) ? " (a directory)" : S_ISFIFO(st.st_mode) ? " (a FIFO)" : "");
    }
    if (st.st_size == 0) {
        close(fd);
        return err_set(ERR_FORMAT, "%s: the file is empty (no records)", path);
    }
    dataset_t *ds = calloc(1, sizeof *ds);
    struct jsonl *j = calloc(1, sizeof *j);
    if (!ds || !j) {
        close(fd);
        free(ds);
        free(j);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    ds->ops = &jsonl_ops;
    ds->impl = j;
    snprintf(ds->name, sizeof ds->name, "jsonl:%s", path);
    j->data_size = (uint64_t)st.st_size;
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) {
        jsonl_close(ds);
        return err_set(ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
    }
    j->data = map;

    const char *field = opt ? opt->length_field : NULL;
    struct jsonl_header want = {.version = JSONL_VERSION, .flags = field ? JSONL_HAS_LENGTHS : 0};
    memcpy(want.magic, JSONL_MAGIC, 8);
    want.data_size = j->data_size;
    want.data_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    uint64_t check = j->data_size < JSONL_CHECK_BYTES ? j->data_size : JSONL_CHECK_BYTES;
    want.data_checksum = hash_fnv1a(hash_fnv1a(HASH_FNV1A_BASIS, j->data, check), j->data + j->data_size - check, check);
    want.field_hash = field ? hash_fnv1a(HASH_FNV1A_BASIS, field, strlen(field)) : 0;

    int rc = jsonl_index_open(j, path, field, &want);
    if (rc < 0) {
        jsonl_close(ds);
        return rc;
    }
    const struct jsonl_header *h = j->index_map;
    ds->info.kind = DATASET_JSONL;
    ds->info.length = h->count;
    ds->info.record_bytes = 0;
    ds->info.max_record_bytes = h->max_record_bytes;
    ds->info.has_labels = 0;
    *out = ds;
    return 0;
}
