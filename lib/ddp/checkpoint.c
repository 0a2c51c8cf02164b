/* checkpoint: model files and training checkpoints over safetensors (see
 * checkpoint.h). Read checkpoint_save(), then checkpoint_load(): it reads
 * every tensor into scratch buffers and copies them into the model and
 * optimizer only once the whole file has passed. */
#include "ddp/checkpoint.h"

#include "base/cli.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/hash.h"
#include "ddp/reducer.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The tensors of one file, with room for the names we make up. */
struct ck_list {
    struct safetensors_entry *e;
    char (*names)[2 * MODEL_NAME_MAX];
    size_t n, cap;
};

static int ck_list_init(struct ck_list *l, size_t cap)
{
    l->n = 0;
    l->cap = cap;
    l->e = calloc(cap ? cap : 1, sizeof *l->e);
    l->names = calloc(cap ? cap : 1, sizeof *l->names);
    return l->e && l->names ? 0 : err_set(ERR_NOMEM, "checkpoint: out of memory");
}

static void ck_list_free(struct ck_list *l)
{
    free(l->e);
    free(l->names);
}

static void ck_add(struct ck_list *l, const char *name, enum safetensors_dtype t, const struct model_tensor *shape_of,
                   const void *data)
{
    struct safetensors_entry *e = &l->e[l->n];
    snprintf(l->names[l->n], sizeof l->names[l->n], "%s", name);
    e->name = l->names[l->n];
    e->dtype = t;
    e->ndim = shape_of ? shape_of->ndim : 0; /* no shape: a scalar */
    for (int d = 0; d < e->ndim; d++)
        e->shape[d] = shape_of->shape[d];
    e->data = data;
    l->n++;
}

/* "bn1.num_batches_tracked" for the buffer "bn1.running_mean", else "" */
static void ck_counter_name(const char *buffer, char *out, size_t len)
{
    const char *dot = strrchr(buffer, '.');
    out[0] = '\0';
    if (dot && strcmp(dot, ".running_mean") == 0)
        snprintf(out, len, "%.*s.num_batches_tracked", (int)(dot - buffer), buffer);
}

/* What a file holds, copied off the device: the parameters, the buffers and
 * the optimizer's state arrays (o NULL: none). */
struct ck_host {
    float *params, *buffers, *state[2];
};

static void ck_host_free(struct ck_host *h)
{
    free(h->params);
    free(h->buffers);
    free(h->state[0]);
    free(h->state[1]);
}

static int ck_host_read(struct ck_host *h, const model_t *m, const optim_t *o)
{
    size_t np = model_param_floats(m) ? model_param_floats(m) : 1, nb = model_buffer_floats(m) ? model_buffer_floats(m) : 1;
    int nstate = o ? optim_state_count(o) : 0;
    memset(h, 0, sizeof *h);
    int rc = (h->params = malloc(np * sizeof(float))) && (h->buffers = malloc(nb * sizeof(float)))
                 ? 0 : err_set(ERR_NOMEM, "checkpoint: out of memory for the model's copy");
    for (int k = 0; rc == 0 && k < nstate; k++)
        if (!(h->state[k] = malloc(np * sizeof(float))))
            rc = err_set(ERR_NOMEM, "checkpoint: out of memory for the optimizer's copy");
    if (rc == 0)
        rc = model_read(m, MODEL_PARAMS, 0, model_param_floats(m), h->params);
    if (rc == 0)
        rc = model_read(m, MODEL_BUFFERS, 0, model_buffer_floats(m), h->buffers);
    for (int k = 0; rc == 0 && k < nstate; k++)
        rc = optim_state_read(o, k, h->state[k]);
    if (rc < 0)
        ck_host_free(h);
    return rc;
}

/* The state_dict: parameters, buffers, one num_batches_tracked per BatchNorm. */
static void ck_add_model(struct ck_list *l, const model_t *m, const struct ck_host *h, const int64_t *tracked)
{
    for (int t = 0; t < model_param_tensors(m); t++)
        ck_add(l, model_param(m, t)->name, SAFETENSORS_F32, model_param(m, t), h->params + model_param(m, t)->offset);
    for (int b = 0; b < model_buffer_tensors(m); b++) {
        const struct model_tensor *bt = model_buffer(m, b);
        ck_add(l, bt->name, SAFETENSORS_F32, bt, h->buffers + bt->offset);
        char counter[2 * MODEL_NAME_MAX];
        ck_counter_name(bt->name, counter, sizeof counter);
        if (counter[0])
            ck_add(l, counter, SAFETENSORS_I64, NULL, tracked);
    }
}

static size_t ck_model_entries(const model_t *m) { return (size_t)model_param_tensors(m) + 2 * (size_t)model_buffer_tensors(m); }

int checkpoint_save_model(const char *path, const model_t *m, unsigned fsync_flags)
{
    struct ck_list l;
    struct ck_host h;
    int64_t tracked = model_batches_tracked(m);
    int rc = ck_host_read(&h, m, NULL);
    if (rc < 0)
        return rc;
    if ((rc = ck_list_init(&l, ck_model_entries(m))) < 0) {
        ck_host_free(&h);
        return rc;
    }
    ck_add_model(&l, m, &h, &tracked);
    char spec[128];
    struct safetensors_meta meta[] = {{"format", "pt"}, {"model", model_spec_describe(model_get_spec(m), spec, sizeof spec)}};
    rc = safetensors_write(path, l.e, l.n, meta, 2, fsync_flags);
    ck_list_free(&l);
    ck_host_free(&h);
    return rc;
}

/* ---- the checksum: every metadata field and every tensor, each on its own ------------------ */

/* A metadata field's hash: FNV-1a of its key and its value, so that a value
 * moved to another key is caught too. */
static uint64_t ck_hash_field(const char *key, const char *value)
{
    uint64_t h = hash_fnv1a(HASH_FNV1A_BASIS, key, strlen(key) + 1);
    return hash_fnv1a(h, value, strlen(value) + 1);
}

