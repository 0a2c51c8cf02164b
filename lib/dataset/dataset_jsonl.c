/* dataset_jsonl: JSON Lines by index, through a sidecar offset index (chapter 1).
 *
 * Where it sits: behind dataset.h (read that first). A JSONL corpus is one
 * record per line; to read line i without scanning the file we need where it
 * starts. That answer is built once, by one memchr() pass over the mmapped
 * data, and written beside the data as `<data>.offsets` (or, when the data's
 * directory is not writable, in the user's cache directory: cache_dir.h says
 * which). Every later open mmaps that index: opening a 200-million-line file
 * costs two mmap() calls, and the kernel's page cache, not our heap, holds
 * whatever is read. A length field ("num_tokens") gets a length table of its
 * own beside the index, built once by parsing every record; dataset_jsonl.h
 * describes both files.
 *
 * An index or length table whose header does not match the data (another
 * file, the data edited since, another field), or whose size does not match
 * its count (truncated), is rebuilt, never used. It is written to a temporary
 * file and renamed into place (fsutil.h), so a reader sees either the old file
 * or the whole new one, and the process that built it maps what it wrote, not
 * whatever the name holds by then. Limit: an edit in the middle of the data
 * that keeps its size and mtime (restored on purpose) is not detected at
 * open; the checksum covers only the head and the tail so that opening stays
 * O(1). Every read then checks its own record against the data: it must be
 * exactly one line (it starts at byte 0 or after a '\n', its span ends at a
 * '\n' or at the end, and holds no other line), and its index words must carry
 * their tags. An index whose entries were moved or edited fails these checks
 * and is refused; it never serves another record instead.
 *
 * What a record is (the definition the lab and the tests share):
 * - a record is one line, without its line end and without trailing JSON
 *   whitespace (space, tab, CR, LF: RFC 8259 section 2), so CRLF files read
 *   like LF files;
 * - a blank line (empty, or JSON whitespace only) is not a record: it is
 *   skipped, as `if not line.strip(): continue` does in Python;
 * - the last line counts even without a final newline;
 * - with a length field ("num_tokens"), every record must be a JSON object
 *   whose field is a non-negative integer; its length table is built by
 *   parsing each record once with jansson, so dataset_length_of() is O(1) and
 *   nobody parses twice. Without one, the length is the record's byte count
 *   and no JSON is parsed to open or read. dataset_check_record() parses a
 *   record to validate it (JSON syntax and UTF-8), for --check.
 *
 * Reads copy the record's bytes into the caller's buffer: no allocation, no
 * lock, no shared state that changes, so any number of threads may read. As
 * with any mmapped file, the data must not be truncated while it is open (the
 * kernel answers a read past the new end with SIGBUS, which mapfile.h turns
 * into a message naming the file); replace it by renaming a new file over it
 * instead, and the next open rebuilds the index.
 */
#include "dataset/dataset_impl.h"

#include "dataset/cache_dir.h"
#include "dataset/dataset_jsonl.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/hash.h"
#include "base/mapfile.h"
#include "base/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define JSONL_CHECK_BYTES 4096u         /* head and tail checksummed: one page each */
#define JSONL_WRITE_WORDS 65536u        /* words buffered before a write(): 512 KiB */
#define JSONL_RELEASE_BYTES (64u << 20) /* scanned data given back to the page cache every 64 MiB */
#define JSONL_FIELD_NAME_MAX 48         /* longer field names are hashed in file names */

/* One mapped sidecar file: the offset index or a length table. */
struct jsonl_sidecar {
    const void *map; /* the whole file, mmapped read-only */
    uint64_t bytes;
    const uint64_t *words;
    char path[4096];
};

struct jsonl {
    char path[4096];  /* the data file, as given (ds->name may be cut short) */
    const char *data; /* the whole data file, mmapped read-only */
    uint64_t data_size;
    struct jsonl_sidecar index;   /* the offset index */
    struct jsonl_sidecar lengths; /* the length field's table; map NULL without a field */
    const uint64_t *entries;      /* index.words */
};

static uint64_t jsonl_offset(const struct jsonl *j, uint64_t i) { return j->entries[i] & JSONL_VALUE_MASK; }

static int jsonl_is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The 1-based line number of byte `pos`: only error messages need it, so it is
 * counted then, not on every line of a build. */
