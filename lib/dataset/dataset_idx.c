/* dataset_idx: IDX files (MNIST, Fashion-MNIST), plain or gzipped, served by
 * index from a memory mapping (chapter 1; the format is described in
 * dataset_idx.h, read that first).
 *
 * Where it sits: behind dataset.h. dataset_open() hands us a path; we map the
 * file, check every byte the header promises is there, and from then on a
 * read is one memcpy out of the page cache: no heap, no lock, no system call,
 * so any number of loader threads can read the same dataset at once.
 *
 * Gzipped files cannot be mapped as they are, so the first open inflates each
 * one with zlib into a cache file and maps that; later opens map the cache
 * directly. The cache is written under a temporary name and renamed into place
 * (rename is atomic on POSIX; fsutil.h also removes the temporary file on
 * SIGINT or SIGTERM), so a run killed halfway leaves either no cache or a
 * complete one. Its header binds it to the source file's size, mtime, device
 * and inode: a source that changed, or a cache cut short, is detected and
 * rebuilt, never used. The inflate is bounded by the IDX header it produces
 * first: a stream that would inflate past the promised size (a gzip bomb) is
 * stopped there, and the disk is asked for that size before it is filled.
 */
#include "dataset/dataset_idx.h"

#include "dataset/cache_dir.h"
#include "dataset/dataset_impl.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/hash.h"
#include "base/mapfile.h"
#include "base/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_CHUNK (256u << 10)             /* inflate and write in 256 KiB steps */
#define IDX_CACHE_MAGIC "DDPGZC01"         /* "ddp gzip cache, version 1" */
#define IDX_CACHE_SUFFIX ".ddpcache"

/* The cache file starts with this, then the decompressed bytes. Native byte
 * order: a cache is local to the machine that built it. 64 bytes. */
struct idx_cache_header {
    char magic[8];
    uint64_t source_bytes, source_dev, source_ino;
    int64_t source_mtime_s, source_mtime_ns;
    uint64_t data_bytes; /* decompressed bytes that follow the header */
    uint64_t reserved;
};

/* One mapped IDX file and what its header says. */
struct idx_file {
    char path[PATH_MAX];
    char cache[PATH_MAX];     /* the decompressed copy that is mapped, "" for a plain file */
    char where[PATH_MAX + 16]; /* how messages name its bytes */
    uint64_t disk_bytes, cache_bytes;
    const void *map;
    size_t map_bytes;
    const uint8_t *bytes; /* the IDX content: the file, or the cache after its header */
    uint64_t size;
    uint8_t type, ndims;
    uint32_t dims[3];     /* the first three dimensions (0 where absent) */
    uint64_t header_bytes, count, record_bytes;
};

struct idx {
    struct idx_file images, labels;
    const uint8_t *label_of; /* label i is label_of[i], or NULL without labels */
    struct dataset_idx_files files;
};

/* ---- small helpers ------------------------------------------------------ */

static uint32_t idx_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void idx_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Bytes per element of each IDX type code, 0 for an unknown code. */
static unsigned idx_type_bytes(uint8_t type)
{
    switch (type) {
    case 0x08: case 0x09: return 1; /* unsigned / signed byte */
    case 0x0B: return 2;            /* short */
    case 0x0C: case 0x0D: return 4; /* int, float */
    case 0x0E: return 8;            /* double */
    default: return 0;
    }
}

static int idx_read_at(int fd, void *buf, size_t n, off_t off)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* ---- the header ------------------------------------------------------------ */

/* Parses the IDX header at b[0..have): magic, type, dimensions (multiplied
 * with overflow checks). 0 with f's header fields set and *total the file size
 * the header promises; 1 when `have` ends inside the header; ERR_FORMAT naming
 * the byte at fault. Offsets in messages are bytes of the (decompressed) file.
 * The gzip cache calls it on the first decompressed bytes, to bound the rest. */
