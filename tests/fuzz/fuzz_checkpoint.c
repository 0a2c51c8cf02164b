/* fuzz_checkpoint: libFuzzer target for what the checkpoint reader
 * (lib/ddp/checkpoint.c) makes of a file beyond the safetensors format: the
 * checksum text and every field it covers, the strict numbers of the
 * metadata, nn.Sequential's names and the float conversions of --init. The
 * input becomes a file; checkpoint_read_state, checkpoint_load (into a
 * 20-9-6-4 model with BatchNorm1d and its SGD) and checkpoint_load_model take
 * it or refuse it, and must never crash, hang or read out of bounds; a refused
 * load leaves the model as it was (its parameters, read through a copy: the
 * model lives on a simulated device, tests/harness/model_fixture.h). Its
 * seed inputs (tests/fuzz/seeds/) are a checkpoint of that model and torch's
 * float16 and bfloat16 nn.Sequential files (tests/crosscheck/
 * init_*.safetensors). `make fuzz`.
 */
#include "ddp/checkpoint.h"
#include "tests/harness/model_fixture.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_path[256];
static model_t *fuzz_model;
static optim_t *fuzz_optim;
static float *fuzz_before, *fuzz_after;

static void fuzz_remove(void) { unlink(fuzz_path); }

static void fuzz_setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_path, sizeof fuzz_path, "%s/fuzz-checkpoint-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    atexit(fuzz_remove);
    struct model_spec s = {.inputs = 20, .classes = 4, .hidden = {9, 6}, .nhidden = 2, .batchnorm = 1};
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    if (fixture_model_create(&s, 2, &fuzz_model) != 0 || optim_create(&c, fuzz_model, &fuzz_optim) != 0 ||
        !(fuzz_before = malloc(model_param_floats(fuzz_model) * sizeof(float))) ||
        !(fuzz_after = malloc(model_param_floats(fuzz_model) * sizeof(float))) || model_init(fuzz_model, 1) != 0)
        abort();
}

/* The model's parameters into `host`, through a copy. */
static void fuzz_read_params(float *host)
{
    if (model_read(fuzz_model, MODEL_PARAMS, 0, model_param_floats(fuzz_model), host) != 0)
        abort();
}

/* A refused load must leave the parameters as they were. */
static void fuzz_refused_untouched(int rc)
{
    if (rc == 0)
        return;
    fuzz_read_params(fuzz_after);
    if (memcmp(fuzz_before, fuzz_after, model_param_floats(fuzz_model) * sizeof(float)) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_model)
        fuzz_setup();
    FILE *f = fopen(fuzz_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    struct checkpoint_state s;
    char note[512];
    checkpoint_read_state(fuzz_path, &s);
    fuzz_read_params(fuzz_before);
    fuzz_refused_untouched(checkpoint_load(fuzz_path, fuzz_model, fuzz_optim, &s));
    fuzz_read_params(fuzz_before);
    fuzz_refused_untouched(checkpoint_load_model(fuzz_path, fuzz_model, note, sizeof note));
    return 0;
}