static uint64_t jsonl_line_of(const char *data, uint64_t pos)
{
    uint64_t line = 1;
    for (const char *p = data, *end = data + pos; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        line++;
    return line;
}

/* ---- builds: one pass, words streamed to a temporary file ------------------- */

struct jsonl_builder {
    const char *path; /* the data file, for messages */
    const char *data;
    uint64_t size;
    struct fsutil_tmp *out; /* the file being written */
    uint64_t *buf;
    uint64_t buffered; /* words in buf */
    uint64_t count;    /* words pushed */
    uint64_t max;      /* the largest record (offsets) or length (lengths) */
    uint64_t released; /* data before this offset has been handed back (MADV_DONTNEED) */
    progress_t progress;
};

static int jsonl_builder_flush(struct jsonl_builder *b)
{
    int rc = fsutil_write_all(b->out->fd, b->buf, (size_t)b->buffered * sizeof(uint64_t), b->out->final);
    b->buffered = 0;
    return rc;
}

/* Appends word `count` holding `value`, writing a full buffer out. */
static int jsonl_builder_push(struct jsonl_builder *b, uint64_t value)
{
    b->buf[b->buffered++] = jsonl_word(b->count++, value);
    return b->buffered == JSONL_WRITE_WORDS ? jsonl_builder_flush(b) : 0;
}

/* Called as the build passes data offset `pos`: draws progress, and drops our
 * mapping of the pages behind it. They stay in the page cache; the build's
 * resident set stays flat whatever the file's size. */
static void jsonl_builder_passed(struct jsonl_builder *b, uint64_t pos)
{
    if (b->buffered == 0)
        progress_update(&b->progress, pos);
    if (pos - b->released >= JSONL_RELEASE_BYTES) {
        uint64_t upto = pos & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
        madvise((void *)(b->data + b->released), (size_t)(upto - b->released), MADV_DONTNEED);
        b->released = upto;
    }
}

/* Records the line [pos, end) (end: its '\n', or the data's end) as the next
 * record of the offset index. The scan below calls it for every line that is
 * not blank. 0, or ERR_IO when the index cannot be written. */
static int jsonl_builder_add(struct jsonl_builder *b, uint64_t pos, uint64_t end)
{
    if (end - pos > b->max)
        b->max = end - pos;
    int rc = jsonl_builder_push(b, pos);
    jsonl_builder_passed(b, pos);
    return rc;
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

/* Writes the offset index's words: one per record, then the sentinel. */
static int jsonl_fill_offsets(const dataset_t *ds, const char *field, struct jsonl_builder *b)
{
    (void)ds;
    (void)field;
    progress_begin(&b->progress, "jsonl: building the offset index", b->size);
    madvise((void *)b->data, (size_t)b->size, MADV_SEQUENTIAL);
    int rc = jsonl_scan(b, b->data, b->size);
    if (rc > 0) /* a "true" from lab 1's scan would pass for success, with no index built */
        rc = err_set(ERR_STATE, "%s: jsonl_scan returned %d: 0 once every line is done, or a negative error",
                     b->path, rc);
    madvise((void *)b->data, (size_t)b->size, MADV_NORMAL);
    progress_end(&b->progress, b->size);
    if (rc == 0 && b->count == 0)
        return err_set(ERR_FORMAT, "%s: no records (%llu bytes, only blank lines)", b->path,
                       (unsigned long long)b->size);
    uint64_t records = b->count;
    if (rc == 0) /* the sentinel: where the last record's line region ends */
        rc = jsonl_builder_push(b, b->size);
    b->count = records;
    return rc;
}

static int jsonl_record_span(const dataset_t *ds, uint64_t index, uint64_t *start, uint64_t *bytes);
static int jsonl_one_line(const dataset_t *ds, uint64_t index, const char *record, uint64_t bytes);

/* A length field's value: a non-negative integer, or, when the record's
 * numbers were read as reals, a real that is a whole number a double holds
 * exactly (up to 2^53). 1 and *out, else 0. */
static int jsonl_whole_number(const json_t *v, int as_reals, uint64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 1;
    }
    double d = json_is_real(v) ? json_real_value(v) : -1;
    if (!as_reals || d < 0 || d > 9007199254740992.0 || d != (double)(uint64_t)d)
        return 0;
    *out = (uint64_t)d;
    return 1;
}

/* A record parsed with jansson. Its length field in *length when `field` is
 * not NULL, else only checked: valid JSON in UTF-8 (RFC 8259, RFC 3629). 0, or
 * ERR_FORMAT naming the file, record, line and byte offset. */
static int jsonl_parse(const dataset_t *ds, uint64_t index, const char *field, uint64_t *length)
{
    const struct jsonl *j = ds->impl;
    uint64_t start, bytes;
    int rc = jsonl_record_span(ds, index, &start, &bytes);
    if (rc == 0)
        rc = jsonl_one_line(ds, index, j->data + start, bytes);
    if (rc < 0)
        return rc;
    /* Any JSON value may be a record (JSON_DECODE_ANY); "\u0000" is valid JSON
     * (JSON_ALLOW_NUL). To validate, integers past 64 bits are valid JSON too,
     * read as reals; for a length, the exact integer is wanted first. */
    size_t flags = JSON_DECODE_ANY | JSON_ALLOW_NUL | (field ? 0 : JSON_DECODE_INT_AS_REAL);
    json_error_t jerr;
    json_t *root = json_loadb(j->data + start, (size_t)bytes, flags, &jerr);
    int as_reals = 0; /* an integer past 64 bits somewhere: the record is read again, integers as reals */
    if (!root && field && json_error_code(&jerr) == json_error_numeric_overflow) {
        root = json_loadb(j->data + start, (size_t)bytes, flags | JSON_DECODE_INT_AS_REAL, &jerr);
        as_reals = 1;
    }
    const char *why = NULL;
    json_t *value = NULL;
    if (!root || !field)
        why = root ? NULL : jerr.text;
    else if (!json_is_object(root))
        why = "not a JSON object";
    else if (!(value = json_object_get(root, field)))
        why = "the length field is missing";
    else if (json_is_integer(value) && json_integer_value(value) < 0)
        why = "the length field is negative";
    else if (!jsonl_whole_number(value, as_reals, length))
        why = as_reals ? "the length field is not an integer below 2^53 (the record holds an integer past 2^63, "
                         "so jansson read its numbers as reals)"
                       : "the length field is not an integer";
    else if (*length > JSONL_VALUE_MASK)
        why = "the length field is past 2^48 - 1, the length table's limit";
    json_decref(root);
    if (!why)
        return 0;
    const char *path = j->path;
    char where[160], field_note[96] = "";
    snprintf(where, sizeof where, "record %llu (line %llu, byte offset %llu)", (unsigned long long)index,
             (unsigned long long)jsonl_line_of(j->data, start), (unsigned long long)start);
    if (field)
        snprintf(field_note, sizeof field_note, " (length field \"%.64s\")", field);
    if (!root) {
        uint64_t at = start + ((uint64_t)jerr.position < bytes ? (uint64_t)jerr.position : bytes);
        return err_set(ERR_FORMAT, "%s: %s: not valid JSON: %s, near byte offset %llu%s", path, where, why,
                       (unsigned long long)at, field_note);
    }
    return err_set(ERR_FORMAT, "%s: %s: %s%s", path, where, why, field_note);
}

/* Writes a length table's words: the field of every record, in order. */
static int jsonl_fill_lengths(const dataset_t *ds, const char *field, struct jsonl_builder *b)
{
    uint64_t count = ds->info.length;
    int rc = 0;
    progress_begin(&b->progress, "jsonl: reading the length field", b->size);
    madvise((void *)b->data, (size_t)b->size, MADV_SEQUENTIAL);
    for (uint64_t i = 0; rc == 0 && i < count; i++) {
        uint64_t length = 0;
        rc = jsonl_parse(ds, i, field, &length);
        if (rc == 0)
            rc = jsonl_builder_push(b, length);
        if (length > b->max)
            b->max = length;
        jsonl_builder_passed(b, jsonl_offset(ds->impl, i));
    }
    madvise((void *)b->data, (size_t)b->size, MADV_NORMAL);
    progress_end(&b->progress, b->size);
    return rc;
}

typedef int (*jsonl_fill_fn)(const dataset_t *ds, const char *field, struct jsonl_builder *b);

static void jsonl_header_seal(struct jsonl_header *h)
{
    h->header_checksum = hash_fnv1a(HASH_FNV1A_BASIS, h, offsetof(struct jsonl_header, header_checksum));
}

/* Builds the sidecar `final` with `fill` through a temporary file, maps what
 * was written, then renames it into place. The mapping is of our own file,
 * whatever another process renames over `final` meanwhile (two opens with
 * different length fields, or two builds at once). `want` carries the header;
 * its count and max are filled. */
static int jsonl_sidecar_build(const dataset_t *ds, struct jsonl_sidecar *sc, const char *final,
                               struct jsonl_header *want, jsonl_fill_fn fill, const char *field)
{
    const struct jsonl *j = ds->impl;
    const char *path = j->path;
    /* fsutil writes through a link to a regular file: a sidecar name that is a link (to the data, to
     * another dataset) would replace what it names with this index. The name is ours, not the user's:
     * never written through (ERR_IO: jsonl_sidecar_open() then builds in the cache) */
    if (fsutil_is_link(final))
        return err_set(ERR_IO, "%s: %s is a symbolic link: refusing to write the index through it", path, final);
    struct fsutil_tmp t;
    int rc = fsutil_tmp_open(&t, final, NULL);
    if (rc < 0)
        return err_wrap(rc, "%s", path);
    struct jsonl_builder b = {.path = path, .data = j->data, .size = j->data_size, .out = &t};
    b.buf = malloc(JSONL_WRITE_WORDS * sizeof(uint64_t));
    if (!b.buf)
        rc = err_set(ERR_NOMEM, "%s: out of memory for the index write buffer", path);
    if (rc == 0 && lseek(t.fd, (off_t)sizeof *want, SEEK_SET) < 0)
        rc = err_set(ERR_IO, "%s: seeking in %s: %s", path, t.path, strerror(errno));
    if (rc == 0)
        rc = fill(ds, field, &b);
    if (rc == 0)
        rc = jsonl_builder_flush(&b);
    uint64_t words = b.count + (want->flags == JSONL_FILE_OFFSETS); /* the sentinel */
    if (rc == 0) {
        want->count = b.count;
        want->max_value = b.max;
        jsonl_header_seal(want);
        if (pwrite(t.fd, want, sizeof *want, 0) != (ssize_t)sizeof *want)
            rc = err_set(ERR_IO, "%s: writing %s: %s", path, t.path, strerror(errno));
    }
    free(b.buf);
    sc->bytes = sizeof *want + words * sizeof(uint64_t);
    if (rc == 0)
        rc = mapfile_map(t.fd, (size_t)sc->bytes, final, &sc->map);
    /* No fsync: after a crash a torn file fails the header or size check and
     * is rebuilt, which costs one scan, not the data. */
    rc = fsutil_tmp_finish(&t, rc, 0);
    if (rc < 0) {
        mapfile_unmap(sc->map, (size_t)sc->bytes);
        sc->map = NULL;
        return rc;
    }
    sc->words = (const uint64_t *)((const char *)sc->map + sizeof *want);
    snprintf(sc->path, sizeof sc->path, "%s", final);
    return 0;
}

/* ---- opening: find a valid sidecar, or build one ------------------------------ */

/* Maps `path` if it exists and belongs to the data as `want` describes it.
 * 1 when it does (sc is set), 0 when it is absent, stale, truncated or
 * foreign (rebuild it), negative only for an mmap failure. */
static int jsonl_sidecar_map(struct jsonl_sidecar *sc, const char *path, const struct jsonl_header *want)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO planted here must not block us */
    if (fd < 0)
        return 0;
    struct stat st;
    struct jsonl_header h;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= sizeof h &&
             pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h;
    if (ok) {
        uint64_t body = (uint64_t)st.st_size - sizeof h, extra = want->flags == JSONL_FILE_OFFSETS;
        ok = memcmp(h.magic, JSONL_MAGIC, 8) == 0 && h.version == JSONL_VERSION &&
             h.header_checksum == hash_fnv1a(HASH_FNV1A_BASIS, &h, offsetof(struct jsonl_header, header_checksum)) &&
             h.flags == want->flags && h.data_size == want->data_size && h.data_mtime_ns == want->data_mtime_ns &&
             h.data_checksum == want->data_checksum && h.field_hash == want->field_hash && h.count > 0 &&
             (want->count == 0 || h.count == want->count) && body % sizeof(uint64_t) == 0 &&
             body / sizeof(uint64_t) >= extra && h.count == body / sizeof(uint64_t) - extra && /* no wrap */
             (want->flags != JSONL_FILE_OFFSETS || h.max_value <= h.data_size);
    }
    const void *map = NULL;
    int rc = ok ? mapfile_map(fd, (size_t)st.st_size, path, &map) : 0;
    close(fd);
    if (rc < 0 || !ok)
        return rc;
    sc->map = map;
    sc->bytes = (uint64_t)st.st_size;
    sc->words = (const uint64_t *)((const char *)map + sizeof h);
    if (want->flags == JSONL_FILE_OFFSETS && sc->words[h.count] != jsonl_word(h.count, h.data_size)) {
        mapfile_unmap(map, (size_t)sc->bytes); /* the sentinel is not the data's size */
        sc->map = NULL;
        return 0;
    }
    snprintf(sc->path, sizeof sc->path, "%s", path);
    return 1;
}