/* A tensor's: its name, dtype and shape (what the header says of it), then
 * its bytes (FNV-1a over words, at memory speed). */
static uint64_t ck_hash_tensor(const char *name, enum safetensors_dtype dtype, int ndim, const int64_t *shape,
                               const void *data, size_t bytes)
{
    const char *type = safetensors_dtype_name(dtype);
    int64_t dims = ndim;
    uint64_t h = hash_fnv1a(HASH_FNV1A_BASIS, name, strlen(name) + 1);
    h = hash_fnv1a(h, type, strlen(type) + 1);
    h = hash_fnv1a(h, &dims, sizeof dims);
    h = hash_fnv1a(h, shape, (size_t)ndim * sizeof *shape);
    return hash_fnv1a_words(h, data, bytes);
}

int checkpoint_write_file(const char *path, const struct safetensors_entry *entries, size_t count,
                          const struct safetensors_meta *meta, size_t nmeta, unsigned fsync_flags)
{
    size_t cap = 1;
    for (size_t k = 0; k < nmeta; k++) {
        if (!meta[k].key || !meta[k].value || strchr(meta[k].key, ' ') || strcmp(meta[k].key, "checksum") == 0)
            return err_set(ERR_ARG, "%s: metadata entry %zu needs a key without spaces, not \"checksum\", and a "
                                    "value", path, k);
        cap += strlen(meta[k].key) + 18;
    }
    for (size_t i = 0; i < count; i++) {
        if (!entries[i].name || strchr(entries[i].name, ' '))
            return err_set(ERR_ARG, "%s: tensor %zu needs a name without spaces", path, i);
        /* the checksum lists each field by its name alone: a tensor named as a metadata field would be
         * listed twice, and the reader could not tell the two entries apart */
        for (size_t k = 0; k <= nmeta; k++)
            if (strcmp(entries[i].name, k < nmeta ? meta[k].key : "checksum") == 0)
                return err_set(ERR_ARG, "%s: tensor %s has the name of a metadata field: the checksum names each "
                                        "field once", path, entries[i].name);
        cap += strlen(entries[i].name) + 18;
    }
    char *sums = malloc(cap);
    struct safetensors_meta *all = malloc((nmeta + 1) * sizeof *all);
    int rc = sums && all ? 0 : err_set(ERR_NOMEM, "%s: out of memory", path);
    size_t len = 0;
    for (size_t k = 0; rc == 0 && k < nmeta; k++) {
        len += (size_t)snprintf(sums + len, cap - len, "%s%s=%016" PRIx64, len ? " " : "", meta[k].key,
                                ck_hash_field(meta[k].key, meta[k].value));
        all[k] = meta[k];
    }
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const struct safetensors_entry *e = &entries[i];
        size_t bytes = safetensors_dtype_size(e->dtype);
        for (int d = 0; d < e->ndim && bytes; d++)
            if (e->shape[d] < 0 || __builtin_mul_overflow(bytes, (size_t)e->shape[d], &bytes))
                rc = err_set(ERR_ARG, "%s: %s has a negative or overflowing shape", path, e->name);
        if (rc == 0)
            len += (size_t)snprintf(sums + len, cap - len, "%s%s=%016" PRIx64, len ? " " : "", e->name,
                                    ck_hash_tensor(e->name, e->dtype, e->ndim, e->shape, e->data, bytes));
    }
    if (rc == 0) {
        all[nmeta] = (struct safetensors_meta){"checksum", sums};
        rc = safetensors_write(path, entries, count, all, nmeta + 1, fsync_flags);
    }
    free(sums);
    free(all);
    return rc;
}

/* The next entry of the checksum text at *p: "NAME=" and 16 hex digits,
 * entries separated by single spaces. 1 with its name (not terminated: *len
 * bytes) and hash, 0 at the end, or ERR_FORMAT for an entry of another form. */
static int ck_sum_next(const char *path, const char **p, const char **name, size_t *len, uint64_t *h)
{
    const char *s = *p;
    if (!*s)
        return 0;
    const char *end = s + strcspn(s, " "), *eq = end - 17;
    if (end - s < 18 || *eq != '=' || strspn(eq + 1, "0123456789abcdef") != 16 || (*end && !end[1]))
        return err_set(ERR_FORMAT, "%s: metadata \"checksum\" is damaged near \"%.40s\"", path, s);
    *name = s;
    *len = (size_t)(eq - s);
    *h = strtoull(eq + 1, NULL, 16);
    *p = *end ? end + 1 : end;
    return 1;
}

/* The hash the checksum text lists for `name`: 1, 0 when it lists none, or
 * ERR_FORMAT. */
static int ck_sum_find(const char *path, const char *sums, const char *name, uint64_t *out)
{
    const char *n;
    size_t len;
    int rc;
    while ((rc = ck_sum_next(path, &sums, &n, &len, out)) == 1)
        if (len == strlen(name) && memcmp(n, name, len) == 0)
            return 1;
    return rc;
}

/* One field against the checksum: `what` names it ("metadata \"step\"",
 * "tensor fc1.weight"). */
static int ck_sum_check(const safetensors_t *st, const char *sums, const char *name, uint64_t h, const char *what)
{
    uint64_t want;
    int rc = ck_sum_find(safetensors_path(st), sums, name, &want);
    if (rc == 0)
        return err_set(ERR_FORMAT, "%s: %s is not covered by the checksum: it, or metadata \"checksum\", was "
                                   "added or edited after the checkpoint was written", safetensors_path(st), what);
    if (rc == 1 && want != h)
        return err_set(ERR_FORMAT, "%s: %s does not match its checksum: it, or metadata \"checksum\", was edited "
                                   "or damaged after the checkpoint was written", safetensors_path(st), what);
    return rc < 0 ? rc : 0;
}

