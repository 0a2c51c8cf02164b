/* safetensors: the reader's checks and the writer (see safetensors.h). Read
 * safetensors_open() from the top: each check comes before the first use of
 * the number it checks. */
#include "ddp/safetensors.h"

#include "base/error.h"
#include "base/fsutil.h"
#include "base/half.h"
#include "base/mem.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors: tensors are stored little-endian; this code copies them as they are in memory"
#endif

static const char *const st_names[SAFETENSORS_DTYPE_COUNT] = {"BOOL", "U8",  "I8",  "I16", "U16", "F16", "BF16",
                                                              "I32",  "U32", "F32", "F64", "I64", "U64"};
static const size_t st_sizes[SAFETENSORS_DTYPE_COUNT] = {1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};

const char *safetensors_dtype_name(enum safetensors_dtype t)
{
    return (unsigned)t < SAFETENSORS_DTYPE_COUNT ? st_names[t] : "invalid";
}

size_t safetensors_dtype_size(enum safetensors_dtype t) { return (unsigned)t < SAFETENSORS_DTYPE_COUNT ? st_sizes[t] : 0; }

/* numel and bytes of a shape, 0 or -1 when they overflow size_t */
static int st_size_of(enum safetensors_dtype t, int ndim, const int64_t *shape, size_t *numel, size_t *bytes)
{
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (uint64_t)shape[d] > SIZE_MAX)
            return -1;
        if (shape[d] != 0 && n > SIZE_MAX / (size_t)shape[d])
            return -1;
        n *= (size_t)shape[d];
    }
    if (n > SIZE_MAX / st_sizes[t])
        return -1;
    *numel = n;
    *bytes = n * st_sizes[t];
    return 0;
}

/* "[256, 784]" into buf */
static const char *st_shape_text(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
    return buf;
}

/* ---- writing -------------------------------------------------------------------------- */

static int st_check_entry(const char *path, const struct safetensors_entry *e, const struct safetensors_entry *all,
                          size_t index, size_t *bytes)
{
    if (!e->name || !e->name[0] || strlen(e->name) > SAFETENSORS_MAX_NAME || strcmp(e->name, "__metadata__") == 0)
        return err_set(ERR_ARG, "%s: tensor %zu needs a name of 1 to %d bytes, not \"__metadata__\"", path, index,
                       SAFETENSORS_MAX_NAME);
    for (size_t k = 0; k < index; k++)
        if (strcmp(all[k].name, e->name) == 0)
            return err_set(ERR_ARG, "%s: two tensors are called %s", path, e->name);
    if ((unsigned)e->dtype >= SAFETENSORS_DTYPE_COUNT)
        return err_set(ERR_ARG, "%s: %s has an invalid dtype %d", path, e->name, (int)e->dtype);
    if (e->ndim < 0 || e->ndim > SAFETENSORS_MAX_DIMS)
        return err_set(ERR_ARG, "%s: %s has %d dimensions (0 to %d)", path, e->name, e->ndim, SAFETENSORS_MAX_DIMS);
    size_t numel;
    if (st_size_of(e->dtype, e->ndim, e->shape, &numel, bytes) < 0)
        return err_set(ERR_ARG, "%s: %s has a negative or overflowing shape", path, e->name);
    if (*bytes && !e->data)
        return err_set(ERR_ARG, "%s: %s has no data", path, e->name);
    return 0;
}

