/* test_checkpoint: lib/ddp/checkpoint. A checkpoint restores the model, its
 * buffers and the optimizer bit for bit with the run's state; model files
 * round-trip; foreign, damaged and mismatched files are refused naming the
 * file, and leave the model as it was; every metadata field of the header
 * edited in place ("step":"3" -> "4"), a tensor renamed or two tensors'
 * data swapped is refused naming the field; fields edited and checksummed
 * anew (" 3", "+3", "03", 2^64, a world of 0, optimizer_steps that is not
 * step, an unknown key, a bucket layout too long to hold) are refused naming
 * the field and what it can be, and so is a position the run does not reach
 * (an epoch past --epochs, a step that is not its epoch and batch's, a batch
 * past the epoch's); the checksum's own entries are checked (a field taken
 * out while its entry stays, an entry twice, the checksum listing itself,
 * none at all, an entry of another form), and the writer refuses a tensor
 * named as a metadata field, which the checksum could not tell apart; a resume
 * with another world, batch, seed, training set size, shuffle, drop_last or
 * bucket setup is refused with the reason; a checkpoint without a key is
 * refused naming the key; --init from a damaged checkpoint is refused;
 * --init reads nn.Sequential's names (the first Linear module 0, or 1 after
 * a Flatten) and still refuses another shape, a missing, an extra or a
 * foreign tensor, or a numbering from 2 or past, named as the file names it; files
 * torch wrote (F16, BF16, F64) load with torch's float32 bits; and
 * a writer killed with SIGKILL in the middle of a save, at chosen bytes from
 * the first to the last (stopped there by construction, not by timing),
 * always leaves the previous checkpoint, complete. The models live on
 * simulated devices (model_fixture.h): the test sets and reads them through
 * copies. */
#include "check.h"
#include "model_fixture.h"
#include "base/error.h"
#include "base/hash.h"
#include "ddp/checkpoint.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static model_t *make_model(int bn, int hidden)
{
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {hidden, 6}, .nhidden = 2, .batchnorm = bn};
    model_t *m;
    CHECK_OK(fixture_model_create(&s, 8, &m));
    CHECK_OK(model_init(m, 1));
    return m;
}

/* A copy of m's parameters (the caller frees it), to see later that a refused load left them as they were. */
static float *params_of(const model_t *m)
{
    float *p;
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &p));
    return p;
}

/* 1 when every parameter of m still has `before`'s bits; frees `before`. */
static int params_still(const model_t *m, float *before)
{
    float *now = params_of(m);
    int same = memcmp(before, now, model_param_floats(m) * sizeof *now) == 0;
    free(before);
    free(now);
    return same;
}

/* 1 when optimizer state k of a and of b (models of n parameters) hold the same bits. */
static int same_state(const optim_t *a, const optim_t *b, int k, size_t n)
{
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    CHECK(x && y);
    CHECK_OK(optim_state_read(a, k, x));
    CHECK_OK(optim_state_read(b, k, y));
    int same = memcmp(x, y, n * sizeof *x) == 0;
    free(x);
    free(y);
    return same;
}

/* A few real steps, so parameters, buffers and optimizer state are all non-trivial. */
static void train(model_t *m, optim_t *o, int steps)
{
    uint8_t x[8 * 20];
    int64_t y[8];
    uint64_t st = 5;
    struct model_loss loss;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < 8 * 20; i++)
            x[i] = (uint8_t)hash_splitmix64_next(&st);
        for (int b = 0; b < 8; b++)
            y[b] = (int64_t)(hash_splitmix64_next(&st) % 4);
        CHECK_OK(model_upload_batch(m, x, NULL, y, 8));
        CHECK_OK(model_forward(m, 8, MODEL_TRAIN));
        CHECK_OK(model_loss(m, 8, 1.0f, &loss));
        CHECK_OK(model_backward(m, 8, 0, NULL, NULL));
        CHECK_OK(optim_step(o, m));
    }
}

static struct checkpoint_state run_state(void)
{
    struct checkpoint_state s = {.step = 3, .epoch = 1, .batch = 7, .seed = 42, .world = 4, .batch_size = 8,
                                 .accumulate = 1, .records = 2048, .shuffle = 1, .drop_last = 0,
                                 .first_bucket_bytes = 1 << 20, .bucket_cap_bytes = 25 << 20};
    snprintf(s.compress, sizeof s.compress, "none");
    snprintf(s.buckets, sizeof s.buckets, "rebuilt: fc3.bias fc3.weight | fc2.bias");
    return s;
}

TEST(checkpoint_round_trip_is_bit_exact)
{
    enum optim_kind kinds[] = {OPTIM_SGD, OPTIM_ADAM};
    for (int k = 0; k < 2; k++) {
        model_t *a = make_model(1, 9), *b = make_model(1, 9);
        struct optim_config c;
        optim_config_default(&c, kinds[k]);
        optim_t *oa, *ob;
        CHECK_OK(optim_create(&c, a, &oa));
        CHECK_OK(optim_create(&c, b, &ob));
        train(a, oa, 3);
        struct checkpoint_state s = run_state(), got;
        const char *dir = check_tmp_path(k ? "ck-adam" : "ck-sgd");
        CHECK_OK(checkpoint_save(dir, a, oa, &s));
        CHECK_OK(checkpoint_load(dir, b, ob, &got));
        CHECK_EQ(fixture_same(a, b, MODEL_PARAMS), 1);
        CHECK_EQ(fixture_same(a, b, MODEL_BUFFERS), 1);
        CHECK_EQ(model_batches_tracked(b), 3);
        CHECK_EQ_U64(optim_steps(ob), 3);
        for (int q = 0; q < optim_state_count(oa); q++)
            CHECK(same_state(oa, ob, q, model_param_floats(a)));
        CHECK(got.step == 3 && got.epoch == 1 && got.batch == 7 && got.seed == 42 && got.world == 4);
        CHECK(got.batch_size == 8 && got.accumulate == 1 && got.bucket_cap_bytes == 25u << 20);
        CHECK(got.records == 2048 && got.shuffle == 1 && got.drop_last == 0);
        CHECK_STR(got.buckets, s.buckets);
        CHECK_STR(got.compress, "none");
        /* the two continue identically */
        train(a, oa, 2);
        train(b, ob, 2);
        CHECK_EQ(fixture_same(a, b, MODEL_PARAMS), 1);
        /* the file itself is safetensors with PyTorch's names */
        char file[600];
        safetensors_t *st;
        CHECK_OK(safetensors_open(checkpoint_path(dir, file, sizeof file), &st));
        CHECK(safetensors_find(st, "bn1.num_batches_tracked") != NULL);
        CHECK(safetensors_find(st, k ? "optimizer.fc2.weight.exp_avg_sq" : "optimizer.fc2.weight.momentum_buffer"));
        CHECK_STR(safetensors_meta(st, "format"), CHECKPOINT_FORMAT);
        safetensors_close(st);
        optim_destroy(oa);
        optim_destroy(ob);
        fixture_model_destroy(a);
        fixture_model_destroy(b);
    }
}

