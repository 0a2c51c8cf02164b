/* optim: SGD and Adam with PyTorch's rules, and the schedules (see optim.h).
 * One kernel per parameter tensor (transfer/kernels.h: kernel_sgd,
 * kernel_adam), on the model's stream, since parameters and gradients may be
 * laid out differently (the reducer's bucket views); the state lives in
 * device memory beside the parameters. */
#include "ddp/optim.h"

#include "base/error.h"
#include "transfer/device_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct optim {
    struct optim_config c;
    size_t floats;
    device_t *dev;
    float *state[2]; /* device memory. SGD: momentum buffer; Adam: exp_avg, exp_avg_sq */
    int nstate;
    uint64_t steps;
};

void optim_config_default(struct optim_config *c, enum optim_kind kind)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->lr = kind == OPTIM_ADAM ? 1e-3 : 0.01;
    c->momentum = kind == OPTIM_ADAM ? 0 : 0.9;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->schedule = OPTIM_CONSTANT;
    c->gamma = 0.1;
}

static const char *const optim_kinds[] = {"sgd", "adam"};
static const char *const optim_schedules[] = {"constant", "cosine", "step"};

const char *optim_kind_name(enum optim_kind k) { return (unsigned)k < 2 ? optim_kinds[k] : "invalid"; }
const char *optim_schedule_name(enum optim_schedule s) { return (unsigned)s < 3 ? optim_schedules[s] : "invalid"; }

int optim_kind_parse(const char *flag, const char *text, enum optim_kind *out)
{
    for (int i = 0; i < 2; i++)
        if (strcmp(text, optim_kinds[i]) == 0) {
            *out = (enum optim_kind)i;
            return 0;
        }
    return err_set(ERR_ARG, "%s=%s: unknown optimizer (sgd, adam)", flag, text);
}

int optim_schedule_parse(const char *flag, const char *text, enum optim_schedule *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(text, optim_schedules[i]) == 0) {
            *out = (enum optim_schedule)i;
            return 0;
        }
    return err_set(ERR_ARG, "%s=%s: unknown schedule (constant, cosine, step)", flag, text);
}

int optim_config_check(const struct optim_config *c)
{
    if (c->kind != OPTIM_SGD && c->kind != OPTIM_ADAM)
        return err_set(ERR_ARG, "optimizer: unknown kind %d", (int)c->kind);
    if (!(c->lr > 0) || !isfinite(c->lr))
        return err_set(ERR_ARG, "optimizer: learning rate %g (must be positive)", c->lr);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return err_set(ERR_ARG, "optimizer: weight decay %g (must be 0 or more)", c->weight_decay);
    if (c->kind == OPTIM_SGD) {
        if (!(c->momentum >= 0 && c->momentum < 1))
            return err_set(ERR_ARG, "optimizer: momentum %g (0 <= momentum < 1)", c->momentum);
        if (!(c->dampening >= 0 && c->dampening < 1))
            return err_set(ERR_ARG, "optimizer: dampening %g (0 <= dampening < 1)", c->dampening);
        if (c->nesterov && (c->momentum == 0 || c->dampening != 0))
            return err_set(ERR_ARG, "optimizer: Nesterov momentum requires a momentum and zero dampening");
    } else {
        if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
            return err_set(ERR_ARG, "optimizer: Adam betas %g, %g (each in [0, 1))", c->beta1, c->beta2);
        if (!(c->eps > 0))
            return err_set(ERR_ARG, "optimizer: Adam eps %g (must be positive)", c->eps);
    }
    if (c->schedule == OPTIM_COSINE && c->total_steps == 0)
        return err_set(ERR_ARG, "optimizer: the cosine schedule needs the run's total number of steps");
    if (c->schedule == OPTIM_STEP && c->step_size == 0)
        return err_set(ERR_ARG, "optimizer: the step schedule needs a step size (steps between decays)");
    if (c->schedule == OPTIM_STEP && !(c->gamma > 0 && c->gamma <= 1))
        return err_set(ERR_ARG, "optimizer: step schedule factor %g (0 < gamma <= 1)", c->gamma);
    if ((unsigned)c->schedule > OPTIM_STEP)
        return err_set(ERR_ARG, "optimizer: unknown schedule %d", (int)c->schedule);
    return 0;
}

