/* test_checkpoint: lib/ddp/checkpoint. A checkpoint restores the model, its
 * buffers and the optimizer bit for bit with the run's state; model files
 * round-trip; foreign, damaged and mismatched files are refused naming the
 * file, and leave the model as it was; a resume with another world, batch,
 * seed, training set size, shuffle, drop_last or bucket setup is refused with
 * the reason, and a checkpoint without the last three is refused naming the
 * key; and a writer killed with SIGKILL at random moments, hundreds of times,
 * always leaves a complete checkpoint that loads. */
#include "check.h"
#include "base/error.h"
#include "base/hash.h"
#include "ddp/checkpoint.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static model_t *make_model(int bn, int hidden)
{
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {hidden, 6}, .nhidden = 2, .batchnorm = bn};
    model_t *m;
    CHECK_OK(model_create(&s, 8, &m));
    model_init(m, 1);
    return m;
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
        CHECK_OK(model_input_from_bytes(m, x, 8));
        CHECK_OK(model_forward(m, 8, MODEL_TRAIN));
        CHECK_OK(model_loss(m, y, 8, 1.0f, &loss));
        CHECK_OK(model_backward(m, 8, 0, NULL, NULL));
        optim_step(o, m);
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
        CHECK(memcmp(model_params(a), model_params(b), model_param_floats(a) * 4) == 0);
        CHECK(memcmp(model_buffers(a), model_buffers(b), model_buffer_floats(a) * 4) == 0);
        CHECK_EQ(model_batches_tracked(b), 3);
        CHECK_EQ_U64(optim_steps(ob), 3);
        for (int q = 0; q < optim_state_count(oa); q++)
            CHECK(memcmp(optim_state(oa, q), optim_state(ob, q), model_param_floats(a) * 4) == 0);
        CHECK(got.step == 3 && got.epoch == 1 && got.batch == 7 && got.seed == 42 && got.world == 4);
        CHECK(got.batch_size == 8 && got.accumulate == 1 && got.bucket_cap_bytes == 25u << 20);
        CHECK(got.records == 2048 && got.shuffle == 1 && got.drop_last == 0);
        CHECK_STR(got.buckets, s.buckets);
        CHECK_STR(got.compress, "none");
        /* the two continue identically */
        train(a, oa, 2);
        train(b, ob, 2);
        CHECK(memcmp(model_params(a), model_params(b), model_param_floats(a) * 4) == 0);
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
        model_destroy(a);
        model_destroy(b);
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
    CHECK_OK(checkpoint_load_model(path, b));
    CHECK(memcmp(model_params(a), model_params(b), model_param_floats(a) * 4) == 0);
    CHECK(memcmp(model_buffers(a), model_buffers(b), model_buffer_floats(a) * 4) == 0);
    CHECK_EQ(model_batches_tracked(b), 2);
    /* wrong shapes name the parameter; the model is untouched */
    float keep = model_params(other)[0];
    CHECK_ERR(checkpoint_load_model(path, other), ERR_FORMAT, "fc1.weight has shape [9, 20], expected [10, 20]");
    CHECK(model_params(other)[0] == keep);
    /* a model without BatchNorm finds tensors it does not have */
    CHECK_ERR(checkpoint_load_model(path, plain), ERR_FORMAT, "unexpected tensor bn1.");
    /* a checkpoint's parameters load as a model file (--init from where a run stood), its optimizer
     * states passed over; the same tensors in a file that is not a checkpoint are foreign */
    struct checkpoint_state s = run_state();
    CHECK_OK(checkpoint_save(check_tmp_path("ckm"), a, o, &s));
    char file[600];
    memset(model_params(b), 0, model_param_floats(b) * 4);
    CHECK_OK(checkpoint_load_model(checkpoint_path(check_tmp_path("ckm"), file, sizeof file), b));
    CHECK(memcmp(model_params(a), model_params(b), model_param_floats(a) * 4) == 0);
    float zero = 0;
    struct safetensors_entry odd[] = {
        {.name = "optimizer.fc1.weight.momentum_buffer", .dtype = SAFETENSORS_F32, .ndim = 0, .data = &zero}};
    CHECK_OK(safetensors_write(check_tmp_path("odd.safetensors"), odd, 1, NULL, 0, 0));
    CHECK_ERR(checkpoint_load_model(check_tmp_path("odd.safetensors"), b), ERR_FORMAT, "unexpected tensor optimizer.");
    optim_destroy(o);
    model_destroy(a);
    model_destroy(b);
    model_destroy(other);
    model_destroy(plain);
}

TEST(checkpoint_refuses_foreign_damaged_and_mismatched_files)
{
    model_t *a = make_model(0, 9), *b = make_model(0, 9);
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    optim_t *oa, *ob;
    CHECK_OK(optim_create(&c, a, &oa));
    CHECK_OK(optim_create(&c, b, &ob));
    train(a, oa, 2);
    struct checkpoint_state s = run_state(), got;
    float keep = model_params(b)[3];
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
    CHECK_ERR(checkpoint_load(dir, b, ob, &got), ERR_FORMAT, "damaged: its tensors' checksum");
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
    CHECK(model_params(b)[3] == keep);
    CHECK_EQ_U64(optim_steps(ob), 0);
    /* an unwritable directory is named */
    CHECK_ERR(checkpoint_save("/proc/ddp-no-such-dir", a, oa, &s), ERR_IO, "/proc/ddp-no-such-dir");
    optim_destroy(oa);
    optim_destroy(ob);
    optim_destroy(ow);
    optim_destroy(oadam);
    optim_destroy(ofast);
    model_destroy(a);
    model_destroy(b);
    model_destroy(wide);
}