TEST(checkpoint_model_files)
{
    model_t *a = make_model(1, 9), *b = make_model(1, 9), *other = make_model(1, 10), *plain = make_model(0, 9);
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    optim_t *o;
    CHECK_OK(optim_create(&c, a, &o));
    train(a, o, 2);
    const char *path = check_tmp_path("model.safetensors");
    CHECK_OK(checkpoint_save_model(path, a, 0));
    CHECK_OK(checkpoint_load_model(path, b, NULL, 0));
    CHECK_EQ(fixture_same(a, b, MODEL_PARAMS), 1);
    CHECK_EQ(fixture_same(a, b, MODEL_BUFFERS), 1);
    CHECK_EQ(model_batches_tracked(b), 2);
    /* wrong shapes name the parameter; the model is untouched */
    float *keep = params_of(other);
    CHECK_ERR(checkpoint_load_model(path, other, NULL, 0), ERR_FORMAT,
              "fc1.weight has shape [9, 20], expected [10, 20]");
    CHECK(params_still(other, keep));
    /* a model without BatchNorm finds tensors it does not have */
    CHECK_ERR(checkpoint_load_model(path, plain, NULL, 0), ERR_FORMAT, "unexpected tensor bn1.");
    /* a checkpoint's parameters load as a model file (--init from where a run stood), its optimizer
     * states passed over; the same tensors in a file that is not a checkpoint are foreign */
    struct checkpoint_state s = run_state();
    CHECK_OK(checkpoint_save(check_tmp_path("ckm"), a, o, &s));
    char file[600];
    float *zeros = calloc(model_param_floats(b), sizeof *zeros);
    CHECK_OK(model_write(b, MODEL_PARAMS, 0, model_param_floats(b), zeros));
    free(zeros);
    CHECK_OK(checkpoint_load_model(checkpoint_path(check_tmp_path("ckm"), file, sizeof file), b, NULL, 0));
    CHECK_EQ(fixture_same(a, b, MODEL_PARAMS), 1);
    float zero = 0;
    struct safetensors_entry odd[] = {
        {.name = "optimizer.fc1.weight.momentum_buffer", .dtype = SAFETENSORS_F32, .ndim = 0, .data = &zero}};
    CHECK_OK(safetensors_write(check_tmp_path("odd.safetensors"), odd, 1, NULL, 0, 0));
    CHECK_ERR(checkpoint_load_model(check_tmp_path("odd.safetensors"), b, NULL, 0), ERR_FORMAT,
              "unexpected tensor optimizer.");
    optim_destroy(o);
    fixture_model_destroy(a);
    fixture_model_destroy(b);
    fixture_model_destroy(other);
    fixture_model_destroy(plain);
}

TEST(checkpoint_refuses_foreign_damaged_and_mismatched_files)
{
    model_t *a = make_model(0, 9), *b = make_model(0, 9);
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    optim_t *oa, *ob;
    CHECK_OK(optim_create(&c, a, &oa));
    CHECK_OK(optim_create(&c, b, &ob));
    train(a, oa, 3);
    struct checkpoint_state s = run_state(), got;
    float *keep = params_of(b);
    /* missing */
    CHECK_ERR(checkpoint_load(check_tmp_path("nowhere"), b, ob, &got), ERR_IO, "nowhere");
    /* not safetensors at all */
    FILE *f = fopen(check_tmp_path("junk"), "wb");
    fputs("this is not a checkpoint", f);
    fclose(f);
    CHECK_ERR(checkpoint_load(check_tmp_path("junk"), b, ob, &got), ERR_FORMAT, "junk");
    /* a model file: safetensors, but foreign */
    CHECK_OK(checkpoint_save_model(check_tmp_path("plain.safetensors"), a, 0));
    CHECK_ERR(checkpoint_load(check_tmp_path("plain.safetensors"), b, ob, &got), ERR_FORMAT,
              "not a checkpoint of this program");
    /* damaged: one flipped bit in the data */
    const char *dir = check_tmp_path("ck");
    CHECK_OK(checkpoint_save(dir, a, oa, &s));
    char file[600];
    checkpoint_path(dir, file, sizeof file);
    struct stat sb;
    CHECK(stat(file, &sb) == 0);
    f = fopen(file, "r+b");
    CHECK(fseek(f, sb.st_size - 5, SEEK_SET) == 0);
    int ch = fgetc(f);
    CHECK(fseek(f, sb.st_size - 5, SEEK_SET) == 0);
    fputc(ch ^ 0x10, f);
    fclose(f);
    CHECK_ERR(checkpoint_load(dir, b, ob, &got), ERR_FORMAT,
              "tensor optimizer.fc3.bias.momentum_buffer (its dtype, shape or bytes) does not match its checksum");
    CHECK_CONTAINS(err_msg(), file);
    /* another model, another optimizer */
    CHECK_OK(checkpoint_save(dir, a, oa, &s));
    model_t *wide = make_model(0, 11);
    optim_t *ow;
    CHECK_OK(optim_create(&c, wide, &ow));
    CHECK_ERR(checkpoint_load(dir, wide, ow, &got), ERR_FORMAT, "a checkpoint of the 20-9-6-4 MLP; this run's model is 20-11-6-4");
    struct optim_config adam;
    optim_config_default(&adam, OPTIM_ADAM);
    optim_t *oadam;
    CHECK_OK(optim_create(&adam, b, &oadam));
    CHECK_ERR(checkpoint_load(dir, b, oadam, &got), ERR_FORMAT, "written with the optimizer \"sgd lr=0.01");
    struct optim_config fast = c;
    fast.lr = 0.5;
    optim_t *ofast;
    CHECK_OK(optim_create(&fast, b, &ofast));
    CHECK_ERR(checkpoint_load(dir, b, ofast, &got), ERR_FORMAT, "would not continue the same run");
    /* none of that touched the model */
    CHECK(params_still(b, keep));
    CHECK_EQ_U64(optim_steps(ob), 0);
    /* an unwritable directory is named */
    CHECK_ERR(checkpoint_save("/proc/ddp-no-such-dir", a, oa, &s), ERR_IO, "/proc/ddp-no-such-dir");
    optim_destroy(oa);
    optim_destroy(ob);
    optim_destroy(ow);
    optim_destroy(oadam);
    optim_destroy(ofast);
    fixture_model_destroy(a);
    fixture_model_destroy(b);
    fixture_model_destroy(wide);
}