/* Every metadata field and every tensor of st against the checksum, each on
 * its own, so that the first one edited or damaged is named; then every
 * field the checksum lists must be in the file. */
static int ck_verify(const safetensors_t *st)
{
    const char *path = safetensors_path(st), *sums = safetensors_meta(st, "checksum");
    char what[SAFETENSORS_MAX_NAME + 128];
    if (!sums)
        return err_set(ERR_FORMAT, "%s: a checkpoint without \"checksum\" in its metadata (damaged, or written by "
                                   "another program)", path);
    int rc = 0;
    size_t fields = 0;
    for (size_t k = 0; rc == 0 && k < safetensors_meta_count(st); k++) {
        const char *key = safetensors_meta_key(st, k), *v = safetensors_meta(st, key);
        if (strcmp(key, "checksum") == 0)
            continue;
        snprintf(what, sizeof what, "metadata \"%s\" (\"%.60s\")", key, v);
        rc = ck_sum_check(st, sums, key, ck_hash_field(key, v), what);
        fields++;
    }
    for (size_t i = 0; rc == 0 && i < safetensors_count(st); i++) {
        const struct safetensors_tensor *t = safetensors_at(st, i);
        snprintf(what, sizeof what, "tensor %s (its dtype, shape or bytes)", t->name);
        rc = ck_sum_check(st, sums, t->name,
                          ck_hash_tensor(t->name, t->dtype, t->ndim, t->shape, t->data, t->bytes), what);
        fields++;
    }
    /* each field was found; an entry left over names a field taken out of the file */
    const char *n;
    size_t len;
    uint64_t h;
    while (rc == 0 && (rc = ck_sum_next(path, &sums, &n, &len, &h)) == 1) {
        snprintf(what, sizeof what, "%.*s", (int)len, n);
        if (strcmp(what, "checksum") == 0) /* it is in the file, but no field it covers */
            return err_set(ERR_FORMAT, "%s: metadata \"checksum\" lists itself, which it cannot cover: damaged",
                           path);
        if (!safetensors_meta(st, what) && !safetensors_find(st, what))
            return err_set(ERR_FORMAT, "%s: the checksum covers \"%s\", which the file does not have: it was "
                                       "taken out after the checkpoint was written", path, what);
        rc = fields-- ? 0 : err_set(ERR_FORMAT, "%s: metadata \"checksum\" lists a field twice: damaged", path);
    }
    return rc;
}

/* ---- reading the model's tensors into scratch ----------------------------------------------- */

struct ck_scratch {
    float *params, *buffers, *state[2];
    int64_t tracked;
    unsigned converted; /* a bit per dtype converted to float32 (1u << SAFETENSORS_F64) */
};

static void ck_scratch_free(struct ck_scratch *s)
{
    free(s->params);
    free(s->buffers);
    free(s->state[0]);
    free(s->state[1]);
}

/* Tensor `file` of st into dst + t->offset with t's shape: float32 exactly when
 * `exact`, else converted from any float type (a bit for its dtype in
 * s->converted). */
static int ck_read_floats(const safetensors_t *st, int exact, const char *file, const struct model_tensor *t,
                          float *dst, struct ck_scratch *s)
{
    if (exact)
        return safetensors_read(st, file, SAFETENSORS_F32, t->ndim, t->shape, dst + t->offset);
    int rc = safetensors_read_f32(st, file, t->ndim, t->shape, dst + t->offset);
    if (rc == 0 && safetensors_find(st, file)->dtype != SAFETENSORS_F32)
        s->converted |= 1u << safetensors_find(st, file)->dtype;
    return rc;
}

/* How a model file names the model's tensors: with the model's own names
 * (fc1.weight, bn1.running_mean), or with nn.Sequential's, "<module>.<what>",
 * whose modules are this model's layers in order, Linear, [BatchNorm1d,]
 * ReLU, ..., Linear, the first Linear module 0, or 1 after a leading
 * nn.Flatten() (which has no tensors). */
struct ck_names {
    int sequential;
    int first;  /* the first Linear's module: 0 or 1 */
    int stride; /* modules per hidden layer: 2, or 3 with BatchNorm1d */
};

/* Which names st uses. A file whose lowest module is past 1 is not this
 * model's nn.Sequential (another layer before the first Linear, or a
 * numbering of its own): read from there, its tensors would load into the
 * wrong layers whenever their shapes happen to fit, so it is refused naming
 * that tensor. 0, or ERR_FORMAT. */
static int ck_names_of(const safetensors_t *st, const model_t *m, struct ck_names *nm)
{
    *nm = (struct ck_names){.stride = model_get_spec(m)->batchnorm ? 3 : 2};
    const char *lowest = NULL;
    unsigned long first = 0;
    for (size_t i = 0; i < safetensors_count(st); i++) {
        const char *n = safetensors_at(st, i)->name;
        if (isdigit((unsigned char)n[0])) {
            unsigned long index = strtoul(n, NULL, 10); /* past ULONG_MAX: ULONG_MAX, refused all the same */
            if (!lowest || index < first) {
                lowest = n;
                first = index;
            }
        }
    }
    if (lowest && first > 1)
        return err_set(ERR_FORMAT, "%s: tensor %s: read as nn.Sequential's names, this model's first Linear is "
                                   "module 0 (or 1 after a leading nn.Flatten()), but the file's first module is %.*s",
                       safetensors_path(st), lowest, (int)strspn(lowest, "0123456789"), lowest);
    nm->sequential = lowest != NULL;
    nm->first = (int)first;
    return 0;
}

/* The file's name of the model's tensor `ours`: itself, or in nn.Sequential's
 * names "fc<k>.<what>" is module first + stride x (k - 1), "bn<k>.<what>" the
 * module after it ("fc2.weight" -> "2.weight"). */
static const char *ck_file_name(const struct ck_names *nm, const char *ours, char *buf, size_t len)
{
    if (!nm->sequential)
        return ours;
    snprintf(buf, len, "%d%s", nm->first + nm->stride * (atoi(ours + 2) - 1) + (ours[0] == 'b'), strchr(ours, '.'));
    return buf;
}

