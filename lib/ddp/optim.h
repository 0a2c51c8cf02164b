/* optim: the optimizer step and the learning-rate schedule, with PyTorch's
 * update rules (torch/optim/sgd.py and adam.py, 1.13, the single-tensor
 * "for-loop" implementations the CPU uses).
 *
 * Where it sits: last in a training step, after the reducer has left the
 * averaged gradient on every rank (lib/ddp/reducer.h). Every rank applies the
 * same update to the same parameters with the same gradient, so the replicas
 * stay bit-identical without any communication here.
 *
 * SGD, per element, g the gradient, p the parameter, b the momentum buffer:
 *     g = g + weight_decay p                    (when weight_decay != 0)
 *     b = g                                     (first step: the buffer starts as the gradient)
 *     b = momentum b + (1 - dampening) g        (later steps)
 *     g = nesterov ? g + momentum b : b         (when momentum != 0)
 *     p = p - lr g
 * Adam, with step t counted from 1:
 *     g = g + weight_decay p
 *     m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
 *     p = p - lr / (1 - beta1^t) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * Scalars (lr, momentum, the bias corrections) are computed in double, as
 * Python computes them, then used in float32, as torch casts them. Each
 * operation rounds once, in the order written (transfer/kernels.h holds the
 * bodies the device runs): torch's AVX2 kernels fuse some
 * of these multiply-adds (add_ with alpha is one FMA), so results agree with
 * PyTorch to float32 tolerance rather than bit for bit.
 *
 * Schedules, lr at step t (t = steps already taken, 0 for the first), the
 * closed forms of PyTorch's schedulers:
 *     constant  lr                                                  (no scheduler)
 *     cosine    lr (1 + cos(pi t / total_steps)) / 2                (CosineAnnealingLR, eta_min 0)
 *     step      lr gamma^floor(t / step_size)                       (StepLR)
 * The default is constant: the rate is exactly --lr, as a PyTorch optimizer
 * without a scheduler, which is what the equivalence tests compare against.
 *
 * Read optim_config_default(), then optim_step().
 */
#ifndef DDP_OPTIM_H
#define DDP_OPTIM_H

#include "ddp/model.h"

#include <stddef.h>
#include <stdint.h>

enum optim_kind { OPTIM_SGD, OPTIM_ADAM };
enum optim_schedule { OPTIM_CONSTANT, OPTIM_COSINE, OPTIM_STEP };

struct optim_config {
    enum optim_kind kind;
    double lr;            /* SGD 0.01 (torch has no default), Adam 0.001 (torch's) */
    double weight_decay;  /* 0 */
    double momentum;      /* SGD: 0.9 (torch's is 0: this project's training default) */
    double dampening;     /* SGD: 0 */
    int nesterov;         /* SGD: 0 */
    double beta1, beta2;  /* Adam: 0.9, 0.999 */
    double eps;           /* Adam: 1e-8 */
    enum optim_schedule schedule;
    uint64_t total_steps; /* cosine: the steps of the whole run (T_max) */
    uint64_t step_size;   /* step: decay every step_size steps ... */
    double gamma;         /* ... by this factor (0.1, StepLR's default) */
};

/* The defaults above for `kind`. */
void optim_config_default(struct optim_config *c, enum optim_kind kind);

/* Names: "sgd", "adam"; "constant", "cosine", "step". 0 or ERR_ARG naming
 * `flag` and the valid values. */
int optim_kind_parse(const char *flag, const char *text, enum optim_kind *out);
int optim_schedule_parse(const char *flag, const char *text, enum optim_schedule *out);
const char *optim_kind_name(enum optim_kind k);
const char *optim_schedule_name(enum optim_schedule s);

/* Checks a configuration: lr > 0 and finite, momentum and dampening in
 * [0, 1), betas in [0, 1), eps > 0, weight decay >= 0, nesterov only with
 * momentum and no dampening (torch's rule), total_steps > 0 for cosine,
 * step_size > 0 for step. 0 or ERR_ARG naming the field. */
int optim_config_check(const struct optim_config *c);

typedef struct optim optim_t;

/* An optimizer for model m's parameters, state zero, no step taken. 0,
 * ERR_ARG (bad configuration) or ERR_NOMEM. */
int optim_create(const struct optim_config *c, const model_t *m, optim_t **out);
void optim_destroy(optim_t *o);
const struct optim_config *optim_get_config(const optim_t *o);

/* The learning rate of step t (0-based) under the schedule. */
double optim_lr_at(const optim_t *o, uint64_t t);

/* One step: every parameter of m moves by the rule above, reading its
 * gradient through model_grad() (whatever the gradient layout), at the
 * learning rate of the current step, one kernel per tensor on the model's
 * stream; then the step count advances. 0, or the device's error. */
int optim_step(optim_t *o, model_t *m);

/* Steps taken so far. */
uint64_t optim_steps(const optim_t *o);

/* ---- state, for checkpoints ----------------------------------------------------
 * Per-element state in the parameter layout (model_param(m, t)->offset),
 * named as PyTorch's optimizer state_dict names it: SGD with momentum has
 * "momentum_buffer", Adam "exp_avg" and "exp_avg_sq", SGD without momentum
 * none. It is device memory (optim_state), which the host reads and writes
 * whole through copies, after everything the device was given: restoring =
 * optim_state_write of each array and optim_set_steps(). */
int optim_state_count(const optim_t *o);
const char *optim_state_name(const optim_t *o, int k);
float *optim_state(optim_t *o, int k);
int optim_state_read(const optim_t *o, int k, float *host);
int optim_state_write(optim_t *o, int k, const float *host);
void optim_set_steps(optim_t *o, uint64_t steps);

#endif