TEST(checkpoint_resume_checks_the_run)
{
    struct checkpoint_state saved = run_state(), now = run_state();
    char w[1024] = "";
    CHECK_OK(checkpoint_check_resume("ck", &saved, &now, w, sizeof w));
    now.world = 2; /* another world, the same per-rank batch: another global batch */
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE,
              "ck: written by a world of 4 ranks of 8 samples a batch (a global batch of 32); this run has 2 of 8");
    CHECK_CONTAINS(err_msg(), "resume with --global-batch=32");
    now.batch_size = 16; /* the same global batch: allowed, with the warning that the bits will differ */
    CHECK(checkpoint_check_resume("ck", &saved, &now, w, sizeof w) == 1);
    CHECK_CONTAINS(w, "the bits will differ from a run that never stopped (--same-bits keeps them)");
    saved.same_bits = now.same_bits = 1; /* with --same-bits on both sides: exactly, no warning, no buckets */
    now.bucket_cap_bytes = 1 << 20;
    CHECK_OK(checkpoint_check_resume("ck", &saved, &now, w, sizeof w));
    now.same_bits = 0;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE,
              "ck: written with --same-bits; this run has it off");
    saved = run_state();
    now = run_state();
    now.batch_size = 16;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE, "the position in the epoch (batch 7)");
    now = run_state();
    now.seed = 1;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE, "seed 42; this run has 1");
    now = run_state();
    now.records = 3000;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE,
              "ck: written with 2048 training records; this run has 3000");
    CHECK_CONTAINS(err_msg(), "resume with --train-size=2048");
    now = run_state();
    now.shuffle = 0;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE,
              "ck: written with the sampler shuffling; this run has --no-shuffle");
    CHECK_CONTAINS(err_msg(), "resume without --no-shuffle");
    now = run_state();
    now.drop_last = 1;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE,
              "ck: written without --drop-last; this run has --drop-last");
    CHECK_CONTAINS(err_msg(), "the position in the epoch (batch 7)");
    now = run_state();
    now.bucket_cap_bytes = 1 << 20;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE, "resume with the same bucket sizes");
    now = run_state();
    snprintf(now.compress, sizeof now.compress, "fp16");
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now, w, sizeof w), ERR_STATE, "compression none");
}

/* A checkpoint whose metadata lacks keys (here the training records, shuffle
 * and drop_last, which an earlier version did not record), checksummed as
 * it is: the first missing key is named. */
TEST(checkpoint_without_a_key_is_refused_naming_it)
{
    struct safetensors_meta meta[] = {
        {"format", CHECKPOINT_FORMAT},
        {"step", "3"}, {"optimizer_steps", "3"}, {"epoch", "1"}, {"batch", "7"}, {"seed", "42"},
        {"world", "4"}, {"batch_size", "8"}, {"accumulate", "1"},
        {"first_bucket_bytes", "1048576"}, {"bucket_cap_bytes", "26214400"},
        {"compress", "none"}, {"buckets", "rebuilt: fc3.bias fc3.weight | fc2.bias"},
    };
    const char *file = check_tmp_path("old.safetensors");
    CHECK_OK(checkpoint_write_file(file, NULL, 0, meta, sizeof meta / sizeof meta[0], 0));
    struct checkpoint_state got;
    CHECK_ERR(checkpoint_read_state(file, &got), ERR_FORMAT, "a checkpoint without \"records\" in its metadata");
    CHECK_CONTAINS(err_msg(), file);
    /* a checkpoint of the earlier format, whose checksum covered only the tensors, is foreign */
    meta[0].value = "ddp-datapath checkpoint 1";
    CHECK_OK(checkpoint_write_file(file, NULL, 0, meta, sizeof meta / sizeof meta[0], 0));
    CHECK_ERR(checkpoint_read_state(file, &got), ERR_FORMAT,
              "its metadata \"format\" is \"ddp-datapath checkpoint 1\"");
}

/* ---- the header: every field checked ----------------------------------------------------- */

/* A saved checkpoint of a trained 20-9-6-4 model (SGD, 3 steps, run_state()), its file's path in `file`. */
static void saved_checkpoint(const char *dir, char *file, size_t len)
{
    model_t *m = make_model(1, 9);
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    train(m, o, 3);
    struct checkpoint_state s = run_state();
    CHECK_OK(checkpoint_save(dir, m, o, &s));
    checkpoint_path(dir, file, len);
    optim_destroy(o);
    fixture_model_destroy(m);
}

/* checkpoint_load of `path` into a fresh model (SGD): its result; *got the state, *steps the optimizer's
 * steps after, *kept whether the model's parameters were left as they were (every one). */
static int load_fresh(const char *path, struct checkpoint_state *got, uint64_t *steps, int *kept)
{
    model_t *m = make_model(1, 9);
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    float *keep = params_of(m);
    int rc = checkpoint_load(path, m, o, got);
    *steps = optim_steps(o);
    *kept = params_still(m, keep);
    optim_destroy(o);
    fixture_model_destroy(m);
    return rc;
}

/* checkpoint_load of `path` into a fresh model fails with ERR_FORMAT naming `needle`, and leaves it as it was. */
static void load_refused(const char *path, const char *needle)
{
    struct checkpoint_state got;
    uint64_t steps;
    int kept, rc = load_fresh(path, &got, &steps, &kept);
    CHECK_MSG(rc == ERR_FORMAT, "%s: expected ERR_FORMAT naming %s, got %s%s%s", path, needle, err_name(rc),
              rc ? ": " : "", rc ? err_msg() : "");
    CHECK_CONTAINS(err_msg(), needle);
    CHECK(kept && steps == 0);
}

static char *read_whole(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    CHECK(f && fseek(f, 0, SEEK_END) == 0);
    *size = (size_t)ftell(f);
    char *buf = malloc(*size + 1);
    rewind(f);
    CHECK(buf && fread(buf, 1, *size, f) == *size);
    buf[*size] = '\0';
    fclose(f);
    return buf;
}

static void write_whole(const char *path, const char *buf, size_t size)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, size, f) == size);
    fclose(f);
}

/* The next letter or digit, in the same class: the edit keeps the header valid JSON of the same length. */
static char flipped(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch == '9' ? '0' : ch + 1;
    return ch == 'z' ? 'a' : ch == 'Z' ? 'A' : ch + 1;
}

/* Every metadata field of a saved checkpoint edited in place, one letter or
 * digit of its value at a time ("step":"3" -> "4"), and a tensor renamed in the
 * header: each is refused naming the field. */