/* The header: {"__metadata__": {...}, "name": {"dtype", "shape", "data_offsets"}, ...} */
static json_t *st_header(const struct safetensors_entry *entries, const size_t *bytes, size_t count,
                         const struct safetensors_meta *meta, size_t nmeta)
{
    json_t *root = json_object(), *md = nmeta ? json_object() : NULL;
    int bad = !root || (nmeta && !md);
    for (size_t k = 0; !bad && k < nmeta; k++)
        bad = !meta[k].key || !meta[k].value || json_object_set_new(md, meta[k].key, json_string(meta[k].value));
    if (!bad && md)
        bad = json_object_set(root, "__metadata__", md);
    size_t offset = 0;
    for (size_t i = 0; !bad && i < count; i++) {
        const struct safetensors_entry *e = &entries[i];
        json_t *t = json_object(), *shape = json_array(), *offs = json_array();
        bad = !t || !shape || !offs;
        for (int d = 0; !bad && d < e->ndim; d++)
            bad = json_array_append_new(shape, json_integer(e->shape[d]));
        bad = bad || json_array_append_new(offs, json_integer((json_int_t)offset)) ||
              json_array_append_new(offs, json_integer((json_int_t)(offset + bytes[i])));
        bad = bad || json_object_set_new(t, "dtype", json_string(st_names[e->dtype])) ||
              json_object_set(t, "shape", shape) || json_object_set(t, "data_offsets", offs) ||
              json_object_set(root, e->name, t);
        json_decref(t);
        json_decref(shape);
        json_decref(offs);
        offset += bytes[i];
    }
    json_decref(md);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

int safetensors_write(const char *path, const struct safetensors_entry *entries, size_t count,
                      const struct safetensors_meta *meta, size_t nmeta, unsigned fsync_flags)
{
    size_t *bytes = calloc(count ? count : 1, sizeof *bytes);
    if (!bytes)
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = st_check_entry(path, &entries[i], entries, i, &bytes[i]);
    for (size_t k = 0; rc == 0 && k < nmeta; k++)
        if (!meta[k].key || !meta[k].value)
            rc = err_set(ERR_ARG, "%s: metadata entry %zu has no key or value", path, k);
    json_t *root = rc == 0 ? st_header(entries, bytes, count, meta, nmeta) : NULL;
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (rc == 0 && !text)
        rc = err_set(ERR_NOMEM, "%s: cannot build the header (out of memory, or metadata that is not UTF-8)", path);
    if (rc < 0) {
        free(bytes);
        free(text);
        return rc;
    }
    /* Pad with spaces so the data starts 8-byte aligned, as the reference
     * writer does: a reader that maps the file can then use it in place. */
    size_t len = strlen(text), padded = ((8 + len + 7) & ~(size_t)7) - 8;
    unsigned char size_le[8];
    for (int b = 0; b < 8; b++)
        size_le[b] = (unsigned char)((uint64_t)padded >> (8 * b));
    struct fsutil_tmp t;
    rc = fsutil_tmp_open(&t, path, NULL);
    if (rc == 0)
        rc = fsutil_write_all(t.fd, size_le, 8, path);
    if (rc == 0)
        rc = fsutil_write_all(t.fd, text, len, path);
    if (rc == 0)
        rc = fsutil_write_all(t.fd, "        ", padded - len, path);
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = fsutil_write_all(t.fd, entries[i].data, bytes[i], path);
    rc = fsutil_tmp_finish(&t, rc, fsync_flags); /* renames, or removes the temporary file */
    free(bytes);
    free(text);
    return rc;
}

/* ---- reading -------------------------------------------------------------------------- */

struct st_entry {
    struct safetensors_tensor t;
    uint64_t begin, end; /* within the data section */
};

struct safetensors {
    char *path;
    unsigned char *file;
    size_t size, data_start, data_len;
    json_t *root; /* owns the names */
    json_t *meta;
    const char **meta_keys; /* in the file's order; owned by root */
    size_t nmeta;
    struct st_entry *e;
    size_t n;
};

/* The whole file into memory, when this machine can hold it. */
static int st_slurp(safetensors_t *st)
{
    int fd;
    struct stat sb;
    int rc = fsutil_open_read(st->path, NULL, &fd, &sb); /* a FIFO or a device is refused, never waited on */
    if (rc < 0)
        return rc;
    if ((rc = mem_check_fits(st->path, (uint64_t)sb.st_size + 1)) == 0 && !(st->file = malloc((size_t)sb.st_size + 1)))
        rc = err_set(ERR_NOMEM, "%s: out of memory for its %lld bytes", st->path, (long long)sb.st_size);
    if (rc == 0 && (rc = fsutil_read_all(fd, st->file, (size_t)sb.st_size, st->path)) == ERR_FORMAT)
        err_wrap(ERR_FORMAT, "%s: the file shrank while being read", st->path);
    close(fd);
    st->size = rc == 0 ? (size_t)sb.st_size : 0;
    return rc;
}

static int st_order(const void *a, const void *b)
{
    const struct st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* One header entry: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}. */
static int st_parse_entry(safetensors_t *st, const char *name, json_t *v, struct st_entry *out)
{
    const char *p = st->path;
    if (!json_is_object(v))
        return err_set(ERR_FORMAT, "%s: header entry %s is not an object", p, name);
    if (strlen(name) == 0 || strlen(name) > SAFETENSORS_MAX_NAME)
        return err_set(ERR_FORMAT, "%s: a tensor name of %zu bytes (1 to %d)", p, strlen(name), SAFETENSORS_MAX_NAME);
    const char *key;
    json_t *field;
    json_object_foreach(v, key, field)
    {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 && strcmp(key, "data_offsets") != 0)
            return err_set(ERR_FORMAT, "%s: %s has an unknown field \"%s\"", p, name, key);
    }
    json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
    json_t *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs))
        return err_set(ERR_FORMAT, "%s: %s needs a string \"dtype\" and arrays \"shape\" and \"data_offsets\"", p,
                       name);
    int t = 0;
    while (t < SAFETENSORS_DTYPE_COUNT && strcmp(json_string_value(dt), st_names[t]) != 0)
        t++;
    if (t == SAFETENSORS_DTYPE_COUNT)
        return err_set(ERR_FORMAT, "%s: %s has dtype \"%s\", which this reader does not know", p, name,
                       json_string_value(dt));
    out->t.name = name;
    out->t.dtype = (enum safetensors_dtype)t;
    if (json_array_size(shape) > SAFETENSORS_MAX_DIMS)
        return err_set(ERR_FORMAT, "%s: %s has %zu dimensions (at most %d)", p, name, json_array_size(shape),
                       SAFETENSORS_MAX_DIMS);
    out->t.ndim = (int)json_array_size(shape);
    for (int d = 0; d < out->t.ndim; d++) {
        json_t *x = json_array_get(shape, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return err_set(ERR_FORMAT, "%s: %s: dimension %d of its shape is not a non-negative integer", p, name, d);
        out->t.shape[d] = json_integer_value(x);
    }
    if (st_size_of(out->t.dtype, out->t.ndim, out->t.shape, &out->t.numel, &out->t.bytes) < 0)
        return err_set(ERR_FORMAT, "%s: %s: its shape's byte size overflows", p, name);
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (json_array_size(offs) != 2 || !json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b))
        return err_set(ERR_FORMAT, "%s: %s: data_offsets must be two integers 0 <= begin <= end", p, name);
    out->begin = (uint64_t)json_integer_value(b);
    out->end = (uint64_t)json_integer_value(e);
    if (out->end > st->data_len)
        return err_set(ERR_FORMAT, "%s: %s: data_offsets [%llu, %llu] reach past the %zu bytes of data", p, name,
                       (unsigned long long)out->begin, (unsigned long long)out->end, st->data_len);
    if (out->end - out->begin != out->t.bytes) {
        char sh[160];
        return err_set(ERR_FORMAT, "%s: %s: %s %s is %zu bytes, but data_offsets [%llu, %llu] hold %llu", p, name,
                       st_names[t], st_shape_text(out->t.ndim, out->t.shape, sh, sizeof sh), out->t.bytes,
                       (unsigned long long)out->begin, (unsigned long long)out->end,
                       (unsigned long long)(out->end - out->begin));
    }
    out->t.data = st->file + st->data_start + out->begin;
    return 0;
}