TEST(checkpoint_resume_checks_the_run)
{
    struct checkpoint_state saved = run_state(), now = run_state();
    CHECK_OK(checkpoint_check_resume("ck", &saved, &now));
    now.world = 2;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now), ERR_STATE, "ck: written by a world of 4 ranks; this run has 2");
    now = run_state();
    now.batch_size = 16;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now), ERR_STATE, "the position in the epoch (batch 7)");
    now = run_state();
    now.seed = 1;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now), ERR_STATE, "seed 42; this run has 1");
    now = run_state();
    now.records = 3000;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now), ERR_STATE,
              "ck: written with 2048 training records; this run has 3000");
    CHECK_CONTAINS(err_msg(), "resume with --train-size=2048");
    now = run_state();
    now.shuffle = 0;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now), ERR_STATE,
              "ck: written with the sampler shuffling; this run has --no-shuffle");
    CHECK_CONTAINS(err_msg(), "resume without --no-shuffle");
    now = run_state();
    now.drop_last = 1;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now), ERR_STATE,
              "ck: written without --drop-last; this run has --drop-last");
    CHECK_CONTAINS(err_msg(), "the position in the epoch (batch 7)");
    now = run_state();
    now.bucket_cap_bytes = 1 << 20;
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now), ERR_STATE, "resume with the same bucket sizes");
    now = run_state();
    snprintf(now.compress, sizeof now.compress, "fp16");
    CHECK_ERR(checkpoint_check_resume("ck", &saved, &now), ERR_STATE, "compression none");
}

/* A checkpoint written before the training records, shuffle and drop_last were
 * recorded: its metadata has every other key. */
TEST(checkpoint_without_the_sampler_keys_is_refused)
{
    struct safetensors_meta meta[] = {
        {"format", CHECKPOINT_FORMAT},
        {"step", "3"}, {"epoch", "1"}, {"batch", "7"}, {"seed", "42"},
        {"world", "4"}, {"batch_size", "8"}, {"accumulate", "1"},
        {"first_bucket_bytes", "1048576"}, {"bucket_cap_bytes", "26214400"},
        {"compress", "none"}, {"buckets", "rebuilt: fc3.bias fc3.weight | fc2.bias"},
    };
    const char *file = check_tmp_path("old.safetensors");
    CHECK_OK(safetensors_write(file, NULL, 0, meta, sizeof meta / sizeof meta[0], 0));
    struct checkpoint_state got;
    CHECK_ERR(checkpoint_read_state(file, &got), ERR_FORMAT, "a checkpoint without \"records\" in its metadata");
    CHECK_CONTAINS(err_msg(), file);
}

/* ---- killed mid-save ------------------------------------------------------------------- */

/* Step k's state: every parameter k, every momentum element -k. */
static void stamp(model_t *m, optim_t *o, uint64_t k)
{
    for (size_t i = 0; i < model_param_floats(m); i++) {
        model_params(m)[i] = (float)k;
        optim_state(o, 0)[i] = -(float)k;
    }
}

static int count_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    char path[1024];
    while (d && (e = readdir(d))) {
        if (strstr(e->d_name, ".tmp-")) {
            n++;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
    return n;
}

TEST(checkpoint_survives_sigkill_during_save)
{
    model_t *m = make_model(0, 48); /* a few kB: many saves per second */
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    const char *dir = check_tmp_path("kill");
    struct checkpoint_state s = run_state(), got;
    s.step = 0;
    stamp(m, o, 0);
    CHECK_OK(checkpoint_save(dir, m, o, &s));
    /* how long one durable save takes here, to spread the kills over it */
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 5; i++)
        CHECK_OK(checkpoint_save(dir, m, o, &s));
    clock_gettime(CLOCK_MONOTONIC, &b);
    long save_us = ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000) / 5 + 1;
    uint64_t rng = 2024, last = 0, next = 1;
    int mid_save = 0, rounds = 200;
    for (int r = 0; r < rounds; r++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) { /* the writer: saves step after step until killed */
            for (uint64_t k = next;; k++) {
                stamp(m, o, k);
                s.step = k;
                if (checkpoint_save(dir, m, o, &s) != 0)
                    _exit(3);
            }
        }
        long wait_us = (long)(hash_splitmix64_next(&rng) % (uint64_t)(3 * save_us));
        struct timespec nap = {wait_us / 1000000, (wait_us % 1000000) * 1000};
        nanosleep(&nap, NULL);
        kill(pid, SIGKILL);
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFSIGNALED(status), "round %d: the writer exited by itself (status %d): a save failed", r,
                  WEXITSTATUS(status));
        mid_save += count_temporaries(dir) > 0;
        int rc = checkpoint_load(dir, m, o, &got);
        CHECK_MSG(rc == 0, "round %d: after SIGKILL the checkpoint does not load: %s", r, err_msg());
        CHECK_MSG(got.step >= last, "round %d: the checkpoint went back from step %llu to %llu", r,
                  (unsigned long long)last, (unsigned long long)got.step);
        for (size_t i = 0; i < model_param_floats(m); i++)
            CHECK_MSG(model_params(m)[i] == (float)got.step && optim_state(o, 0)[i] == -(float)got.step,
                      "round %d: step %llu's checkpoint mixes steps (element %zu is %g)", r,
                      (unsigned long long)got.step, i, model_params(m)[i]);
        last = got.step;
        next = got.step + 1000; /* the next writer's steps are new */
    }
    /* the test means something only if kills landed inside saves */
    CHECK_MSG(mid_save > 0, "none of %d kills landed during a save (a save takes about %ld us)", rounds, save_us);
    optim_destroy(o);
    model_destroy(m);
}