TEST(checkpoint_header_edits_are_refused_naming_the_field)
{
    char file[600], field[128];
    saved_checkpoint(check_tmp_path("ck-edit"), file, sizeof file);
    size_t size;
    char *orig = read_whole(file, &size);
    safetensors_t *st;
    CHECK_OK(safetensors_open(file, &st));
    const char *edited = check_tmp_path("edited.safetensors");
    for (size_t k = 0; k < safetensors_meta_count(st); k++) {
        const char *key = safetensors_meta_key(st, k);
        snprintf(field, sizeof field, "\"%s\":\"", key);
        char *copy = malloc(size);
        memcpy(copy, orig, size);
        char *at = strstr(copy + 8, field);
        CHECK_MSG(at, "no %s in the header", field);
        char *v = at + strlen(field);
        while (!isalnum((unsigned char)*v))
            v++;
        *v = flipped(*v);
        write_whole(edited, copy, size);
        snprintf(field, sizeof field, "\"%s\"", key);
        load_refused(edited, field);
        free(copy);
    }
    safetensors_close(st);
    /* a tensor renamed in the header */
    char *copy = malloc(size);
    memcpy(copy, orig, size);
    char *at = strstr(copy + 8, "\"fc2.bias\":{");
    CHECK(at);
    at[5] = 'c';
    write_whole(edited, copy, size);
    load_refused(edited, "tensor fc2.cias (its dtype, shape or bytes) is not covered by the checksum");
    free(copy);
    free(orig);
}

/* Two tensors of one shape whose data were swapped, the header's checksum kept: the names, not only the
 * bytes in order, are covered. */
TEST(checkpoint_swapped_tensors_are_refused)
{
    char file[600];
    saved_checkpoint(check_tmp_path("ck-swap"), file, sizeof file);
    safetensors_t *st;
    CHECK_OK(safetensors_open(file, &st));
    size_t n = safetensors_count(st), nm = safetensors_meta_count(st);
    struct safetensors_entry e[64];
    struct safetensors_meta meta[32];
    CHECK(n <= 64 && nm <= 32);
    int a = -1, b = -1;
    for (size_t i = 0; i < n; i++) {
        const struct safetensors_tensor *t = safetensors_at(st, i);
        e[i] = (struct safetensors_entry){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .data = t->data};
        memcpy(e[i].shape, t->shape, sizeof e[i].shape);
        a = strcmp(t->name, "fc3.bias") == 0 ? (int)i : a;
        b = strcmp(t->name, "optimizer.fc3.bias.momentum_buffer") == 0 ? (int)i : b;
    }
    CHECK(a >= 0 && b >= 0);
    const void *d = e[a].data;
    e[a].data = e[b].data;
    e[b].data = d;
    for (size_t k = 0; k < nm; k++) {
        const char *key = safetensors_meta_key(st, k);
        meta[k] = (struct safetensors_meta){key, safetensors_meta(st, key)};
    }
    const char *swapped = check_tmp_path("swapped.safetensors");
    CHECK_OK(safetensors_write(swapped, e, n, meta, nm, 0));
    safetensors_close(st);
    load_refused(swapped, "tensor fc3.bias (its dtype, shape or bytes) does not match its checksum");
}

/* Writes dst: src's tensors and metadata with `key` set to `value` (NULL: taken out; a new key: added), and
 * checksummed anew, as someone who edits a checkpoint knowingly would. */
static void rewrite(const char *src, const char *dst, const char *key, const char *value)
{
    safetensors_t *st;
    CHECK_OK(safetensors_open(src, &st));
    size_t n = safetensors_count(st), nm = 0;
    struct safetensors_entry e[64];
    struct safetensors_meta meta[32];
    CHECK(n <= 64 && safetensors_meta_count(st) < 32);
    for (size_t i = 0; i < n; i++) {
        const struct safetensors_tensor *t = safetensors_at(st, i);
        e[i] = (struct safetensors_entry){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .data = t->data};
        memcpy(e[i].shape, t->shape, sizeof e[i].shape);
    }
    int found = 0;
    for (size_t k = 0; k < safetensors_meta_count(st); k++) {
        const char *kk = safetensors_meta_key(st, k);
        found |= strcmp(kk, key) == 0;
        if (strcmp(kk, "checksum") != 0 && (strcmp(kk, key) != 0 || value))
            meta[nm++] = (struct safetensors_meta){kk, strcmp(kk, key) == 0 ? value : safetensors_meta(st, kk)};
    }
    if (!found)
        meta[nm++] = (struct safetensors_meta){key, value};
    CHECK_OK(checkpoint_write_file(dst, e, n, meta, nm, 0));
    safetensors_close(st);
}

/* Fields edited and checksummed anew: each is still checked for its form and range, and refused naming the
 * field and what it can be. */