/* "nn.Sequential names 0, 2, 4 read as fc1, fc2, fc3" (with BatchNorm1d: "0, 1, 3, 4, 6 read as fc1, bn1,
 * fc2, bn2, fc3") into buf. */
static const char *ck_names_describe(const struct ck_names *nm, const model_t *m, char *buf, size_t len)
{
    char modules[160] = "", ours[160] = "";
    size_t a = 0, b = 0;
    for (int t = 0; t < model_param_tensors(m); t++) {
        const char *name = model_param(m, t)->name, *dot = strchr(name, '.');
        if (strcmp(dot, ".weight") != 0)
            continue;
        char file[2 * MODEL_NAME_MAX];
        ck_file_name(nm, name, file, sizeof file);
        a += (size_t)snprintf(modules + a, a < sizeof modules ? sizeof modules - a : 0, "%s%.*s", a ? ", " : "",
                              (int)(strchr(file, '.') - file), file);
        b += (size_t)snprintf(ours + b, b < sizeof ours ? sizeof ours - b : 0, "%s%.*s", b ? ", " : "",
                              (int)(dot - name), name);
    }
    snprintf(buf, len, "nn.Sequential names %s read as %s", modules, ours);
    return buf;
}

/* Reads the model's tensors from st into s (params required; buffers
 * required when `all`); refuses any tensor that is neither the model's nor,
 * with `optimizer`, an "optimizer." state of o. A model file (o NULL) may use
 * nn.Sequential's names (*nm says which), and hold F16, BF16 or F64 floats,
 * converted to float32 (s->converted has a bit per dtype converted); a
 * checkpoint has the model's names and float32, exactly. */
static int ck_read(const safetensors_t *st, const model_t *m, const optim_t *o, int all, struct ck_scratch *s,
                   struct ck_names *nm)
{
    const char *path = safetensors_path(st);
    char spec[128], name[2 * MODEL_NAME_MAX], file[2 * MODEL_NAME_MAX], names[400] = "";
    int nstate = o ? optim_state_count(o) : 0;
    memset(s, 0, sizeof *s);
    s->params = malloc((model_param_floats(m) ? model_param_floats(m) : 1) * sizeof(float));
    s->buffers = malloc((model_buffer_floats(m) ? model_buffer_floats(m) : 1) * sizeof(float));
    int rc = s->params && s->buffers ? 0 : err_set(ERR_NOMEM, "%s: out of memory", path);
    for (int k = 0; rc == 0 && k < nstate; k++)
        if (!(s->state[k] = malloc((model_param_floats(m) ? model_param_floats(m) : 1) * sizeof(float))))
            rc = err_set(ERR_NOMEM, "%s: out of memory", path);
    if (rc < 0)
        return rc;
    if ((rc = model_read(m, MODEL_BUFFERS, 0, model_buffer_floats(m), s->buffers)) < 0) /* kept where a file has none */
        return rc;
    s->tracked = model_batches_tracked(m);
    *nm = (struct ck_names){0};
    if (!o && (rc = ck_names_of(st, m, nm)) < 0)
        return rc;
    if (nm->sequential) {
        memcpy(names, " as ", 4);
        ck_names_describe(nm, m, names + 4, sizeof names - 4);
    }
    /* every tensor of the file must be one we know; a training checkpoint read as a model file
     * (--init=DIR/checkpoint.safetensors) gives its parameters, its optimizer's states are passed over */
    const char *format = safetensors_meta(st, "format");
    int skip_optimizer = !o && format && strcmp(format, CHECKPOINT_FORMAT) == 0;
    for (size_t i = 0; i < safetensors_count(st); i++) {
        const char *n = safetensors_at(st, i)->name;
        int known = skip_optimizer && strncmp(n, "optimizer.", 10) == 0;
        for (int t = 0; !known && t < model_param_tensors(m); t++)
            known = strcmp(ck_file_name(nm, model_param(m, t)->name, file, sizeof file), n) == 0;
        for (int b = 0; !known && b < model_buffer_tensors(m); b++) {
            ck_counter_name(model_buffer(m, b)->name, name, sizeof name);
            known = strcmp(ck_file_name(nm, model_buffer(m, b)->name, file, sizeof file), n) == 0 ||
                    (name[0] && strcmp(ck_file_name(nm, name, file, sizeof file), n) == 0);
        }
        for (int t = 0; !known && t < model_param_tensors(m); t++)
            for (int k = 0; !known && k < nstate; k++) {
                snprintf(name, sizeof name, "optimizer.%s.%s", model_param(m, t)->name, optim_state_name(o, k));
                known = strcmp(name, n) == 0;
            }
        if (!known)
            return err_set(ERR_FORMAT, "%s: unexpected tensor %s: not a parameter or buffer of the %s MLP%s%s", path,
                           n, model_spec_describe(model_get_spec(m), spec, sizeof spec), names,
                           o ? " nor a state of its optimizer" : "");
    }
    /* the model's floats: float32 as they are in a checkpoint, converted from any float type in a model file */
    for (int t = 0; rc == 0 && t < model_param_tensors(m); t++) {
        const struct model_tensor *pt = model_param(m, t);
        rc = ck_read_floats(st, o != NULL, ck_file_name(nm, pt->name, file, sizeof file), pt, s->params, s);
        for (int k = 0; rc == 0 && k < nstate; k++) {
            snprintf(name, sizeof name, "optimizer.%s.%s", pt->name, optim_state_name(o, k));
            rc = safetensors_read(st, name, SAFETENSORS_F32, pt->ndim, pt->shape, s->state[k] + pt->offset);
        }
    }
    for (int b = 0; rc == 0 && b < model_buffer_tensors(m); b++) {
        const struct model_tensor *bt = model_buffer(m, b);
        if (all || safetensors_find(st, ck_file_name(nm, bt->name, file, sizeof file)))
            rc = ck_read_floats(st, o != NULL, ck_file_name(nm, bt->name, file, sizeof file), bt, s->buffers, s);
        ck_counter_name(bt->name, name, sizeof name);
        if (rc == 0 && name[0] && (all || safetensors_find(st, ck_file_name(nm, name, file, sizeof file))))
            rc = safetensors_read(st, ck_file_name(nm, name, file, sizeof file), SAFETENSORS_I64, 0, NULL,
                                  &s->tracked);
    }
    return rc;
}