/* The file name's suffix for a length table of `field`: the name itself when
 * it is a plain word, else its hash. */
static void jsonl_lengths_suffix(const char *field, char out[64])
{
    size_t n = strlen(field);
    int plain = n > 0 && n <= JSONL_FIELD_NAME_MAX && strspn(field, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                                 "0123456789_.-") == n;
    if (plain)
        snprintf(out, 64, ".lengths.%s", field);
    else
        snprintf(out, 64, ".lengths.x%016llx", (unsigned long long)hash_fnv1a(HASH_FNV1A_BASIS, field, n));
}

/* The sidecar's second home, for data in a read-only directory: the user's
 * cache directory `dir`, under a name made from the data's real path. */
static int jsonl_cached_path(const char *path, const char *dir, const char *suffix, char cached[4096])
{
    char real[4096];
    if (!realpath(path, real))
        snprintf(real, sizeof real, "%s", path);
    const char *base = strrchr(real, '/');
    base = base ? base + 1 : real;
    if (snprintf(cached, 4096, "%s/%016llx-%s%s", dir,
                 (unsigned long long)hash_fnv1a(HASH_FNV1A_BASIS, real, strlen(real)), base, suffix) >= 4096)
        return err_set(ERR_ARG, "%s: cache path too long", path);
    return 0;
}