TEST(checkpoint_rechecksummed_fields_are_checked)
{
    char file[600];
    saved_checkpoint(check_tmp_path("ck-sum"), file, sizeof file);
    const char *dst = check_tmp_path("resummed.safetensors");
    /* the rewrite itself keeps a loadable checkpoint */
    rewrite(file, dst, "step", "3");
    struct checkpoint_state got;
    uint64_t steps;
    int kept;
    CHECK_OK(load_fresh(dst, &got, &steps, &kept));
    CHECK(got.step == 3 && steps == 3);
    static const struct {
        const char *key, *value, *needle;
    } bad[] = {
        {"step", " 3", "metadata \"step\" is \" 3\": expected a decimal number from 0 to 18446744073709551615"},
        {"step", "3 ", "\"step\" is \"3 \""},
        {"step", "+3", "\"step\" is \"+3\""},
        {"step", "03", "\"step\" is \"03\""},
        {"step", "-1", "\"step\" is \"-1\""},
        {"step", "0x3", "\"step\" is \"0x3\""},
        {"step", "", "\"step\" is \"\""},
        {"epoch", "18446744073709551616", "\"epoch\" is \"18446744073709551616\": expected a decimal number from 0"},
        {"world", "0", "\"world\" is \"0\": expected a decimal number from 1 to 2147483647"},
        {"batch_size", "65537", "\"batch_size\" is \"65537\": expected a decimal number from 1 to 65536"},
        {"accumulate", "0", "\"accumulate\" is \"0\": expected a decimal number from 1"},
        {"records", "0", "\"records\" is \"0\""},
        {"shuffle", "2", "\"shuffle\" is \"2\": expected a decimal number from 0 to 1"},
        {"drop_last", "yes", "\"drop_last\" is \"yes\": expected a decimal number from 0 to 1"},
        {"optimizer_steps", "4", "metadata \"optimizer_steps\" is 4, but \"step\" is 3"},
        {"step", "18446744073709551615", "metadata \"optimizer_steps\" is 3, but \"step\" is 18446744073709551615"},
        {"compress", "fp17", "metadata \"compress\" is \"fp17\": expected none, fp16 or bf16"},
        {"notes", "hello", "metadata \"notes\" is not a field of a checkpoint"},
        {"records", NULL, "a checkpoint without \"records\""},
        {"model", "20-9-6-5", "a checkpoint of the 20-9-6-5 MLP; this run's model is 20-9-6-4"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rewrite(file, dst, bad[i].key, bad[i].value);
        load_refused(dst, bad[i].needle);
    }
}

/* Writes dst: src's tensors and metadata without the tensor or metadata field `drop` (NULL: none), and
 * metadata "checksum" set to `sums` (NULL: taken out), as damage or an edit by hand would leave them. */
static void write_sums(const char *src, const char *dst, const char *drop, const char *sums)
{
    safetensors_t *st;
    CHECK_OK(safetensors_open(src, &st));
    size_t n = 0, nm = 0;
    struct safetensors_entry e[64];
    struct safetensors_meta meta[32];
    CHECK(safetensors_count(st) <= 64 && safetensors_meta_count(st) <= 32);
    for (size_t i = 0; i < safetensors_count(st); i++) {
        const struct safetensors_tensor *t = safetensors_at(st, i);
        if (drop && strcmp(t->name, drop) == 0)
            continue;
        e[n] = (struct safetensors_entry){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .data = t->data};
        memcpy(e[n++].shape, t->shape, sizeof e[0].shape);
    }
    for (size_t k = 0; k < safetensors_meta_count(st); k++) {
        const char *key = safetensors_meta_key(st, k);
        if (strcmp(key, "checksum") == 0 ? sums != NULL : !drop || strcmp(key, drop) != 0)
            meta[nm++] = (struct safetensors_meta){key, strcmp(key, "checksum") == 0 ? sums : safetensors_meta(st, key)};
    }
    CHECK_OK(safetensors_write(dst, e, n, meta, nm, 0));
    safetensors_close(st);
}

/* The checksum's own entries: a field taken out of the file while its entry stays, an entry listed twice,
 * the checksum listing itself, no checksum at all, and entries of another form than "NAME=<16 hex digits>"
 * separated by single spaces: each refused, saying which. */
TEST(checkpoint_checksum_entries_are_checked)
{
    char file[600], sums[4096], bad[4200];
    saved_checkpoint(check_tmp_path("ck-sums"), file, sizeof file);
    safetensors_t *st;
    CHECK_OK(safetensors_open(file, &st));
    CHECK(strlen(safetensors_meta(st, "checksum")) < sizeof sums);
    snprintf(sums, sizeof sums, "%s", safetensors_meta(st, "checksum"));
    safetensors_close(st);
    const char *dst = check_tmp_path("sums.safetensors");
    /* the file as it was, written by this helper: loads */
    write_sums(file, dst, NULL, sums);
    struct checkpoint_state got;
    uint64_t steps;
    int kept;
    CHECK_OK(load_fresh(dst, &got, &steps, &kept));
    /* a metadata field, or a tensor, taken out: its entry is still in the checksum */
    write_sums(file, dst, "seed", sums);
    load_refused(dst, "the checksum covers \"seed\", which the file does not have: it was taken out");
    write_sums(file, dst, "fc3.bias", sums);
    load_refused(dst, "the checksum covers \"fc3.bias\", which the file does not have");
    /* an entry twice: the first, the last, one in the middle */
    const char *first_end = strchr(sums, ' '), *last = strrchr(sums, ' ') + 1, *mid = strstr(sums, " step=") + 1;
    CHECK(first_end && mid);
    snprintf(bad, sizeof bad, "%s %.*s", sums, (int)(first_end - sums), sums);
    write_sums(file, dst, NULL, bad);
    load_refused(dst, "metadata \"checksum\" lists a field twice: damaged");
    snprintf(bad, sizeof bad, "%s %s", last, sums);
    write_sums(file, dst, NULL, bad);
    load_refused(dst, "metadata \"checksum\" lists a field twice");
    snprintf(bad, sizeof bad, "%s %.21s", sums, mid); /* "step=" and its 16 digits */
    write_sums(file, dst, NULL, bad);
    load_refused(dst, "metadata \"checksum\" lists a field twice");
    /* itself */
    snprintf(bad, sizeof bad, "%s checksum=0123456789abcdef", sums);
    write_sums(file, dst, NULL, bad);
    load_refused(dst, "metadata \"checksum\" lists itself, which it cannot cover");
    /* none, or an empty one */
    write_sums(file, dst, NULL, NULL);
    load_refused(dst, "a checkpoint without \"checksum\" in its metadata");
    write_sums(file, dst, NULL, "");
    load_refused(dst, "metadata \"format\" (\"" CHECKPOINT_FORMAT "\") is not covered by the checksum");
    /* entries of another form, appended after a space: named from where the form breaks */
    static const char *const forms[] = {
        " step=0123456789abcde",   /* 15 hex digits */
        " step=0123456789abcdef0", /* 17 */
        " step=0123456789ABCDEF",  /* not as the writer writes them */
        " step:0123456789abcdef",  /* no '=' */
        " =0123456789abcdef",      /* no name */
        "  step=0123456789abcdef", /* two spaces */
    };
    char want[160];
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(bad, sizeof bad, "%s%s", sums, forms[i]);
        write_sums(file, dst, NULL, bad);
        snprintf(want, sizeof want, "metadata \"checksum\" is damaged near \"%s\"", forms[i] + 1);
        load_refused(dst, want);
    }
    snprintf(bad, sizeof bad, "%s ", sums); /* a trailing space: the last entry is where it breaks */
    write_sums(file, dst, NULL, bad);
    snprintf(want, sizeof want, "metadata \"checksum\" is damaged near \"%.20s", last);
    load_refused(dst, want);
    snprintf(bad, sizeof bad, " %s", sums); /* a leading space */
    write_sums(file, dst, NULL, bad);
    snprintf(want, sizeof want, "metadata \"checksum\" is damaged near \" %.20s", sums);
    load_refused(dst, want);
}

/* The writer refuses what the checksum could not name once: a tensor named as a metadata field. */
TEST(checkpoint_writer_refuses_a_tensor_named_as_a_field)
{
    float x = 1;
    struct safetensors_entry e = {.name = "step", .dtype = SAFETENSORS_F32, .data = &x};
    struct safetensors_meta meta[] = {{"step", "3"}};
    const char *path = check_tmp_path("clash.safetensors");
    CHECK_ERR(checkpoint_write_file(path, &e, 1, meta, 1, 0), ERR_ARG,
              "tensor step has the name of a metadata field");
    e.name = "checksum";
    CHECK_ERR(checkpoint_write_file(path, &e, 1, meta, 1, 0), ERR_ARG,
              "tensor checksum has the name of a metadata field");
    e.name = "steps";
    CHECK_OK(checkpoint_write_file(path, &e, 1, meta, 1, 0));
}