/* What reading a model file took, for the run's banner: the nn.Sequential
 * names it used, the float types it converted; "" when neither. */
static void ck_note(const struct ck_names *names, unsigned converted, const model_t *m, char *note, size_t len)
{
    const enum safetensors_dtype kinds[] = {SAFETENSORS_F16, SAFETENSORS_BF16, SAFETENSORS_F64};
    int total = 0, done = 0;
    for (int k = 0; k < 3; k++)
        total += converted >> kinds[k] & 1u;
    note[0] = '\0';
    size_t n = names->sequential ? strlen(ck_names_describe(names, m, note, len)) : 0;
    for (int k = 0; k < 3 && n < len; k++)
        if (converted >> kinds[k] & 1u)
            n += (size_t)snprintf(note + n, len - n, "%s%s",
                                  done++ == 0 ? (n ? "; " : "") : done == total ? " and " : ", ",
                                  safetensors_dtype_name(kinds[k]));
    if (total && n < len)
        snprintf(note + n, len - n, " converted to float32%s",
                 !(converted >> SAFETENSORS_F64 & 1u) ? "" : total > 1 ? ", F64 rounding to nearest even"
                                                                       : ", rounding to nearest even");
}

/* What was read, onto the device. */
static int ck_write_model(model_t *m, const struct ck_scratch *s)
{
    int rc = model_write(m, MODEL_PARAMS, 0, model_param_floats(m), s->params);
    if (rc == 0)
        rc = model_write(m, MODEL_BUFFERS, 0, model_buffer_floats(m), s->buffers);
    if (rc == 0)
        model_set_batches_tracked(m, s->tracked);
    return rc;
}

int checkpoint_load_model(const char *path, model_t *m, char *note, size_t note_len)
{
    safetensors_t *st;
    int rc = safetensors_open(path, &st);
    if (rc < 0)
        return rc;
    /* a training checkpoint's parameters (--init=DIR/checkpoint.safetensors) only once it is checked whole */
    const char *format = safetensors_meta(st, "format");
    if (format && strcmp(format, CHECKPOINT_FORMAT) == 0 && (rc = ck_verify(st)) < 0) {
        safetensors_close(st);
        return rc;
    }
    struct ck_scratch s;
    struct ck_names names;
    rc = ck_read(st, m, NULL, 0, &s, &names);
    if (rc == 0)
        rc = ck_write_model(m, &s);
    if (rc == 0 && note && note_len)
        ck_note(&names, s.converted, m, note, note_len);
    ck_scratch_free(&s);
    safetensors_close(st);
    return rc;
}

/* ---- training checkpoints ------------------------------------------------------------------- */

/* The optimizer as text: resuming with other hyperparameters is another run. */
static const char *ck_optimizer_text(const optim_t *o, char *buf, size_t len)
{
    const struct optim_config *c = optim_get_config(o);
    snprintf(buf, len,
             "%s lr=%.17g weight_decay=%.17g momentum=%.17g dampening=%.17g nesterov=%d betas=%.17g,%.17g eps=%.17g "
             "schedule=%s total_steps=%" PRIu64 " step_size=%" PRIu64 " gamma=%.17g",
             optim_kind_name(c->kind), c->lr, c->weight_decay, c->momentum, c->dampening, c->nesterov, c->beta1,
             c->beta2, c->eps, optim_schedule_name(c->schedule), c->total_steps, c->step_size, c->gamma);
    return buf;
}

const char *checkpoint_path(const char *path, char *buf, size_t len)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(buf, len, "%s/%s", path, CHECKPOINT_FILE);
    else
        snprintf(buf, len, "%s", path);
    return buf;
}

int checkpoint_save(const char *dir, const model_t *m, const optim_t *o, const struct checkpoint_state *s)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, CHECKPOINT_FILE) >= (int)sizeof path)
        return err_set(ERR_ARG, "%s: checkpoint directory path too long", dir);
    int rc = fsutil_mkdir_p(dir);
    if (rc < 0)
        return rc;
    struct ck_list l;
    struct ck_host h;
    int nstate = optim_state_count(o);
    int64_t tracked = model_batches_tracked(m);
    if ((rc = ck_host_read(&h, m, o)) < 0)
        return rc;
    if ((rc = ck_list_init(&l, ck_model_entries(m) + (size_t)nstate * (size_t)model_param_tensors(m))) < 0) {
        ck_host_free(&h);
        return rc;
    }
    ck_add_model(&l, m, &h, &tracked);
    for (int t = 0; t < model_param_tensors(m); t++)
        for (int k = 0; k < nstate; k++) {
            char name[2 * MODEL_NAME_MAX];
            const struct model_tensor *pt = model_param(m, t);
            snprintf(name, sizeof name, "optimizer.%s.%s", pt->name, optim_state_name(o, k));
            ck_add(&l, name, SAFETENSORS_F32, pt, h.state[k] + pt->offset);
        }
    char spec[128], opt[512], num[12][24];
    const uint64_t nums[12] = {s->step, s->epoch, s->batch, s->seed, (uint64_t)s->world, (uint64_t)s->batch_size,
                               (uint64_t)s->accumulate, s->first_bucket_bytes, s->bucket_cap_bytes, s->records,
                               (uint64_t)s->shuffle, (uint64_t)s->drop_last};
    for (int i = 0; i < 12; i++)
        snprintf(num[i], sizeof num[i], "%" PRIu64, nums[i]);
    char steps[24];
    snprintf(steps, sizeof steps, "%" PRIu64, optim_steps(o));
    struct safetensors_meta meta[] = {
        {"format", CHECKPOINT_FORMAT},
        {"model", model_spec_describe(model_get_spec(m), spec, sizeof spec)},
        {"optimizer", ck_optimizer_text(o, opt, sizeof opt)},
        {"optimizer_steps", steps},
        {"step", num[0]},
        {"epoch", num[1]},
        {"batch", num[2]},
        {"seed", num[3]},
        {"world", num[4]},
        {"batch_size", num[5]},
        {"accumulate", num[6]},
        {"records", num[9]},
        {"shuffle", num[10]},
        {"drop_last", num[11]},
        {"first_bucket_bytes", num[7]},
        {"bucket_cap_bytes", num[8]},
        {"compress", s->compress},
        {"same_bits", s->same_bits ? "1" : "0"},
        {"buckets", s->buckets},
    };
    rc = checkpoint_write_file(path, l.e, l.n, meta, sizeof meta / sizeof meta[0], FSUTIL_DURABLE);
    ck_list_free(&l);
    ck_host_free(&h);
    return rc;
}