/* Maps the sidecar `<path><suffix>` (beside the data, else in the cache
 * directory) when a valid one exists, else builds it with `fill`: beside
 * the data, or in the cache when the data's directory is not writable. */
static int jsonl_sidecar_open(const dataset_t *ds, struct jsonl_sidecar *sc, const char *suffix,
                              struct jsonl_header *want, jsonl_fill_fn fill, const char *field)
{
    const char *path = ((const struct jsonl *)ds->impl)->path;
    char beside[4096], dir[4096], cached[4096];
    if (snprintf(beside, sizeof beside, "%s%s", path, suffix) >= (int)sizeof beside)
        return err_set(ERR_ARG, "%s: path too long", path);
    int rc = jsonl_sidecar_map(sc, beside, want);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    /* A cache directory that cannot be named is only a problem when we must build there. */
    if (cache_dir_path(dir, sizeof dir) == 0 && jsonl_cached_path(path, dir, suffix, cached) == 0) {
        rc = jsonl_sidecar_map(sc, cached, want);
        if (rc != 0)
            return rc < 0 ? rc : 0;
    }
    rc = jsonl_sidecar_build(ds, sc, beside, want, fill, field);
    if (rc != ERR_IO || access(path, F_OK) != 0)
        return rc;
    char first[1024];
    snprintf(first, sizeof first, "%s", err_msg());
    rc = cache_dir_create(dir, sizeof dir);
    if (rc == 0)
        rc = jsonl_cached_path(path, dir, suffix, cached);
    if (rc == 0)
        rc = jsonl_sidecar_build(ds, sc, cached, want, fill, field);
    return rc < 0 ? err_wrap(rc, "%s; and in the cache", first) : 0;
}