int optim_create(const struct optim_config *c, const model_t *m, optim_t **out)
{
    *out = NULL;
    int rc = optim_config_check(c);
    if (rc < 0)
        return rc;
    optim_t *o = calloc(1, sizeof *o);
    if (!o)
        return err_set(ERR_NOMEM, "optimizer: out of memory");
    rc = 0;
    o->c = *c;
    o->floats = model_param_floats(m);
    o->dev = device_stream_device(model_stream(m));
    o->nstate = c->kind == OPTIM_ADAM ? 2 : c->momentum != 0 ? 1 : 0;
    uint64_t bytes = (o->floats ? o->floats : 1) * sizeof(float);
    for (int k = 0; rc == 0 && k < o->nstate; k++)
        if ((rc = device_malloc(o->dev, bytes, optim_state_name(o, k), (void **)&o->state[k])) == 0)
            rc = device_memset_async(model_stream(m), o->state[k], 0, bytes);
    if (rc < 0) {
        optim_destroy(o);
        return err_wrap(rc, "optimizer: its state");
    }
    *out = o;
    return 0;
}

void optim_destroy(optim_t *o)
{
    if (!o)
        return;
    device_free(o->dev, o->state[0]);
    device_free(o->dev, o->state[1]);
    free(o);
}

const struct optim_config *optim_get_config(const optim_t *o) { return &o->c; }
uint64_t optim_steps(const optim_t *o) { return o->steps; }
void optim_set_steps(optim_t *o, uint64_t steps) { o->steps = steps; }
int optim_state_count(const optim_t *o) { return o->nstate; }
float *optim_state(optim_t *o, int k) { return o->state[k]; }

const char *optim_state_name(const optim_t *o, int k)
{
    if (o->c.kind == OPTIM_ADAM)
        return k == 0 ? "exp_avg" : "exp_avg_sq";
    return "momentum_buffer";
}

double optim_lr_at(const optim_t *o, uint64_t t)
{
    const struct optim_config *c = &o->c;
    switch (c->schedule) {
    case OPTIM_COSINE: /* CosineAnnealingLR._get_closed_form_lr with eta_min = 0 */
        return c->lr * (1 + cos(M_PI * (double)t / (double)c->total_steps)) / 2;
    case OPTIM_STEP: /* StepLR._get_closed_form_lr */
        return c->lr * pow(c->gamma, (double)(t / c->step_size));
    default: return c->lr;
    }
}

/* The kernel's arguments for tensor t at step `step` (0-based) and rate lr. */
static void optim_args(const optim_t *o, model_t *m, int t, double lr, uint64_t step, union kernel_args *a)
{
    const struct optim_config *c = &o->c;
    const struct model_tensor *pt = model_param(m, t);
    float *p = model_params(m) + pt->offset;
    const float *g = model_grad(m, t);
    if (c->kind == OPTIM_SGD) {
        a->sgd = (struct kernel_sgd){.p = p, .g = g, .buf = o->nstate ? o->state[0] + pt->offset : NULL,
                                     .lr = (float)lr, .momentum = (float)c->momentum,
                                     .weight_decay = (float)c->weight_decay,
                                     .one_minus_dampening = (float)(1 - c->dampening), .nesterov = c->nesterov,
                                     .first = step == 0};
        return;
    }
    double t1 = (double)(step + 1); /* Adam counts steps from 1 */
    double bc1 = 1 - pow(c->beta1, t1), bc2 = 1 - pow(c->beta2, t1);
    a->adam = (struct kernel_adam){.p = p, .g = g, .m1 = o->state[0] + pt->offset, .m2 = o->state[1] + pt->offset,
                                   .beta1 = (float)c->beta1, .beta2 = (float)c->beta2,
                                   .one_minus_beta1 = (float)(1 - c->beta1), .one_minus_beta2 = (float)(1 - c->beta2),
                                   .weight_decay = (float)c->weight_decay, .eps = (float)c->eps,
                                   .step_size = (float)(lr / bc1), .bc2_sqrt = (float)sqrt(bc2)};
}

int optim_step(optim_t *o, model_t *m)
{
    double lr = optim_lr_at(o, o->steps);
    int rc = 0;
    for (int t = 0; rc == 0 && t < model_param_tensors(m); t++) {
        union kernel_args a;
        optim_args(o, m, t, lr, o->steps, &a);
        uint64_t n = model_param(m, t)->numel;
        if (o->c.kind == OPTIM_SGD)
            rc = device_kernel(model_stream(m), KERNEL_sgd, n, &a, "SGD step", -1);
        else /* subnormal moments flushed on the CPU, where they cost microcode (sim/device_exec.c) */
            rc = device_kernel_flushing(model_stream(m), KERNEL_adam, n, &a, "Adam step", -1);
    }
    if (rc == 0)
        o->steps++;
    return rc;
}

int optim_state_read(const optim_t *o, int k, float *host)
{
    int rc = device_synchronize(o->dev);
    return rc ? rc : device_copy(o->dev, host, o->state[k], o->floats * sizeof(float), DEVICE_D2H);
}

int optim_state_write(optim_t *o, int k, const float *host)
{
    int rc = device_synchronize(o->dev);
    return rc ? rc : device_copy(o->dev, o->state[k], host, o->floats * sizeof(float), DEVICE_H2D);
}