/* Metadata value `key` of a checkpoint, required. */
static int ck_meta(const safetensors_t *st, const char *key, const char **out)
{
    *out = safetensors_meta(st, key);
    if (!*out)
        return err_set(ERR_FORMAT, "%s: a checkpoint without \"%s\" in its metadata (damaged, or written by "
                                   "another version)", safetensors_path(st), key);
    return 0;
}

/* Metadata number `key`, from min to max, written as the writer writes it:
 * decimal digits only, no sign, space or leading zero (so that " 4", "+4" and
 * "04" are refused, not read as 4). */
static int ck_meta_u64(const safetensors_t *st, const char *key, uint64_t min, uint64_t max, uint64_t *out)
{
    const char *v;
    int rc = ck_meta(st, key, &v);
    if (rc < 0)
        return rc;
    char canonical[24];
    int ok = cli_parse_range(key, v, min, max, out) == 0; /* digits only, in range; its message names a flag */
    if (ok)
        snprintf(canonical, sizeof canonical, "%" PRIu64, *out);
    if (!ok || strcmp(canonical, v) != 0)
        return err_set(ERR_FORMAT, "%s: metadata \"%s\" is \"%.40s\": expected a decimal number from %" PRIu64
                                   " to %" PRIu64 " (digits only: no sign, space or leading zero)",
                       safetensors_path(st), key, v, min, max);
    return 0;
}

/* Every key a checkpoint's metadata has: any other is refused, as nothing would check it. */
static const char *const ck_keys[] = {"format", "model", "optimizer", "optimizer_steps", "step", "epoch",
                                      "batch", "seed", "world", "batch_size", "accumulate", "records", "shuffle",
                                      "drop_last", "first_bucket_bytes", "bucket_cap_bytes", "compress",
                                      "buckets", "checksum", "same_bits"};

/* The metadata into *s, every field checked on its own: its form and the
 * values it can take. (The run's shape and position are checked against the
 * run by checkpoint_check_resume and checkpoint_check_position.) */
static int ck_read_state(const safetensors_t *st, struct checkpoint_state *s)
{
    const char *path = safetensors_path(st);
    uint64_t world, batch_size, accumulate, shuffle, drop_last, steps;
    const char *compress, *buckets;
    int rc;
    memset(s, 0, sizeof *s);
    for (size_t k = 0; k < safetensors_meta_count(st); k++) {
        size_t i = 0, n = sizeof ck_keys / sizeof ck_keys[0];
        while (i < n && strcmp(ck_keys[i], safetensors_meta_key(st, k)) != 0)
            i++;
        if (i == n)
            return err_set(ERR_FORMAT, "%s: metadata \"%s\" is not a field of a checkpoint of this program",
                           path, safetensors_meta_key(st, k));
    }
    if ((rc = ck_meta_u64(st, "step", 0, UINT64_MAX, &s->step)) < 0 ||
        (rc = ck_meta_u64(st, "optimizer_steps", 0, UINT64_MAX, &steps)) < 0 ||
        (rc = ck_meta_u64(st, "epoch", 0, UINT64_MAX, &s->epoch)) < 0 ||
        (rc = ck_meta_u64(st, "batch", 0, UINT64_MAX, &s->batch)) < 0 ||
        (rc = ck_meta_u64(st, "seed", 0, UINT64_MAX, &s->seed)) < 0 ||
        (rc = ck_meta_u64(st, "world", 1, INT32_MAX, &world)) < 0 ||
        (rc = ck_meta_u64(st, "batch_size", 1, MODEL_MAX_BATCH, &batch_size)) < 0 ||
        (rc = ck_meta_u64(st, "accumulate", 1, INT32_MAX, &accumulate)) < 0 ||
        (rc = ck_meta_u64(st, "records", 1, UINT64_MAX, &s->records)) < 0 ||
        (rc = ck_meta_u64(st, "shuffle", 0, 1, &shuffle)) < 0 ||
        (rc = ck_meta_u64(st, "drop_last", 0, 1, &drop_last)) < 0 ||
        (rc = ck_meta_u64(st, "first_bucket_bytes", 0, UINT64_MAX, &s->first_bucket_bytes)) < 0 ||
        (rc = ck_meta_u64(st, "bucket_cap_bytes", 0, UINT64_MAX, &s->bucket_cap_bytes)) < 0 ||
        (rc = ck_meta(st, "compress", &compress)) < 0 || (rc = ck_meta(st, "buckets", &buckets)) < 0)
        return rc;
    uint64_t same_bits = 0; /* absent in a checkpoint written before the mode existed */
    if (safetensors_meta(st, "same_bits") && (rc = ck_meta_u64(st, "same_bits", 0, 1, &same_bits)) < 0)
        return rc;
    s->same_bits = (int)same_bits;
    /* a checkpoint is written after an optimizer step, and every step of the run is one of the optimizer's */
    if (steps != s->step)
        return err_set(ERR_FORMAT, "%s: metadata \"optimizer_steps\" is %" PRIu64 ", but \"step\" is %" PRIu64
                                   ": the optimizer takes every step of the run, so the two are equal",
                       path, steps, s->step);
    int known = 0;
    for (int c = REDUCER_COMPRESS_NONE; c <= REDUCER_COMPRESS_BF16; c++)
        known |= strcmp(compress, reducer_compress_name((enum reducer_compress)c)) == 0;
    if (!known)
        return err_set(ERR_FORMAT, "%s: metadata \"compress\" is \"%.40s\": expected none, fp16 or bf16", path,
                       compress);
    if (strlen(buckets) >= sizeof s->buckets)
        return err_set(ERR_FORMAT, "%s: metadata \"buckets\" is %zu bytes long, more than the %zu a layout takes",
                       path, strlen(buckets), sizeof s->buckets - 1);
    s->world = (int)world;
    s->batch_size = (int)batch_size;
    s->accumulate = (int)accumulate;
    s->shuffle = (int)shuffle;
    s->drop_last = (int)drop_last;
    snprintf(s->compress, sizeof s->compress, "%s", compress);
    snprintf(s->buckets, sizeof s->buckets, "%s", buckets);
    return 0;
}