/* ---- reading ---------------------------------------------------------------- */

/* The error of a corrupt span: the index is named, with what is wrong. */
static int jsonl_corrupt(const dataset_t *ds, uint64_t index, uint64_t start, uint64_t next, const char *why)
{
    const struct jsonl *j = ds->impl;
    return err_set(ERR_FORMAT, "%s: record %llu: entry [%llu, %llu) is corrupt: %s (the data has %llu bytes); "
                   "delete the index to rebuild it", j->index.path, (unsigned long long)index,
                   (unsigned long long)start, (unsigned long long)next, why, (unsigned long long)j->data_size);
}

/* A damaged or edited index (its header was fine) must neither send a read
 * outside the data nor serve another record. The span [start, next) of
 * record `index` must be what its index words say, tags included, and run
 * from a line start to a line start (or the end). What is left, that the
 * span holds exactly one line that is not blank, needs a scan of the record:
 * jsonl_one_line() does it where the record is read anyway. Together they
 * refuse an offset moved anywhere in the data (tested for every position). */
static int jsonl_check_span(const dataset_t *ds, uint64_t index, uint64_t start, uint64_t next)
{
    const struct jsonl *j = ds->impl;
    if (!(start < next && next <= j->data_size))
        return jsonl_corrupt(ds, index, start, next, "it is outside the data, or empty");
    if (j->entries[index] != jsonl_word(index, start) || j->entries[index + 1] != jsonl_word(index + 1, next))
        return jsonl_corrupt(ds, index, start, next, "its words do not carry the tags of their positions: moved or "
                             "overwritten");
    if ((start > 0 && j->data[start - 1] != '\n') || (next < j->data_size && j->data[next - 1] != '\n'))
        return jsonl_corrupt(ds, index, start, next, "it does not run from a line start to a line start");
    return 0;
}