static int st_parse(safetensors_t *st)
{
    const char *p = st->path;
    if (st->size < 8)
        return err_set(ERR_FORMAT, "%s: %zu bytes, too short for a safetensors file (it starts with an 8-byte header "
                                   "size)", p, st->size);
    uint64_t n = 0;
    for (int b = 7; b >= 0; b--)
        n = n << 8 | st->file[b];
    if (n > st->size - 8)
        return err_set(ERR_FORMAT, "%s: the header size is %llu bytes, but only %zu bytes follow it", p,
                       (unsigned long long)n, st->size - 8);
    if (n > SAFETENSORS_MAX_HEADER)
        return err_set(ERR_FORMAT, "%s: a header of %llu bytes, more than the format's %u MiB limit", p,
                       (unsigned long long)n, SAFETENSORS_MAX_HEADER >> 20);
    if (n < 2 || st->file[8] != '{')
        return err_set(ERR_FORMAT, "%s: the header does not start with '{' (not a safetensors file)", p);
    st->data_start = 8 + (size_t)n;
    st->data_len = st->size - st->data_start;
    json_error_t jerr;
    st->root = json_loadb((const char *)st->file + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!st->root)
        return err_set(ERR_FORMAT, "%s: the header is not valid JSON at byte %d: %s", p, jerr.position, jerr.text);
    if (!json_is_object(st->root))
        return err_set(ERR_FORMAT, "%s: the header is not a JSON object", p);
    size_t count = json_object_size(st->root);
    st->meta = json_object_get(st->root, "__metadata__");
    if (st->meta) {
        count--;
        const char *key;
        json_t *v;
        if (!json_is_object(st->meta))
            return err_set(ERR_FORMAT, "%s: __metadata__ is not an object", p);
        if (!(st->meta_keys = calloc(json_object_size(st->meta) + 1, sizeof *st->meta_keys)))
            return err_set(ERR_NOMEM, "%s: out of memory for its metadata", p);
        json_object_foreach(st->meta, key, v)
        {
            if (!json_is_string(v))
                return err_set(ERR_FORMAT, "%s: __metadata__ value of \"%s\" is not a string", p, key);
            st->meta_keys[st->nmeta++] = key;
        }
    }
    if (!(st->e = calloc(count ? count : 1, sizeof *st->e)))
        return err_set(ERR_NOMEM, "%s: out of memory for %zu tensors", p, count);
    const char *key;
    json_t *v;
    json_object_foreach(st->root, key, v)
    {
        if (v == st->meta)
            continue;
        int rc = st_parse_entry(st, key, v, &st->e[st->n]);
        if (rc < 0)
            return rc;
        st->n++;
    }
    /* The tensors must tile the data section: sorted by offset, each begins
     * where the one before ended, and the last ends at the end of the file. */
    qsort(st->e, st->n, sizeof *st->e, st_order);
    uint64_t end = 0;
    for (size_t i = 0; i < st->n; i++) {
        if (st->e[i].begin < end)
            return err_set(ERR_FORMAT, "%s: tensors %s and %s overlap (bytes %llu to %llu of the data)", p,
                           st->e[i - 1].t.name, st->e[i].t.name, (unsigned long long)st->e[i].begin,
                           (unsigned long long)end);
        if (st->e[i].begin > end)
            return err_set(ERR_FORMAT, "%s: bytes %llu to %llu of the data belong to no tensor (before %s)", p,
                           (unsigned long long)end, (unsigned long long)st->e[i].begin, st->e[i].t.name);
        end = st->e[i].end;
    }
    if (end != st->data_len)
        return err_set(ERR_FORMAT, "%s: %llu bytes after the last tensor belong to no tensor (truncated, or "
                                   "damaged)", p, (unsigned long long)(st->data_len - end));
    return 0;
}