/* 0 when st says it is a checkpoint of this program, else ERR_FORMAT. */
static int ck_is_ours(const safetensors_t *st)
{
    const char *v = safetensors_meta(st, "format");
    if (v && strcmp(v, CHECKPOINT_FORMAT) == 0)
        return 0;
    return err_set(ERR_FORMAT, "%s: not a checkpoint of this program (its metadata \"format\" is %s%s%s, expected "
                               "\"%s\"): a foreign file", safetensors_path(st), v ? "\"" : "", v ? v : "missing",
                   v ? "\"" : "", CHECKPOINT_FORMAT);
}

/* Opens the checkpoint file `file` and checks it is one of this program's,
 * whole: its format, then every field against the checksum. */
static int ck_open(const char *file, safetensors_t **out)
{
    int rc = safetensors_open(file, out);
    if (rc == 0 && ((rc = ck_is_ours(*out)) < 0 || (rc = ck_verify(*out)) < 0)) {
        safetensors_close(*out);
        *out = NULL;
    }
    return rc;
}

int checkpoint_read_state(const char *path, struct checkpoint_state *s)
{
    char file[PATH_MAX];
    checkpoint_path(path, file, sizeof file);
    safetensors_t *st;
    int rc = ck_open(file, &st);
    if (rc < 0)
        return rc;
    rc = ck_read_state(st, s);
    safetensors_close(st);
    return rc;
}

int checkpoint_load(const char *path, model_t *m, optim_t *o, struct checkpoint_state *s)
{
    char file[PATH_MAX], spec[128], opt[512];
    checkpoint_path(path, file, sizeof file);
    safetensors_t *st;
    int rc = ck_open(file, &st);
    if (rc < 0)
        return rc;
    const char *v;
    if ((rc = ck_meta(st, "model", &v)) == 0 &&
        strcmp(v, model_spec_describe(model_get_spec(m), spec, sizeof spec)) != 0)
        rc = err_set(ERR_FORMAT, "%s: a checkpoint of the %s MLP; this run's model is %s", file, v, spec);
    if (rc == 0 && (rc = ck_meta(st, "optimizer", &v)) == 0 && strcmp(v, ck_optimizer_text(o, opt, sizeof opt)) != 0)
        rc = err_set(ERR_FORMAT, "%s: written with the optimizer \"%s\"; this run has \"%s\": resuming with other "
                                 "hyperparameters would not continue the same run", file, v, opt);
    if (rc == 0)
        rc = ck_read_state(st, s);
    struct ck_scratch scratch = {0};
    struct ck_names names;
    if (rc == 0)
        rc = ck_read(st, m, o, 1, &scratch, &names);
    if (rc == 0)
        rc = ck_write_model(m, &scratch);
    for (int k = 0; rc == 0 && k < optim_state_count(o); k++)
        rc = optim_state_write(o, k, scratch.state[k]);
    if (rc == 0)
        optim_set_steps(o, s->step); /* "optimizer_steps", which ck_read_state found equal */
    ck_scratch_free(&scratch);
    safetensors_close(st);
    return rc;
}