/* The record's bytes, trimmed as jsonl_record_span() trims them, are not
 * empty and hold no line end: a span that the index stretched over a blank
 * line or over two records is refused. Run on the copy a read just made,
 * where the scan costs least (chapter 1's README, "The offset index"). */
static int jsonl_one_line(const dataset_t *ds, uint64_t index, const char *record, uint64_t bytes)
{
    const char *why = bytes == 0 ? "it holds only whitespace"
                      : memchr(record, '\n', (size_t)bytes) ? "it holds more than one line" : NULL;
    if (!why)
        return 0;
    const struct jsonl *j = ds->impl;
    return jsonl_corrupt(ds, index, jsonl_offset(j, index), jsonl_offset(j, index + 1), why);
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

/* Record `index`'s batching length: its length-table word, tag checked, or
 * its byte count. */
static int jsonl_length_at(const dataset_t *ds, uint64_t index, uint64_t bytes, uint64_t *length)
{
    const struct jsonl *j = ds->impl;
    if (!j->lengths.map) {
        *length = bytes;
        return 0;
    }
    uint64_t word = j->lengths.words[index], value = word & JSONL_VALUE_MASK;
    if (word != jsonl_word(index, value))
        return err_set(ERR_FORMAT, "%s: record %llu: its length word does not carry the tag of its position: "
                       "moved or overwritten; delete the table to rebuild it", j->lengths.path,
                       (unsigned long long)index);
    *length = value;
    return 0;
}

static int jsonl_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec)
{
    const struct jsonl *j = ds->impl;
    uint64_t start, bytes;
    int rc = jsonl_record_span(ds, index, &start, &bytes);
    if (rc < 0)
        return rc;
    /* A span stretched by a corrupt index is said to be that, not too long. */
    if (bytes > cap && bytes <= j->data_size - start && (rc = jsonl_one_line(ds, index, j->data + start, bytes)) < 0)
        return rc;
    if (bytes > cap)
        return err_set(ERR_RANGE, "%s: record %llu has %llu bytes, the buffer only %llu", ds->name,
                       (unsigned long long)index, (unsigned long long)bytes, (unsigned long long)cap);
    if ((rc = jsonl_length_at(ds, index, bytes, &rec->length)) < 0)
        return rc;
    memcpy(dst, j->data + start, (size_t)bytes);
    if ((rc = jsonl_one_line(ds, index, dst, bytes)) < 0)
        return rc;
    rec->bytes = bytes;
    rec->label = -1;
    return 0;
}

static int jsonl_length_of(const dataset_t *ds, uint64_t index, uint64_t *length)
{
    const struct jsonl *j = ds->impl;
    uint64_t start, bytes = 0;
    if (!j->lengths.map) {
        int rc = jsonl_record_span(ds, index, &start, &bytes);
        if (rc == 0)
            rc = jsonl_one_line(ds, index, j->data + start, bytes);
        if (rc < 0)
            return rc;
    }
    return jsonl_length_at(ds, index, bytes, length);
}