/* A "buckets" layout longer than a checkpoint_state holds is refused, not cut short. */
TEST(checkpoint_long_bucket_layout_is_refused)
{
    char file[600];
    saved_checkpoint(check_tmp_path("ck-buckets"), file, sizeof file);
    static char layout[CHECKPOINT_TEXT_MAX + 1];
    memset(layout, 'x', CHECKPOINT_TEXT_MAX);
    const char *dst = check_tmp_path("buckets.safetensors");
    rewrite(file, dst, "buckets", layout);
    char want[160];
    snprintf(want, sizeof want, "metadata \"buckets\" is %d bytes long, more than the %d a layout takes",
             CHECKPOINT_TEXT_MAX, CHECKPOINT_TEXT_MAX - 1);
    load_refused(dst, want);
    layout[CHECKPOINT_TEXT_MAX - 1] = '\0'; /* the longest that fits */
    rewrite(file, dst, "buckets", layout);
    struct checkpoint_state got;
    CHECK_OK(checkpoint_read_state(dst, &got));
    CHECK_EQ(strlen(got.buckets), CHECKPOINT_TEXT_MAX - 1);
}

/* The position against the run: 3 epochs of 16 batches per rank. */
TEST(checkpoint_position_is_checked_against_the_run)
{
    struct checkpoint_state s = run_state(); /* epoch 1, batch 7, accumulate 1 */
    struct checkpoint_span run = {.epochs = 3, .batches = 16, .max_steps = 0};
    s.step = 23;
    CHECK_OK(checkpoint_check_position("ck", &s, &run));
    s.step = 3; /* what "step":"2" -> "3" re-checksummed would say */
    CHECK_ERR(checkpoint_check_position("ck", &s, &run), ERR_STATE,
              "ck: metadata \"step\" is 3, but epoch 1, batch 7 is step 23 of this run (16 steps per epoch; steps 0 "
              "to 48 in all)");
    s.step = UINT64_MAX;
    CHECK_ERR(checkpoint_check_position("ck", &s, &run), ERR_STATE, "\"step\" is 18446744073709551615");
    s.step = 23;
    s.epoch = UINT64_MAX;
    CHECK_ERR(checkpoint_check_position("ck", &s, &run), ERR_STATE,
              "ck: metadata \"epoch\" is 18446744073709551615: this run's epochs are 0 to 2 (--epochs=3)");
    s.epoch = 3;
    CHECK_ERR(checkpoint_check_position("ck", &s, &run), ERR_STATE, "resume with --epochs=4 or more");
    s.epoch = 1;
    s.batch = 17;
    CHECK_ERR(checkpoint_check_position("ck", &s, &run), ERR_STATE,
              "metadata \"batch\" is 17: an epoch of this run has 16 batches per rank, so a checkpoint is at batch 0 "
              "to 16");
    /* accumulating 3: steps end at batches 3, 6, ..., 15 and at the epoch's end, 16 */
    s.accumulate = 3;
    s.batch = 7;
    s.step = 6 + 3;
    CHECK_ERR(checkpoint_check_position("ck", &s, &run), ERR_STATE,
              "\"batch\" is 7: with --accumulate=3 a step ends after a multiple of 3 batches, or at the epoch's end");
    s.batch = 16;
    s.step = 6 + 6;
    CHECK_OK(checkpoint_check_position("ck", &s, &run));
    s.batch = 15;
    s.step = 6 + 5;
    CHECK_OK(checkpoint_check_position("ck", &s, &run));
    /* --steps below the checkpoint's step */
    run.max_steps = 10;
    CHECK_ERR(checkpoint_check_position("ck", &s, &run), ERR_STATE,
              "the checkpoint is at step 11, past this run's --steps=10: resume with --steps=11 or more");
    run.max_steps = 11;
    CHECK_OK(checkpoint_check_position("ck", &s, &run));
    /* a custom sampler: only the epoch is known ahead */
    run.batches = 0;
    s.step = 12345;
    CHECK_OK(checkpoint_check_position("ck", &s, &run));
    s.epoch = 3;
    CHECK_ERR(checkpoint_check_position("ck", &s, &run), ERR_STATE, "\"epoch\" is 3");
}

/* --init from a training checkpoint reads its parameters only once it is checked whole. */
TEST(checkpoint_init_from_a_damaged_checkpoint_is_refused)
{
    char file[600];
    saved_checkpoint(check_tmp_path("ck-init"), file, sizeof file);
    model_t *m = make_model(1, 9);
    CHECK_OK(checkpoint_load_model(file, m, NULL, 0));
    rewrite(file, check_tmp_path("x.safetensors"), "step", "3"); /* a checkpoint still */
    size_t size;
    char *buf = read_whole(file, &size);
    char *at = strstr(buf + 8, "\"seed\":\"42\"");
    CHECK(at);
    at[8] = '5';
    write_whole(file, buf, size);
    free(buf);
    float *keep = params_of(m);
    CHECK_ERR(checkpoint_load_model(file, m, NULL, 0), ERR_FORMAT,
              "metadata \"seed\" (\"52\") does not match its checksum");
    CHECK(params_still(m, keep));
    fixture_model_destroy(m);
}

/* ---- --init from what a PyTorch user has ---------------------------------------------------- */

/* The model's floats (parameters then buffers) against `want`'s "<prefix>.<name>" tensors, bit for bit. */
static void same_bits_as(const model_t *m, const safetensors_t *want, const char *prefix, const char *file)
{
    char key[96];
    float *part[2];
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &part[0]));
    CHECK_OK(fixture_part(m, MODEL_BUFFERS, &part[1]));
    for (int k = 0; k < model_param_tensors(m) + model_buffer_tensors(m); k++) {
        int param = k < model_param_tensors(m);
        const struct model_tensor *t = param ? model_param(m, k) : model_buffer(m, k - model_param_tensors(m));
        const float *values = part[!param] + t->offset;
        snprintf(key, sizeof key, "%s.%s", prefix, t->name);
        const struct safetensors_tensor *e = safetensors_find(want, key);
        CHECK_MSG(e && e->dtype == SAFETENSORS_F32 && e->numel == t->numel, "%s: no float32 %s of %zu elements",
                  safetensors_path(want), key, t->numel);
        for (size_t i = 0; i < t->numel; i++) {
            uint32_t w, got;
            memcpy(&w, (const unsigned char *)e->data + 4 * i, 4);
            memcpy(&got, &values[i], 4);
            CHECK_MSG(got == w, "%s: %s[%zu] is 0x%08x, torch's .to(torch.float32) gives 0x%08x", file, t->name, i,
                      got, w);
        }
    }
    free(part[0]);
    free(part[1]);
}

/* The files torch wrote (tests/crosscheck/init_torch.py): $DDP_INIT_DIR's when init_torch.sh has torch
 * write them anew, else the committed tests/crosscheck/init_*.safetensors. Each nn.Sequential state_dict,
 * in F16, BF16 (after a Flatten: numbered from 1) or F64, loads with the values torch's conversion gives,
 * every bit, and the note says what was read how. */