static int idx_header_parse(struct idx_file *f, const uint8_t *b, uint64_t have, uint64_t *total)
{
    const char *w = f->where;
    if (have < 4)
        return 1;
    if (b[0] != 0 || b[1] != 0)
        return err_set(ERR_FORMAT, "%s: byte 0: wrong magic number 0x%08x: an IDX file starts with two zero bytes, "
                       "a type code and a dimension count (0x00000803 for images, 0x00000801 for labels)",
                       w, idx_be32(b));
    f->type = b[2];
    f->ndims = b[3];
    unsigned elem = idx_type_bytes(f->type);
    if (!elem)
        return err_set(ERR_FORMAT, "%s: byte 2: unsupported type code 0x%02x (IDX knows 0x08, 0x09, 0x0B, 0x0C, "
                       "0x0D, 0x0E)", w, f->type);
    if (f->ndims == 0)
        return err_set(ERR_FORMAT, "%s: byte 3: 0 dimensions: records are slices along dimension 0, so there must "
                       "be at least one", w);
    f->header_bytes = 4 + 4ull * f->ndims;
    if (have < f->header_bytes)
        return 1;
    uint64_t record = elem;
    for (unsigned d = 0; d < f->ndims; d++) {
        uint32_t dim = idx_be32(b + 4 + 4 * d);
        if (d < 3)
            f->dims[d] = dim;
        if (d == 0)
            f->count = dim;
        else if (__builtin_mul_overflow(record, (uint64_t)dim, &record))
            return err_set(ERR_FORMAT, "%s: byte %u: dimension %u (%u) makes the record size overflow 64 bits",
                           w, 4 + 4 * d, d, dim);
    }
    f->record_bytes = record;
    if (record == 0)
        return err_set(ERR_FORMAT, "%s: records of 0 bytes: a dimension after the first is 0", w);
    uint64_t payload;
    if (__builtin_mul_overflow(f->count, record, &payload) || __builtin_add_overflow(payload, f->header_bytes, total))
        return err_set(ERR_FORMAT, "%s: byte 4: %llu records of %llu bytes overflow 64 bits", w,
                       (unsigned long long)f->count, (unsigned long long)record);
    return 0;
}

/* Checks the IDX header of a mapped file against its size: a valid header
 * (idx_header_parse()), and exactly the promised records after it. */
static int idx_file_parse(struct idx_file *f)
{
    const char *w = f->where;
    unsigned long long size = f->size;
    uint64_t total;
    int rc = idx_header_parse(f, f->bytes, f->size, &total);
    if (rc < 0)
        return rc;
    if (rc == 1 && size < 4)
        return err_set(ERR_FORMAT, "%s: truncated header: byte %llu: the file ends inside the 4-byte magic number",
                       w, size);
    if (rc == 1)
        return err_set(ERR_FORMAT, "%s: truncated header: byte %llu: %u dimensions need a %llu-byte header, the "
                       "file has %llu bytes", w, size, f->ndims, (unsigned long long)f->header_bytes, size);
    if (size < total) {
        unsigned long long cut = (size - f->header_bytes) / f->record_bytes;
        return err_set(ERR_FORMAT, "%s: truncated at record %llu (byte %llu): the header promises %llu records of "
                       "%llu bytes, %llu bytes in all, the file has %llu", w, cut,
                       (unsigned long long)f->header_bytes + cut * f->record_bytes, (unsigned long long)f->count,
                       (unsigned long long)f->record_bytes, (unsigned long long)total, size);
    }
    if (size > total)
        return err_set(ERR_FORMAT, "%s: byte %llu: %llu bytes follow the last of the %llu records the header "
                       "promises", w, (unsigned long long)total, size - total, (unsigned long long)f->count);
    return 0;
}

/* ---- the gzip cache ------------------------------------------------------ */

/* Where the decompressed copy of `path` lives: beside it when its directory
 * is writable and nothing but a regular file is in its place (a FIFO or a
 * device there is never replaced: fsutil.h; nor a symbolic link written
 * through, which could name the source or another file),
 * else in the user's cache directory (cache_dir.h), named after the source's
 * full path (its FNV-1a).
 * Never beside it under /usr, even for root: the FHS (3.0, section 4.1) makes
 * /usr read-only, package-managed data, which is where Debian's
 * dataset-fashion-mnist installs. */