/* --check: the record is valid JSON in UTF-8. JSONL records have no labels. */
static int jsonl_check(const dataset_t *ds, uint64_t index, uint32_t classes)
{
    (void)classes;
    return jsonl_parse(ds, index, NULL, NULL);
}

static void jsonl_close(dataset_t *ds)
{
    struct jsonl *j = ds->impl;
    if (j) {
        mapfile_unmap(j->lengths.map, (size_t)j->lengths.bytes);
        mapfile_unmap(j->index.map, (size_t)j->index.bytes);
        mapfile_unmap(j->data, (size_t)j->data_size);
        free(j);
    }
    free(ds);
}

static const struct dataset_ops jsonl_ops = {
    .read = jsonl_read, .length_of = jsonl_length_of, .check = jsonl_check, .close = jsonl_close};

int dataset_jsonl_open(const char *path, const struct dataset_options *opt, dataset_t **out)
{
    *out = NULL;
    int fd;
    struct stat st;
    int rc = fsutil_open_read(path, NULL, &fd, &st); /* a FIFO or a device is refused, never waited on */
    if (rc < 0)
        return rc;
    if (st.st_size == 0)
        rc = err_set(ERR_FORMAT, "%s: the file is empty (no records)", path);
    else if ((uint64_t)st.st_size > JSONL_VALUE_MASK)
        rc = err_set(ERR_RANGE, "%s: %llu bytes: the offset index addresses files of up to 2^48 bytes (256 TiB)",
                     path, (unsigned long long)st.st_size);
    dataset_t *ds = rc == 0 ? calloc(1, sizeof *ds) : NULL;
    struct jsonl *j = rc == 0 ? calloc(1, sizeof *j) : NULL;
    if (rc == 0 && (!ds || !j))
        rc = err_set(ERR_NOMEM, "%s: out of memory", path);
    if (rc < 0) {
        close(fd);
        free(ds);
        free(j);
        return rc;
    }
    ds->ops = &jsonl_ops;
    ds->impl = j;
    snprintf(ds->name, sizeof ds->name, "jsonl:%s", path);
    if (snprintf(j->path, sizeof j->path, "%s", path) >= (int)sizeof j->path) {
        close(fd);
        jsonl_close(ds);
        return err_set(ERR_ARG, "%.200s...: path too long", path);
    }
    j->data_size = (uint64_t)st.st_size;
    const void *map;
    rc = mapfile_map(fd, (size_t)st.st_size, path, &map);
    close(fd);
    if (rc < 0) {
        jsonl_close(ds);
        return rc;
    }
    j->data = map;

    /* What binds a sidecar to this data; the index and the length tables share it. */
    struct jsonl_header want = {.version = JSONL_VERSION, .flags = JSONL_FILE_OFFSETS};
    memcpy(want.magic, JSONL_MAGIC, 8);
    want.data_size = j->data_size;
    want.data_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    uint64_t check = j->data_size < JSONL_CHECK_BYTES ? j->data_size : JSONL_CHECK_BYTES;
    want.data_checksum = hash_fnv1a(hash_fnv1a(HASH_FNV1A_BASIS, j->data, check), j->data + j->data_size - check, check);

    rc = jsonl_sidecar_open(ds, &j->index, ".offsets", &want, jsonl_fill_offsets, NULL);
    if (rc == 0) {
        const struct jsonl_header *h = j->index.map;
        j->entries = j->index.words;
        ds->info = (struct dataset_info){.kind = DATASET_JSONL, .length = h->count, .max_record_bytes = h->max_value};
    }
    const char *field = opt ? opt->length_field : NULL;
    if (rc == 0 && field) {
        char suffix[64];
        jsonl_lengths_suffix(field, suffix);
        want.flags = JSONL_FILE_LENGTHS;
        want.field_hash = hash_fnv1a(HASH_FNV1A_BASIS, field, strlen(field));
        want.count = ds->info.length;
        rc = jsonl_sidecar_open(ds, &j->lengths, suffix, &want, jsonl_fill_lengths, field);
    }
    if (rc < 0) {
        jsonl_close(ds);
        return rc;
    }
    *out = ds;
    return 0;
}