TEST(checkpoint_init_takes_torch_files)
{
    const char *dir = getenv("DDP_INIT_DIR");
    dir = dir ? dir : "tests/crosscheck";
    static const struct {
        const char *variant;
        int batchnorm;
        const char *note;
    } v[] = {
        {"f16", 0, "nn.Sequential names 0, 2, 4 read as fc1, fc2, fc3; F16 converted to float32"},
        {"bf16", 1, "nn.Sequential names 1, 2, 4, 5, 7 read as fc1, bn1, fc2, bn2, fc3; BF16 converted to float32"},
        {"f64", 1, "nn.Sequential names 0, 1, 3, 4, 6 read as fc1, bn1, fc2, bn2, fc3; F64 converted to float32, "
                   "rounding to nearest even"},
    };
    char path[1024], note[256];
    snprintf(path, sizeof path, "%s/init_expected.safetensors", dir);
    safetensors_t *want;
    CHECK_OK(safetensors_open(path, &want));
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        model_t *m = make_model(v[i].batchnorm, 9);
        snprintf(path, sizeof path, "%s/init_%s.safetensors", dir, v[i].variant);
        CHECK_OK(checkpoint_load_model(path, m, note, sizeof note));
        CHECK_STR(note, v[i].note);
        same_bits_as(m, want, v[i].variant, path);
        if (v[i].batchnorm)
            CHECK_EQ(model_batches_tracked(m), 7);
        fixture_model_destroy(m);
    }
    safetensors_close(want);
    /* our own names in float32: nothing to say */
    model_t *a = make_model(0, 9), *b = make_model(0, 9);
    CHECK_OK(checkpoint_save_model(check_tmp_path("ours.safetensors"), a, 0));
    CHECK_OK(checkpoint_load_model(check_tmp_path("ours.safetensors"), b, note, sizeof note));
    CHECK_STR(note, "");
    fixture_model_destroy(a);
    fixture_model_destroy(b);
}

/* m's state_dict under nn.Sequential's names (fc<k> is module first + 2(k - 1), first + 3(k - 1) with
 * BatchNorm1d; bn<k> the one after), float32, written to `path` without tensor `drop` and with a copy of
 * the first under the name `extra`. */
static void sequential_file(const char *path, const model_t *m, int first, const char *drop, const char *extra)
{
    struct safetensors_entry e[64];
    char names[64][64];
    static const int64_t tracked = 3;
    size_t n = 0;
    int stride = model_get_spec(m)->batchnorm ? 3 : 2;
    float *part[2]; /* the parameters and the buffers, on the host for the writer */
    CHECK_OK(fixture_part(m, MODEL_PARAMS, &part[0]));
    CHECK_OK(fixture_part(m, MODEL_BUFFERS, &part[1]));
    for (int k = 0; k < model_param_tensors(m) + model_buffer_tensors(m); k++) {
        int param = k < model_param_tensors(m);
        const struct model_tensor *t = param ? model_param(m, k) : model_buffer(m, k - model_param_tensors(m));
        const char *dot = strchr(t->name, '.');
        int module = first + stride * (atoi(t->name + 2) - 1) + (t->name[0] == 'b');
        snprintf(names[n], sizeof names[n], "%d%s", module, dot);
        e[n] = (struct safetensors_entry){.name = names[n], .dtype = SAFETENSORS_F32, .ndim = t->ndim,
                                          .data = part[!param] + t->offset};
        memcpy(e[n].shape, t->shape, sizeof t->shape);
        n += !drop || strcmp(names[n], drop) != 0;
        if (!param && strcmp(dot, ".running_mean") == 0) {
            snprintf(names[n], sizeof names[n], "%d.num_batches_tracked", module);
            e[n] = (struct safetensors_entry){.name = names[n], .dtype = SAFETENSORS_I64, .data = &tracked};
            n += !drop || strcmp(names[n], drop) != 0;
        }
    }
    if (extra) {
        e[n] = e[0];
        e[n++].name = extra;
    }
    CHECK_OK(safetensors_write(path, e, n, NULL, 0, 0));
    free(part[0]);
    free(part[1]);
}

/* Under nn.Sequential's names --init still refuses another shape, a missing tensor, one too many and a
 * name of neither kind, naming the tensor as the file names it, and leaves the model as it was. */
TEST(checkpoint_init_sequential_names_refusals)
{
    model_t *m = make_model(0, 9), *into = make_model(0, 9), *wide = make_model(0, 10), *bn = make_model(1, 9);
    const char *f = check_tmp_path("seq.safetensors");
    char note[256];
    sequential_file(f, m, 0, NULL, NULL);
    CHECK_OK(checkpoint_load_model(f, into, note, sizeof note));
    CHECK_EQ(fixture_same(m, into, MODEL_PARAMS), 1);
    CHECK_STR(note, "nn.Sequential names 0, 2, 4 read as fc1, fc2, fc3");
    sequential_file(f, bn, 0, NULL, NULL);
    CHECK_OK(checkpoint_load_model(f, bn, note, sizeof note));
    CHECK_EQ(model_batches_tracked(bn), 3);
    CHECK_STR(note, "nn.Sequential names 0, 1, 3, 4, 6 read as fc1, bn1, fc2, bn2, fc3");
    sequential_file(f, m, 0, NULL, NULL);
    float *keep = params_of(wide);
    CHECK_ERR(checkpoint_load_model(f, wide, NULL, 0), ERR_FORMAT,
              "seq.safetensors: 0.weight has shape [9, 20], expected [10, 20]");
    CHECK(params_still(wide, keep));
    CHECK_ERR(checkpoint_load_model(f, bn, NULL, 0), ERR_FORMAT,
              "unexpected tensor 2.weight: not a parameter or buffer of the 20-9-6-4 with BatchNorm1d MLP as "
              "nn.Sequential names 0, 1, 3, 4, 6 read as fc1, bn1, fc2, bn2, fc3");
    sequential_file(f, m, 0, "4.bias", NULL);
    CHECK_ERR(checkpoint_load_model(f, into, NULL, 0), ERR_FORMAT, "seq.safetensors: has no tensor 4.bias");
    sequential_file(f, m, 0, NULL, "6.weight");
    CHECK_ERR(checkpoint_load_model(f, into, NULL, 0), ERR_FORMAT,
              "unexpected tensor 6.weight: not a parameter or buffer of the 20-9-6-4 MLP as nn.Sequential names "
              "0, 2, 4 read as fc1, fc2, fc3");
    sequential_file(f, m, 0, NULL, "fc1.weight");
    CHECK_ERR(checkpoint_load_model(f, into, NULL, 0), ERR_FORMAT, "unexpected tensor fc1.weight");
    /* the first Linear is module 0, or 1 after a leading nn.Flatten(); a file numbered from 2 or past
     * holds another layer first, and is refused naming the tensor, also past any int (UBSan) */
    sequential_file(f, m, 1, NULL, NULL);
    CHECK_OK(checkpoint_load_model(f, into, note, sizeof note));
    CHECK_STR(note, "nn.Sequential names 1, 3, 5 read as fc1, fc2, fc3");
    sequential_file(f, bn, 1, NULL, NULL);
    CHECK_OK(checkpoint_load_model(f, bn, note, sizeof note));
    CHECK_STR(note, "nn.Sequential names 1, 2, 4, 5, 7 read as fc1, bn1, fc2, bn2, fc3");
    float *keep_into = params_of(into);
    sequential_file(f, m, 2, NULL, NULL);
    CHECK_ERR(checkpoint_load_model(f, into, NULL, 0), ERR_FORMAT,
              "seq.safetensors: tensor 2.weight: read as nn.Sequential's names, this model's first Linear is module 0 "
              "(or 1 after a leading nn.Flatten()), but the file's first module is 2");
    sequential_file(f, bn, 7, NULL, NULL);
    CHECK_ERR(checkpoint_load_model(f, bn, NULL, 0), ERR_FORMAT, "tensor 7.weight: read as nn.Sequential's names");
    float x = 1;
    struct safetensors_entry huge = {.name = "99999999999999999999.weight", .dtype = SAFETENSORS_F32, .data = &x};
    CHECK_OK(safetensors_write(f, &huge, 1, NULL, 0, 0));
    CHECK_ERR(checkpoint_load_model(f, into, NULL, 0), ERR_FORMAT,
              "tensor 99999999999999999999.weight: read as nn.Sequential's names, this model's first Linear is "
              "module 0 (or 1 after a leading nn.Flatten()), but the file's first module is 99999999999999999999");
    CHECK(params_still(into, keep_into));
    fixture_model_destroy(m);
    fixture_model_destroy(into);
    fixture_model_destroy(wide);
    fixture_model_destroy(bn);
}