int safetensors_open(const char *path, safetensors_t **out)
{
    *out = NULL;
    safetensors_t *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    int rc = st_slurp(st);
    if (rc == 0)
        rc = st_parse(st);
    if (rc < 0) {
        safetensors_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

void safetensors_close(safetensors_t *st)
{
    if (!st)
        return;
    json_decref(st->root);
    free(st->meta_keys);
    free(st->e);
    free(st->file);
    free(st->path);
    free(st);
}

const char *safetensors_path(const safetensors_t *st) { return st->path; }
size_t safetensors_count(const safetensors_t *st) { return st->n; }
const struct safetensors_tensor *safetensors_at(const safetensors_t *st, size_t i) { return &st->e[i].t; }

const struct safetensors_tensor *safetensors_find(const safetensors_t *st, const char *name)
{
    for (size_t i = 0; i < st->n; i++)
        if (strcmp(st->e[i].t.name, name) == 0)
            return &st->e[i].t;
    return NULL;
}

const char *safetensors_meta(const safetensors_t *st, const char *key)
{
    return st->meta ? json_string_value(json_object_get(st->meta, key)) : NULL;
}

size_t safetensors_meta_count(const safetensors_t *st) { return st->nmeta; }
const char *safetensors_meta_key(const safetensors_t *st, size_t i) { return i < st->nmeta ? st->meta_keys[i] : NULL; }

/* Tensor `name`, when it exists with exactly the shape shape[0..ndim). */
static int st_lookup(const safetensors_t *st, const char *name, int ndim, const int64_t *shape,
                     const struct safetensors_tensor **out)
{
    const struct safetensors_tensor *t = safetensors_find(st, name);
    if (!t)
        return err_set(ERR_FORMAT, "%s: has no tensor %s", st->path, name);
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        char a[160], b[160];
        return err_set(ERR_FORMAT, "%s: %s has shape %s, expected %s", st->path, name,
                       st_shape_text(t->ndim, t->shape, a, sizeof a), st_shape_text(ndim, shape, b, sizeof b));
    }
    *out = t;
    return 0;
}

int safetensors_read(const safetensors_t *st, const char *name, enum safetensors_dtype dtype, int ndim,
                     const int64_t *shape, void *dst)
{
    const struct safetensors_tensor *t;
    int rc = st_lookup(st, name, ndim, shape, &t);
    if (rc < 0)
        return rc;
    if (t->dtype != dtype)
        return err_set(ERR_FORMAT, "%s: %s is %s, expected %s", st->path, name, st_names[t->dtype],
                       safetensors_dtype_name(dtype));
    if (t->bytes)
        memcpy(dst, t->data, t->bytes);
    return 0;
}

int safetensors_read_f32(const safetensors_t *st, const char *name, int ndim, const int64_t *shape, float *dst)
{
    const struct safetensors_tensor *t;
    int rc = st_lookup(st, name, ndim, shape, &t);
    if (rc < 0)
        return rc;
    const unsigned char *p = t->data; /* maybe unaligned: each element through memcpy */
    switch (t->dtype) {
    case SAFETENSORS_F16:
    case SAFETENSORS_BF16:
        for (size_t i = 0; i < t->numel; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = t->dtype == SAFETENSORS_F16 ? half_to_float(h) : half_bf16_to_float(h);
        }
        return 0;
    case SAFETENSORS_F64:
        /* the FPU's conversion in its default mode, as torch's static_cast: round to nearest even,
         * infinity past float32's range (IEC 60559, which C's Annex F and every x86 compiler follow) */
        for (size_t i = 0; i < t->numel; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            dst[i] = (float)d;
        }
        return 0;
    case SAFETENSORS_F32:
        return safetensors_read(st, name, SAFETENSORS_F32, ndim, shape, dst);
    default:
        return err_set(ERR_FORMAT, "%s: %s is %s, expected a float type (F32, or F16, BF16, F64 converted)", st->path,
                       name, st_names[t->dtype]);
    }
}
