/* optim: SGD and Adam with PyTorch's rules, and the schedules (see optim.h).
 * One loop per parameter tensor, since parameters and gradients may be laid
 * out differently (the reducer's bucket views); the common SGD case (momentum,
 * no weight decay, no dampening, no Nesterov) has its own branch-free loop,
 * which the compiler vectorizes. */
#include "ddp/optim.h"

#include "base/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

struct optim {
    struct optim_config c;
    size_t floats;
    float *state[2]; /* SGD: momentum buffer; Adam: exp_avg, exp_avg_sq */
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
    o->c = *c;
    o->floats = model_param_floats(m);
    o->nstate = c->kind == OPTIM_ADAM ? 2 : c->momentum != 0 ? 1 : 0;
    for (int k = 0; k < o->nstate; k++)
        if (!(o->state[k] = calloc(o->floats ? o->floats : 1, sizeof(float)))) {
            optim_destroy(o);
            return err_set(ERR_NOMEM, "optimizer: out of memory for its state");
        }
    *out = o;
    return 0;
}

void optim_destroy(optim_t *o)
{
    if (!o)
        return;
    free(o->state[0]);
    free(o->state[1]);
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

/* SGD on one tensor of n elements. */
static void optim_sgd(const struct optim_config *c, float *restrict p, const float *restrict g, float *restrict buf,
                      size_t n, float lr, int first)
{
    float mu = (float)c->momentum, wd = (float)c->weight_decay, damp = (float)(1 - c->dampening);
    if (buf && !first && wd == 0 && c->dampening == 0 && !c->nesterov) {
        for (size_t i = 0; i < n; i++) { /* the common case, branch-free */
            float b = mu * buf[i] + g[i];
            buf[i] = b;
            p[i] = p[i] - lr * b;
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0)
            d = d + wd * p[i];
        if (buf) {
            float b = first ? d : mu * buf[i] + damp * d;
            buf[i] = b;
            d = c->nesterov ? d + mu * b : b;
        }
        p[i] = p[i] - lr * d;
    }
}

/* Adam's moments of a gradient that stays 0 (a pixel that is black in every
 * image) decay by beta1 and beta2 each step: after about 800 steps m is
 * subnormal, and it never reaches 0 (0.9 times the smallest subnormal rounds
 * back to it). x86 computes on subnormals in microcode: measured here, the
 * step of the 784-256-128-10 MLP went from 0.8 ms to 3 ms within three
 * epochs. So Adam's step runs with flush-to-zero and denormals-are-zero
 * (MXCSR), as PyTorch's torch.set_flush_denormal(True) does for a whole
 * program; the rest of the program keeps IEEE subnormals. What it changes:
 * moments below 1.2e-38 become 0, and the updates they would have made are
 * below 1e-29 of lr; every rank flushes alike, so the replicas stay equal. */
#if defined(__SSE__)
static unsigned optim_flush_subnormals(void)
{
    unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u); /* FTZ (bit 15) and DAZ (bit 6) */
    return saved;
}
static void optim_restore_subnormals(unsigned saved) { _mm_setcsr(saved); }
#else
static unsigned optim_flush_subnormals(void) { return 0; }
static void optim_restore_subnormals(unsigned saved) { (void)saved; }
#endif

/* Adam on one tensor of n elements, step t (1-based). */
static void optim_adam(const struct optim_config *c, float *restrict p, const float *restrict g, float *restrict m1,
                       float *restrict m2, size_t n, double lr, uint64_t t)
{
    float b1 = (float)c->beta1, b2 = (float)c->beta2, wd = (float)c->weight_decay;
    float one_b1 = (float)(1 - c->beta1), one_b2 = (float)(1 - c->beta2), eps = (float)c->eps;
    double bc1 = 1 - pow(c->beta1, (double)t), bc2 = 1 - pow(c->beta2, (double)t);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    for (size_t i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0)
            d = d + wd * p[i];
        float a = b1 * m1[i] + one_b1 * d;
        float v = b2 * m2[i] + one_b2 * d * d;
        m1[i] = a;
        m2[i] = v;
        float denom = sqrtf(v) / bc2_sqrt + eps;
        p[i] = p[i] + (-step_size * a) / denom; /* torch's addcdiv_: p + value * m / denom */
    }
}

void optim_step(optim_t *o, model_t *m)
{
    double lr = optim_lr_at(o, o->steps);
    float *param = model_params(m);
    unsigned fp = o->c.kind == OPTIM_ADAM ? optim_flush_subnormals() : 0;
    for (int t = 0; t < model_param_tensors(m); t++) {
        const struct model_tensor *pt = model_param(m, t);
        float *p = param + pt->offset;
        const float *g = model_grad(m, t);
        if (o->c.kind == OPTIM_SGD)
            optim_sgd(&o->c, p, g, o->nstate ? o->state[0] + pt->offset : NULL, pt->numel, (float)lr, o->steps == 0);
        else
            optim_adam(&o->c, p, g, o->state[0] + pt->offset, o->state[1] + pt->offset, pt->numel, lr, o->steps + 1);
    }
    if (o->c.kind == OPTIM_ADAM)
        optim_restore_subnormals(fp);
    o->steps++;
}