/* ---- killed mid-save ------------------------------------------------------------------- */

/* Step k's state: every parameter k, every momentum element -k, the optimizer's count k. */
static void stamp(model_t *m, optim_t *o, struct checkpoint_state *s, uint64_t k)
{
    size_t n = model_param_floats(m);
    float *p = malloc(n * sizeof *p), *b = malloc(n * sizeof *b);
    CHECK(p && b);
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)k;
        b[i] = -(float)k;
    }
    CHECK_OK(model_write(m, MODEL_PARAMS, 0, n, p));
    CHECK_OK(optim_state_write(o, 0, b));
    free(p);
    free(b);
    optim_set_steps(o, k);
    s->step = k;
}

/* The writer's SIGXFSZ: a write of its save reached the file-size limit the
 * test set. It stops there, and the test kills it. */
static void stop_mid_write(int sig)
{
    (void)sig;
    raise(SIGSTOP);
}

/* A writer killed with SIGKILL in the middle of a save, at chosen bytes: the
 * 8-byte size, the header, the tensors, the last byte. No timing: the test
 * sets the writer's file-size limit (RLIMIT_FSIZE) to the byte where it must
 * stop, the kernel refuses the write that reaches it and raises SIGXFSZ,
 * whose handler stops the writer (SIGSTOP); the test sees it stopped, inside
 * checkpoint_save by construction, and kills it. The checkpoint must then be
 * the previous step's, whole and unmixed. (The moments after the last byte,
 * the fsync and the rename, need no test of ours: rename(2) is atomic.)
 * The writer saves a model of its own: a forked child has none of the
 * parent's threads, so the parent's simulated devices, whose copy engines
 * are threads, would never answer it. */
TEST(checkpoint_survives_sigkill_during_save)
{
#if defined(__SANITIZE_THREAD__)
    CHECK_SKIP("ThreadSanitizer cannot follow a fork of a threaded process that starts threads (the writer's model "
               "runs on a simulated device of its own); the plain and ASan suites run it");
#endif
    model_t *m = make_model(0, 48), *back = make_model(0, 48);
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    optim_t *o, *oback;
    CHECK_OK(optim_create(&c, m, &o));
    CHECK_OK(optim_create(&c, back, &oback));
    const char *dir = check_tmp_path("kill");
    struct checkpoint_state s = run_state(), got;
    stamp(m, o, &s, 0);
    CHECK_OK(checkpoint_save(dir, m, o, &s));
    char file[600];
    struct stat sb;
    CHECK(stat(checkpoint_path(dir, file, sizeof file), &sb) == 0);
    /* every byte of the first 32 (the size and the header's start), then 64 points up to the last byte
     * (later steps' headers only grow: their numbers have more digits) */
    const int first = 32, rounds = first + 64;
    for (int r = 0; r < rounds; r++) {
        long long cut = r < first ? r : first + (sb.st_size - 1 - first) * (r - first + 1) / (rounds - first);
        uint64_t k = (uint64_t)r + 1;
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) { /* the writer: step k's save, stopped at byte `cut` */
            model_t *w = make_model(0, 48);
            optim_t *ow;
            CHECK_OK(optim_create(&c, w, &ow));
            stamp(w, ow, &s, k);
            struct sigaction sa = {.sa_handler = stop_mid_write};
            struct rlimit lim;
            sigemptyset(&sa.sa_mask);
            if (sigaction(SIGXFSZ, &sa, NULL) != 0 || getrlimit(RLIMIT_FSIZE, &lim) != 0)
                _exit(4);
            lim.rlim_cur = (rlim_t)cut;
            if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
                _exit(4);
            _exit(checkpoint_save(dir, w, ow, &s) == 0 ? 0 : 3);
        }
        int status;
        CHECK(waitpid(pid, &status, WUNTRACED) == pid);
        CHECK_MSG(WIFSTOPPED(status), "round %d: the writer ended (status 0x%x) instead of stopping at byte %lld of "
                  "its save", r, status, cut);
        CHECK(kill(pid, SIGKILL) == 0);
        CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        int rc = checkpoint_load(dir, back, oback, &got);
        CHECK_MSG(rc == 0, "round %d: killed at byte %lld, the checkpoint does not load: %s", r, cut, err_msg());
        CHECK_MSG(got.step == k - 1, "round %d: killed at byte %lld of step %llu's save, the checkpoint is step %llu",
                  r, cut, (unsigned long long)k, (unsigned long long)got.step);
        float *p = params_of(back), *b = malloc(model_param_floats(back) * sizeof *b);
        CHECK(b);
        CHECK_OK(optim_state_read(oback, 0, b));
        for (size_t i = 0; i < model_param_floats(back); i++)
            CHECK_MSG(p[i] == (float)(k - 1) && b[i] == -(float)(k - 1),
                      "round %d: step %llu's checkpoint mixes steps (element %zu is %g, its momentum %g)", r,
                      (unsigned long long)(k - 1), i, p[i], b[i]);
        free(p);
        free(b);
        stamp(m, o, &s, k); /* step k saved whole: the next round's previous checkpoint */
        CHECK_OK(checkpoint_save(dir, m, o, &s));
    }
    optim_destroy(o);
    optim_destroy(oback);
    fixture_model_destroy(m);
    fixture_model_destroy(back);
}