static int idx_cache_path(const char *path, char *out, size_t cap)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return err_set(ERR_IO, "%s: cannot resolve the path: %s", path, strerror(errno));
    char *slash = strrchr(real, '/');
    const char *base = slash + 1;
    *slash = '\0';
    const char *dir = slash == real ? "/" : real;
    if (strncmp(dir, "/usr/", 5) != 0 && strcmp(dir, "/usr") != 0 && access(dir, W_OK) == 0) {
        if (snprintf(out, cap, "%s/%s" IDX_CACHE_SUFFIX, slash == real ? "" : dir, base) >= (int)cap)
            return err_set(ERR_ARG, "%s: path too long", path);
        /* a link there (to the source, to another file) would be written through, replacing what it names */
        if (fsutil_check_output(out, NULL) == 0 && !fsutil_is_link(out))
            return 0;
        err_clear(); /* a FIFO or a device in the cache's place stays as it is: the cache goes to the cache directory */
    }
    char root[PATH_MAX];
    int rc = cache_dir_create(root, sizeof root);
    if (rc < 0)
        return err_wrap(rc, "%s: its directory is not writable, and no cache directory for its decompressed copy",
                        path);
    *slash = '/'; /* the hash names the full source path */
    if (snprintf(out, cap, "%s/%s-%016llx" IDX_CACHE_SUFFIX, root, base,
                 (unsigned long long)hash_fnv1a(HASH_FNV1A_BASIS, real, strlen(real))) >= (int)cap)
        return err_set(ERR_ARG, "%s: cache path too long", path);
    return 0;
}

/* 1 when the cache open on `fd` is complete and was built from the source
 * described by `src`; 0 when it is stale, truncated or not a cache at all. */
static int idx_cache_fresh(int fd, const struct stat *src, uint64_t *data_bytes)
{
    struct idx_cache_header h;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || idx_read_at(fd, &h, sizeof h, 0) != 0)
        return 0;
    if (memcmp(h.magic, IDX_CACHE_MAGIC, sizeof h.magic) != 0 || h.source_bytes != (uint64_t)src->st_size ||
        h.source_dev != (uint64_t)src->st_dev || h.source_ino != (uint64_t)src->st_ino ||
        h.source_mtime_s != (int64_t)src->st_mtim.tv_sec || h.source_mtime_ns != (int64_t)src->st_mtim.tv_nsec)
        return 0;
    if ((uint64_t)st.st_size - sizeof h != h.data_bytes) /* cut short, or grown */
        return 0;
    *data_bytes = h.data_bytes;
    return 1;
}

/* The decompressed bytes so far bound those to come: once the IDX header is
 * in, nothing past the size it promises is written. A gzip bomb (megabytes
 * that inflate to gigabytes behind a header promising one record) stops
 * within one chunk of the promise, and the disk is asked for the promised
 * size before it is filled. */
struct idx_inflate_bound {
    uint8_t head[4 + 4 * 255]; /* the first decompressed bytes: the largest IDX header */
    uint64_t have;             /* bytes of head filled */
    uint64_t limit;            /* the size the header promises; UINT64_MAX until it is in */
};

static int idx_inflate_bound_add(struct idx_inflate_bound *bd, struct idx_file *f, const char *cache,
                                 const uint8_t *out, size_t got, uint64_t produced, uint64_t compressed_at)
{
    if (bd->limit == UINT64_MAX && bd->have < sizeof bd->head) {
        size_t take = got < sizeof bd->head - bd->have ? got : (size_t)(sizeof bd->head - bd->have);
        memcpy(bd->head + bd->have, out, take);
        bd->have += take;
        uint64_t total;
        int rc = idx_header_parse(f, bd->head, bd->have, &total);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            bd->limit = total;
            char what[PATH_MAX + 64];
            snprintf(what, sizeof what, "the decompressed copy of %s", f->path);
            uint64_t need; /* a hostile header's total may sit just below 2^64 */
            if (__builtin_add_overflow(total, (uint64_t)sizeof(struct idx_cache_header), &need))
                return err_set(ERR_FORMAT, "%s: the header promises %llu bytes of records: more than any disk holds",
                               f->where, (unsigned long long)total);
            if ((rc = fsutil_check_space(cache, need, what)) < 0)
                return rc;
        }
    }
    if (produced > bd->limit)
        return err_set(ERR_FORMAT, "%s: byte %llu: the gzip stream inflates past the %llu bytes its IDX header "
                       "promises (%llu records of %llu bytes); stopped at compressed byte %llu, nothing cached "
                       "(a gzip bomb, or a corrupt file)", f->where, (unsigned long long)bd->limit,
                       (unsigned long long)bd->limit, (unsigned long long)f->count,
                       (unsigned long long)f->record_bytes, (unsigned long long)compressed_at);
    return 0;
}