int checkpoint_check_resume(const char *path, const struct checkpoint_state *saved,
                            const struct checkpoint_state *now, char *warning, size_t warning_len)
{
    int warn = 0;
    if (saved->same_bits != now->same_bits)
        return err_set(ERR_STATE, "%s: written %s --same-bits; this run has it %s. The two sum the gradients in "
                                  "other orders, so the run would not continue as it began: resume %s --same-bits",
                       path, saved->same_bits ? "with" : "without", now->same_bits ? "on" : "off",
                       saved->same_bits ? "with" : "without");
    uint64_t global_saved = (uint64_t)saved->batch_size * (uint64_t)saved->world;
    uint64_t global_now = (uint64_t)now->batch_size * (uint64_t)now->world;
    if (saved->world != now->world && (global_saved != global_now || saved->accumulate != now->accumulate))
        return err_set(ERR_STATE, "%s: written by a world of %d ranks of %d samples a batch (a global batch of "
                                  "%llu); this run has %d of %d (%llu). Its position in the epoch (batch %llu) "
                                  "counts global batches, so another world can continue only with the same global "
                                  "batch: resume with --global-batch=%llu, or start a new run from its parameters "
                                  "(--init)",
                       path, saved->world, saved->batch_size, (unsigned long long)global_saved, now->world,
                       now->batch_size, (unsigned long long)global_now, (unsigned long long)saved->batch,
                       (unsigned long long)global_saved);
    if (saved->world != now->world && !now->same_bits) {
        snprintf(warning, warning_len, "%s: written by a world of %d ranks, resumed on %d with the same global batch "
                                      "of %llu: every step trains on the same samples, but the ranks' gradients "
                                      "are summed in another order, so the bits will differ from a run that never "
                                      "stopped (--same-bits keeps them)",
                 path, saved->world, now->world, (unsigned long long)global_now);
        warn = 1;
    }
    if (saved->world == now->world && (saved->batch_size != now->batch_size || saved->accumulate != now->accumulate))
        return err_set(ERR_STATE, "%s: written with %d samples per rank and batch, accumulating %d; this run has %d "
                                  "and %d: the position in the epoch (batch %llu) would point elsewhere",
                       path, saved->batch_size, saved->accumulate, now->batch_size, now->accumulate,
                       (unsigned long long)saved->batch);
    if (saved->seed != now->seed)
        return err_set(ERR_STATE, "%s: written with seed %llu; this run has %llu: the sampler would shuffle the "
                                  "rest of the epoch differently", path, (unsigned long long)saved->seed,
                       (unsigned long long)now->seed);
    if (saved->records != now->records)
        return err_set(ERR_STATE, "%s: written with %llu training records; this run has %llu. The sampler splits "
                                  "and orders every epoch over the records, and their count sets the epoch's "
                                  "batches, so the run cannot continue exactly: resume with --train-size=%llu, or "
                                  "start a new run from its parameters (--init)",
                       path, (unsigned long long)saved->records, (unsigned long long)now->records,
                       (unsigned long long)saved->records);
    if (saved->shuffle != now->shuffle)
        return err_set(ERR_STATE, "%s: written %s; this run %s. The rest of the epoch, and every epoch after it, "
                                  "would come in another order, so the run cannot continue exactly: resume %s "
                                  "--no-shuffle, or start a new run from its parameters (--init)",
                       path, saved->shuffle ? "with the sampler shuffling" : "with --no-shuffle",
                       now->shuffle ? "shuffles" : "has --no-shuffle", saved->shuffle ? "without" : "with");
    if (saved->drop_last != now->drop_last)
        return err_set(ERR_STATE, "%s: written %s; this run %s. Dropping each rank's last short batch changes the "
                                  "epoch's batch count, so the position in the epoch (batch %llu) would point "
                                  "elsewhere: resume %s --drop-last, or start a new run from its parameters (--init)",
                       path, saved->drop_last ? "with --drop-last" : "without --drop-last",
                       now->drop_last ? "has --drop-last" : "has no --drop-last", (unsigned long long)saved->batch,
                       saved->drop_last ? "with" : "without");
    if (!now->same_bits && /* the tree has no buckets */
        (saved->first_bucket_bytes != now->first_bucket_bytes || saved->bucket_cap_bytes != now->bucket_cap_bytes ||
         strcmp(saved->compress, now->compress) != 0))
        return err_set(ERR_STATE, "%s: written with buckets of first %llu bytes, then %llu, compression %s; this run "
                                  "asks %llu, %llu, %s. The buckets decide which gradients each all-reduce sums "
                                  "together and in what order, so the resumed run would differ in the last bits: "
                                  "resume with the same bucket sizes and compression",
                       path, (unsigned long long)saved->first_bucket_bytes,
                       (unsigned long long)saved->bucket_cap_bytes, saved->compress,
                       (unsigned long long)now->first_bucket_bytes, (unsigned long long)now->bucket_cap_bytes,
                       now->compress);
    return warn;
}

int checkpoint_check_position(const char *path, const struct checkpoint_state *saved,
                              const struct checkpoint_span *run)
{
    unsigned long long epoch = saved->epoch, batch = saved->batch, step = saved->step, epochs = run->epochs;
    if (saved->epoch >= run->epochs)
        return err_set(ERR_STATE, "%s: metadata \"epoch\" is %llu: this run's epochs are 0 to %llu (--epochs=%llu); "
                                  "resume with --epochs=%llu or more", path, epoch, epochs - 1, epochs, epoch + 1);
    if (!run->batches) /* a custom sampler: each epoch's length is its own */
        return 0;
    unsigned long long nb = run->batches, acc = (unsigned long long)saved->accumulate;
    if (saved->batch > run->batches)
        return err_set(ERR_STATE, "%s: metadata \"batch\" is %llu: an epoch of this run has %llu batches per rank, "
                                  "so a checkpoint is at batch 0 to %llu", path, batch, nb, nb);
    if (saved->batch % acc != 0 && saved->batch != run->batches)
        return err_set(ERR_STATE, "%s: metadata \"batch\" is %llu: with --accumulate=%llu a step ends after a "
                                  "multiple of %llu batches, or at the epoch's end (batch %llu)",
                       path, batch, acc, acc, nb);
    /* steps before this epoch, then this epoch's: groups of `accumulate` from its start, the last one shorter */
    unsigned long long per = (nb + acc - 1) / acc, at, total;
    if (__builtin_mul_overflow(epoch, per, &at) || __builtin_add_overflow(at, (batch + acc - 1) / acc, &at))
        at = ULLONG_MAX;
    if (__builtin_mul_overflow(epochs, per, &total))
        total = ULLONG_MAX;
    if (saved->step != at)
        return err_set(ERR_STATE, "%s: metadata \"step\" is %llu, but epoch %llu, batch %llu is step %llu of this run "
                                  "(%llu steps per epoch; steps 0 to %llu in all)",
                       path, step, epoch, batch, at, per, total);
    if (run->max_steps && saved->step > run->max_steps)
        return err_set(ERR_STATE, "%s: the checkpoint is at step %llu, past this run's --steps=%llu: resume with "
                                  "--steps=%llu or more", path, step, (unsigned long long)run->max_steps, step);
    return 0;
}