static int idx_file_mmap(struct idx_file *f, int fd, size_t len, const char *name);

/* Inflates the gzip stream on `src_fd` (the file f->path) into the cache file
 * `cache`, atomically, bounded by its IDX header (above), and maps what it
 * wrote into f (*data_bytes: the decompressed size), not whatever another
 * process renames onto `cache` meanwhile. Multi-member streams (gzip a; gzip
 * b; cat) are read to the end, as gunzip does. ERR_FORMAT names the
 * compressed byte at fault. */
static int idx_cache_build(int src_fd, const struct stat *src, struct idx_file *f, const char *cache,
                           uint64_t *data_bytes)
{
    const char *path = f->path;
    struct fsutil_tmp t;
    int rc = fsutil_tmp_open(&t, cache, NULL);
    if (rc < 0)
        return rc;
    uint8_t *in = malloc(IDX_CHUNK), *out = malloc(IDX_CHUNK);
    struct idx_inflate_bound *bd = malloc(sizeof *bd);
    z_stream z = {0};
    int zrc = Z_OK;
    if (!in || !out || !bd) {
        rc = err_set(ERR_NOMEM, "%s: out of memory for decompression buffers", path);
        goto done;
    }
    bd->have = 0;
    bd->limit = UINT64_MAX;
    /* 15 + 16: the largest window, gzip framing only (zlib.h, inflateInit2). */
    if (inflateInit2(&z, 15 + 16) != Z_OK) {
        rc = err_set(ERR_NOMEM, "%s: zlib could not start: %s", path, z.msg ? z.msg : "inflateInit2 failed");
        goto done;
    }
    struct idx_cache_header h = {.magic = IDX_CACHE_MAGIC};
    rc = fsutil_write_all(t.fd, &h, sizeof h, t.final);
    uint64_t consumed = 0, produced = 0;
    int out_full = 0; /* zlib may hold output back until given more room */
    progress_t bar;
    progress_begin(&bar, "idx: decompressing into the cache", (uint64_t)src->st_size);
    while (rc == 0) {
        if (z.avail_in == 0 && !out_full) {
            ssize_t r = pread(src_fd, in, IDX_CHUNK, (off_t)consumed);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                rc = err_set(ERR_IO, "%s: read failed at byte %llu: %s", path, (unsigned long long)consumed,
                             strerror(errno));
                break;
            }
            if (r == 0) {
                if (zrc != Z_STREAM_END)
                    rc = err_set(ERR_FORMAT, "%s: corrupt gzip stream: it ends early, at compressed byte %llu "
                                 "(after %llu decompressed bytes)", path, (unsigned long long)consumed,
                                 (unsigned long long)produced);
                break;
            }
            z.next_in = in;
            z.avail_in = (uInt)r;
            consumed += (uint64_t)r;
            progress_update(&bar, consumed);
        }
        if (zrc == Z_STREAM_END) /* another gzip member follows */
            inflateReset(&z);
        z.next_out = out;
        z.avail_out = IDX_CHUNK;
        zrc = inflate(&z, Z_NO_FLUSH);
        if (zrc != Z_OK && zrc != Z_STREAM_END && zrc != Z_BUF_ERROR) {
            rc = err_set(ERR_FORMAT, "%s: corrupt gzip stream at compressed byte %llu: %s", path,
                         (unsigned long long)(consumed - z.avail_in), z.msg ? z.msg : zError(zrc));
            break;
        }
        size_t got = IDX_CHUNK - z.avail_out;
        out_full = z.avail_out == 0;
        produced += got;
        rc = idx_inflate_bound_add(bd, f, cache, out, got, produced, consumed - z.avail_in);
        if (rc == 0)
            rc = fsutil_write_all(t.fd, out, got, t.final);
    }
    progress_end(&bar, consumed);
    inflateEnd(&z);
    if (rc == 0) {
        h.source_bytes = (uint64_t)src->st_size;
        h.source_dev = (uint64_t)src->st_dev;
        h.source_ino = (uint64_t)src->st_ino;
        h.source_mtime_s = (int64_t)src->st_mtim.tv_sec;
        h.source_mtime_ns = (int64_t)src->st_mtim.tv_nsec;
        h.data_bytes = produced;
        if (pwrite(t.fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
            rc = err_set(ERR_IO, "%s: cannot write the cache header: %s", t.path, strerror(errno));
    }
    if (rc == 0) {
        *data_bytes = produced;
        rc = idx_file_mmap(f, t.fd, sizeof h + produced, cache);
    }
done:
    free(in);
    free(out);
    free(bd);
    rc = fsutil_tmp_finish(&t, rc, 0);
    if (rc < 0 && f->map) {
        mapfile_unmap(f->map, f->map_bytes);
        f->map = NULL;
    }
    return rc;
}

/* ---- mapping one file ---------------------------------------------------- */

/* Maps `len` bytes of fd into f (mapfile.h: a truncation is named). ERR_IO
 * names the file. */
static int idx_file_mmap(struct idx_file *f, int fd, size_t len, const char *name)
{
    int rc = mapfile_map(fd, len, name, &f->map);
    if (rc == 0)
        f->map_bytes = len;
    return rc;
}

/* Maps the decompressed cache of the gzipped file open on `fd`, building or
 * rebuilding it when missing or stale. *built counts rebuilds. */
static int idx_file_map_gzip(struct idx_file *f, int fd, const struct stat *st, int *built)
{
    int rc = idx_cache_path(f->path, f->cache, sizeof f->cache);
    if (rc < 0)
        return rc;
    snprintf(f->where, sizeof f->where, "%s (decompressed)", f->path);
    int cfd = open(f->cache, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO there must not block us */
    uint64_t data_bytes = 0;
    if (cfd >= 0 && idx_cache_fresh(cfd, st, &data_bytes)) {
        /* The mapping never has length 0: the header is always there. */
        rc = idx_file_mmap(f, cfd, sizeof(struct idx_cache_header) + data_bytes, f->cache);
    } else {
        rc = idx_cache_build(fd, st, f, f->cache, &data_bytes); /* maps what it wrote */
        *built += rc == 0;
    }
    if (cfd >= 0)
        close(cfd);
    if (rc < 0)
        return rc;
    f->bytes = (const uint8_t *)f->map + sizeof(struct idx_cache_header);
    f->size = data_bytes;
    f->cache_bytes = f->map_bytes;
    return 0;
}

/* Opens and maps `path` (plain or gzipped) into f, without parsing it. */
static int idx_file_map(struct idx_file *f, const char *path, int *built)
{
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path)
        return err_set(ERR_ARG, "%.200s...: path too long", path);
    snprintf(f->where, sizeof f->where, "%s", path);
    int fd;
    struct stat st;
    uint8_t magic[2];
    int rc = fsutil_open_read(path, NULL, &fd, &st); /* a FIFO or a device is refused, never waited on */
    if (rc < 0)
        return rc;
    if (st.st_size == 0)
        rc = err_set(ERR_FORMAT, "%s: empty file (0 bytes): an IDX file starts with a 4-byte magic number", path);
    else if ((uint64_t)st.st_size > SIZE_MAX)
        rc = err_set(ERR_RANGE, "%s: %lld bytes do not fit in this machine's address space", path,
                     (long long)st.st_size);
    if (rc < 0)
        goto out;
    f->disk_bytes = (uint64_t)st.st_size;
    /* RFC 1952, section 2.3.1: every gzip member starts with 1f 8b. */
    if (st.st_size >= 2 && idx_read_at(fd, magic, 2, 0) == 0 && magic[0] == 0x1f && magic[1] == 0x8b) {
        rc = idx_file_map_gzip(f, fd, &st, built);
    } else {
        rc = idx_file_mmap(f, fd, (size_t)st.st_size, path);
        f->bytes = f->map;
        f->size = (uint64_t)st.st_size;
    }
out:
    close(fd);
    return rc;
}

static void idx_file_unmap(struct idx_file *f)
{
    if (f->map)
        mapfile_unmap(f->map, f->map_bytes);
    f->map = NULL;
}

/* ---- the dataset --------------------------------------------------------- */

/* The labels file beside an images file: "train-images-idx3-ubyte[.gz]" ->
 * "train-labels-idx1-ubyte[.gz]", the names LeCun's MNIST files and every copy
 * of them use. Tries the same compression first, then the other. 1 when found. */
static int idx_find_labels(const char *images, char *out, size_t cap)
{
    static const char from[] = "images-idx3", to[] = "labels-idx1";
    const char *base = strrchr(images, '/');
    base = base ? base + 1 : images;
    const char *at = NULL;
    for (const char *p = strstr(base, from); p; p = strstr(p + 1, from))
        at = p;
    if (!at)
        return 0;
    size_t len = strlen(images);
    int gz = len > 3 && strcmp(images + len - 3, ".gz") == 0;
    size_t stem = gz ? len - 3 : len;
    for (int pass = 0; pass < 2; pass++) {
        int want_gz = pass == 0 ? gz : !gz;
        int n = snprintf(out, cap, "%.*s%s%.*s%s", (int)(at - images), images, to,
                         (int)(stem - (size_t)(at - images) - strlen(from)), at + strlen(from), want_gz ? ".gz" : "");
        if (n < (int)cap && access(out, F_OK) == 0)
            return 1;
    }
    return 0;
}

static int idx_read(const dataset_t *ds, uint64_t index, void *dst, uint64_t cap, struct dataset_record *rec)
{
    const struct idx *x = ds->impl;
    uint64_t n = x->images.record_bytes;
    if (n > cap)
        return err_set(ERR_RANGE, "%s: record %llu has %llu bytes, the buffer only %llu", ds->name,
                       (unsigned long long)index, (unsigned long long)n, (unsigned long long)cap);
    memcpy(dst, x->images.bytes + x->images.header_bytes + index * n, n);
    rec->bytes = rec->length = n;
    rec->label = x->label_of ? x->label_of[index] : -1;
    return 0;
}

/* dataset_read_batch(): one tight loop of copies, with the format checks done
 * once for the batch instead of once per record. Consecutive records' cache
 * misses are independent, so the core overlaps them by itself; the fewer
 * instructions between two records' loads, the more records it keeps in
 * flight. Measured (chapter 1's README, "Measured"): 1.3-1.4x the same copies
 * made through the per-record read op. Software prefetch of the records 4, 8
 * or 16 positions ahead added nothing measurable on top, so there is none. */
static int idx_read_batch(const dataset_t *ds, const uint64_t *indices, uint32_t count, void *dst, uint64_t stride,
                          struct dataset_record *recs)
{
    const struct idx *x = ds->impl;
    uint64_t n = x->images.record_bytes;
    if (count > 0 && n > stride)
        return err_set(ERR_RANGE, "%s: record %llu at position 0 of the batch has %llu bytes, a row only %llu",
                       ds->name, (unsigned long long)indices[0], (unsigned long long)n, (unsigned long long)stride);
    const uint8_t *base = x->images.bytes + x->images.header_bytes;
    uint8_t *row = dst;
    for (uint32_t i = 0; i < count; i++, row += stride) {
        memcpy(row, base + indices[i] * n, n);
        recs[i].bytes = recs[i].length = n;
        recs[i].label = x->label_of ? x->label_of[indices[i]] : -1;
    }
    return 0;
}

static int idx_length_of(const dataset_t *ds, uint64_t index, uint64_t *length)
{
    (void)index;
    *length = ds->info.record_bytes;
    return 0;
}

/* --check: a label must name one of `classes` classes (IDX labels are bytes,
 * so a file of 10 classes can still hold a 200). */
static int idx_check(const dataset_t *ds, uint64_t index, uint32_t classes)
{
    const struct idx *x = ds->impl;
    if (!x->label_of || classes == 0 || x->label_of[index] < classes)
        return 0;
    const struct idx_file *f = x->labels.map ? &x->labels : &x->images; /* a labels file alone is its own labels */
    return err_set(ERR_FORMAT, "%s: byte %llu (record %llu): label %u is outside 0..%u", f->where,
                   (unsigned long long)(f->header_bytes + index), (unsigned long long)index, x->label_of[index],
                   classes - 1);
}

static void idx_close(dataset_t *ds)
{
    struct idx *x = ds->impl;
    idx_file_unmap(&x->images);
    idx_file_unmap(&x->labels);
    free(x);
    free(ds);
}

static const struct dataset_ops idx_ops = {
    .read = idx_read, .read_batch = idx_read_batch, .length_of = idx_length_of, .check = idx_check, .close = idx_close};

static int idx_open_labels(struct idx *x, const char *path)
{
    struct idx_file *l = &x->labels;
    int rc = idx_file_map(l, path, &x->files.caches_built);
    if (rc == 0)
        rc = idx_file_parse(l);
    if (rc < 0)
        return err_wrap(rc, "labels of %s", x->images.path);
    if (l->type != 0x08 || l->ndims != 1)
        return err_set(ERR_FORMAT, "%s: bytes 2-3: a labels file must be idx1 of unsigned bytes (magic 0x00000801), "
                       "this one has type 0x%02x and %u dimensions", l->where, l->type, l->ndims);
    if (l->count != x->images.count)
        return err_set(ERR_FORMAT, "image and label counts disagree: %s has %llu records, %s has %llu labels",
                       x->images.where, (unsigned long long)x->images.count, l->where,
                       (unsigned long long)l->count);
    x->label_of = l->bytes + l->header_bytes;
    return 0;
}

int dataset_idx_open(const char *path, const struct dataset_options *opt, dataset_t **out)
{
    (void)opt; /* IDX files describe themselves: no option applies (dataset_open() refuses a length field) */
    *out = NULL;
    dataset_t *ds = calloc(1, sizeof *ds);
    struct idx *x = calloc(1, sizeof *x);
    if (!ds || !x) {
        free(ds);
        free(x);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    ds->ops = &idx_ops;
    ds->impl = x;
    struct idx_file *im = &x->images;
    int rc = idx_file_map(im, path, &x->files.caches_built);
    if (rc == 0)
        rc = idx_file_parse(im);
    char labels[PATH_MAX];
    if (rc == 0 && im->type == 0x08 && im->ndims == 1)
        x->label_of = im->bytes + im->header_bytes; /* a labels file on its own: each record is its label */
    else if (rc == 0 && idx_find_labels(path, labels, sizeof labels))
        rc = idx_open_labels(x, labels);
    if (rc < 0) {
        idx_close(ds);
        return rc;
    }
    snprintf(ds->name, sizeof ds->name, "idx:%s", path); /* the path as given, as JSONL's: unambiguous */
    ds->info = (struct dataset_info){
        .kind = DATASET_IDX,
        .length = im->count,
        .record_bytes = im->record_bytes,
        .max_record_bytes = im->record_bytes,
        .has_labels = x->label_of != NULL,
        .rows = im->ndims == 3 ? im->dims[1] : 0,
        .cols = im->ndims == 3 ? im->dims[2] : 0,
    };
    struct dataset_idx_files *fl = &x->files;
    fl->images = im->path;
    fl->images_cache = im->cache[0] ? im->cache : NULL;
    fl->images_bytes = im->disk_bytes;
    fl->images_cache_bytes = im->cache_bytes;
    if (x->labels.map) {
        fl->labels = x->labels.path;
        fl->labels_cache = x->labels.cache[0] ? x->labels.cache : NULL;
        fl->labels_bytes = x->labels.disk_bytes;
        fl->labels_cache_bytes = x->labels.cache_bytes;
    }
    *out = ds;
    return 0;
}

const struct dataset_idx_files *dataset_idx_files(const dataset_t *ds)
{
    return ds->info.kind == DATASET_IDX && ds->ops == &idx_ops ? &((const struct idx *)ds->impl)->files : NULL;
}

/* ---- writing ------------------------------------------------------------- */

/* Writes the header of an unsigned-byte IDX file with `ndims` dimensions. */
static int idx_write_header(int fd, const uint32_t *dims, unsigned ndims, const char *path)
{
    uint8_t h[4 + 4 * 3] = {0, 0, 0x08, (uint8_t)ndims};
    for (unsigned d = 0; d < ndims; d++)
        idx_put_be32(h + 4 + 4 * d, dims[d]);
    return fsutil_write_all(fd, h, 4 + 4 * ndims, path);
}

int dataset_idx_write(const dataset_t *src, uint32_t rows, uint32_t cols, const char *images_path,
                      const char *labels_path)
{
    const struct dataset_info *in = dataset_info(src);
    uint64_t n = in->length, bytes = in->record_bytes;
    if (!bytes)
        return err_set(ERR_ARG, "%s: IDX records all have one size; %s has variable-size records", images_path,
                       dataset_name(src));
    if (n > UINT32_MAX || bytes > UINT32_MAX)
        return err_set(ERR_ARG, "%s: %llu records of %llu bytes do not fit IDX's 32-bit dimensions", images_path,
                       (unsigned long long)n, (unsigned long long)bytes);
    if (labels_path && !in->has_labels)
        return err_set(ERR_ARG, "%s: %s has no labels to write", labels_path, dataset_name(src));
    uint32_t dims[3] = {(uint32_t)n, rows, cols};
    unsigned ndims = 3;
    if ((uint64_t)rows * cols != bytes) {
        dims[1] = (uint32_t)bytes;
        ndims = 2;
    }
    /* Both below 2^32: the product and the sums cannot overflow 64 bits. */
    int rc = fsutil_check_space(images_path, 4 + 4 * ndims + n * bytes + (labels_path ? 8 + n : 0), images_path);
    if (rc < 0)
        return rc;
    struct fsutil_tmp it, lt;
    uint8_t *rec = malloc(bytes), *lab = malloc(IDX_CHUNK);
    rc = fsutil_tmp_open(&it, images_path, NULL);
    int labels_open = 0;
    if (rc == 0 && labels_path)
        labels_open = (rc = fsutil_tmp_open(&lt, labels_path, NULL)) == 0;
    if (rc == 0 && (!rec || !lab))
        rc = err_set(ERR_NOMEM, "%s: out of memory", images_path);
    if (rc == 0)
        rc = idx_write_header(it.fd, dims, ndims, it.path);
    if (rc == 0 && labels_open)
        rc = idx_write_header(lt.fd, dims, 1, lt.path);
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        struct dataset_record r;
        rc = dataset_read(src, i, rec, bytes, &r);
        if (rc == 0)
            rc = fsutil_write_all(it.fd, rec, bytes, it.final);
        if (rc == 0 && labels_open) {
            if (r.label < 0 || r.label > 255)
                rc = err_set(ERR_ARG, "%s: record %llu has label %lld, IDX labels are bytes (0..255)", labels_path,
                             (unsigned long long)i, (long long)r.label);
            lab[i % IDX_CHUNK] = (uint8_t)r.label;
            /* labels go out a chunk at a time: one write per 256 Ki records */
            if (rc == 0 && (i % IDX_CHUNK == IDX_CHUNK - 1 || i == n - 1))
                rc = fsutil_write_all(lt.fd, lab, i % IDX_CHUNK + 1, lt.final);
        }
    }
    free(rec);
    free(lab);
    if (it.fd >= 0)
        rc = fsutil_tmp_finish(&it, rc, 0);
    if (labels_open)
        rc = fsutil_tmp_finish(&lt, rc, 0);
    return rc;
}
