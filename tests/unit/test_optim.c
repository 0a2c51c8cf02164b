/* test_optim: lib/ddp/optim applies PyTorch's SGD and Adam rules exactly as
 * optim.h writes them (each operation rounded once, in that order, so the
 * expected values here are computed the same way and compared bit for bit),
 * whatever the gradient layout; the schedules' closed forms; configuration
 * checks. Agreement with torch itself is tests/crosscheck/ddp_torch.sh's.
 * The model and the optimizer's state live on a simulated device
 * (model_fixture.h): the test writes gradients and reads parameters and
 * state through copies. */
#include "check.h"
#include "model_fixture.h"
#include "base/error.h"
#include "ddp/optim.h"

#include <math.h>

/* fc1.weight [2, 3], fc1.bias [2]: 8 parameters */
static model_t *tiny(void)
{
    struct model_spec s = {.inputs = 3, .classes = 2, .nhidden = 0};
    model_t *m;
    CHECK_OK(fixture_model_create(&s, 1, &m));
    float p[8];
    for (int i = 0; i < 8; i++)
        p[i] = 0.25f * (float)i - 0.6f;
    CHECK_OK(model_write(m, MODEL_PARAMS, 0, 8, p));
    return m;
}

static void set_grads(model_t *m, float scale)
{
    for (int t = 0; t < 2; t++) {
        float g[6];
        for (size_t i = 0; i < model_param(m, t)->numel; i++)
            g[i] = scale * (0.1f + 0.3f * (float)(model_param(m, t)->offset + i)) * (i % 2 ? -1 : 1);
        CHECK_OK(fixture_write_grad(m, t, g));
    }
}

/* The 8 parameters, or optimizer state k, copied to the host. */
static void get_params(const model_t *m, float *p) { CHECK_OK(model_read(m, MODEL_PARAMS, 0, 8, p)); }
static void get_state(const optim_t *o, int k, float *s) { CHECK_OK(optim_state_read(o, k, s)); }

/* what set_grads put at parameter element k (weight 0..5, bias 6..7) */
static float grad_of(const model_t *m, int k, float scale)
{
    (void)m;
    return scale * (0.1f + 0.3f * (float)k) * ((k < 6 ? k : k - 6) % 2 ? -1 : 1);
}

TEST(optim_sgd_momentum_buffer_starts_as_the_gradient)
{
    model_t *m = tiny();
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    c.lr = 0.1;
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    CHECK_EQ(optim_state_count(o), 1);
    CHECK_STR(optim_state_name(o, 0), "momentum_buffer");
    float p[8], b[8], got[8], state[8], lr = 0.1f, mu = 0.9f;
    get_params(m, p);
    for (int step = 0; step < 3; step++) {
        float scale = 1.0f + (float)step;
        set_grads(m, scale);
        CHECK_OK(optim_step(o, m));
        get_params(m, got);
        get_state(o, 0, state);
        for (int k = 0; k < 8; k++) {
            float g = grad_of(m, k, scale);
            b[k] = step == 0 ? g : mu * b[k] + g;
            p[k] = p[k] - lr * b[k];
            CHECK_MSG(got[k] == p[k], "step %d element %d: %.9g, expected %.9g", step, k, got[k], p[k]);
            CHECK(state[k] == b[k]);
        }
    }
    CHECK_EQ_U64(optim_steps(o), 3);
    optim_destroy(o);
    fixture_model_destroy(m);
}

TEST(optim_sgd_weight_decay_dampening_nesterov)
{
    const int nesterov[] = {0, 1, 0};
    const double damp[] = {0.0, 0.0, 0.25};
    for (int v = 0; v < 3; v++) {
        model_t *m = tiny();
        struct optim_config c;
        optim_config_default(&c, OPTIM_SGD);
        c.lr = 0.05;
        c.weight_decay = 0.01;
        c.nesterov = nesterov[v];
        c.dampening = damp[v];
        optim_t *o;
        CHECK_OK(optim_create(&c, m, &o));
        float p[8], b[8], got[8], lr = 0.05f, mu = 0.9f, wd = 0.01f, d1 = (float)(1 - damp[v]);
        get_params(m, p);
        for (int step = 0; step < 3; step++) {
            set_grads(m, 1.0f);
            CHECK_OK(optim_step(o, m));
            get_params(m, got);
            for (int k = 0; k < 8; k++) {
                float g = grad_of(m, k, 1.0f) + wd * p[k];
                b[k] = step == 0 ? g : mu * b[k] + d1 * g;
                float d = nesterov[v] ? g + mu * b[k] : b[k];
                p[k] = p[k] - lr * d;
                CHECK_MSG(got[k] == p[k], "variant %d step %d element %d: %.9g, expected %.9g", v, step, k, got[k],
                          p[k]);
            }
        }
        optim_destroy(o);
        fixture_model_destroy(m);
    }
}

TEST(optim_sgd_without_momentum_has_no_state)
{
    model_t *m = tiny();
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    c.momentum = 0;
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    CHECK_EQ(optim_state_count(o), 0);
    float p0 = fixture_get(m, MODEL_PARAMS, 5);
    set_grads(m, 1.0f);
    CHECK_OK(optim_step(o, m));
    CHECK(fixture_get(m, MODEL_PARAMS, 5) == p0 - 0.01f * grad_of(m, 5, 1.0f));
    optim_destroy(o);
    fixture_model_destroy(m);
}

TEST(optim_adam_matches_its_rule)
{
    model_t *m = tiny();
    struct optim_config c;
    optim_config_default(&c, OPTIM_ADAM);
    c.weight_decay = 0.1;
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    CHECK_EQ(optim_state_count(o), 2);
    CHECK_STR(optim_state_name(o, 0), "exp_avg");
    CHECK_STR(optim_state_name(o, 1), "exp_avg_sq");
    float p[8], got[8], m1[8] = {0}, m2[8] = {0};
    get_params(m, p);
    for (int step = 1; step <= 4; step++) {
        set_grads(m, (float)step);
        CHECK_OK(optim_step(o, m));
        get_params(m, got);
        double bc1 = 1 - pow(0.9, step), bc2 = 1 - pow(0.999, step);
        float step_size = (float)(1e-3 / bc1), bc2s = (float)sqrt(bc2);
        for (int k = 0; k < 8; k++) {
            float g = grad_of(m, k, (float)step) + 0.1f * p[k];
            m1[k] = 0.9f * m1[k] + (float)(1 - 0.9) * g;
            m2[k] = 0.999f * m2[k] + (float)(1 - 0.999) * g * g;
            float denom = sqrtf(m2[k]) / bc2s + 1e-8f;
            p[k] = p[k] + (-step_size * m1[k]) / denom;
            CHECK_MSG(got[k] == p[k], "Adam step %d element %d: %.9g, expected %.9g", step, k, got[k], p[k]);
        }
    }
    optim_destroy(o);
    fixture_model_destroy(m);
}

/* A gradient that stops (a pixel black in every later image): Adam's first
 * moment decays by 0.9 a step and, computed with IEEE subnormals, would stop
 * at the smallest one forever, every later step paying for subnormal
 * arithmetic. The step flushes it to exactly 0, and leaves the caller's
 * floating-point mode as it was. */
TEST(optim_adam_moments_of_a_stopped_gradient_reach_zero)
{
    model_t *m = tiny();
    struct optim_config c;
    optim_config_default(&c, OPTIM_ADAM);
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    set_grads(m, 1.0f);
    CHECK_OK(optim_step(o, m));
    set_grads(m, 0.0f);
    for (int step = 0; step < 1000; step++) /* 0.9^1000 of 0.01 is far below the smallest float */
        CHECK_OK(optim_step(o, m));
    float m1[8];
    get_state(o, 0, m1);
    for (int k = 0; k < 8; k++)
        CHECK_MSG(m1[k] == 0.0f, "exp_avg element %d is %g, not 0", k, m1[k]);
    volatile float tiny_normal = 1e-37f;
    CHECK(tiny_normal / 1024 > 0); /* the caller's subnormals survive the step (the simulated device may run it
                                    * on the caller's thread) */
    optim_destroy(o);
    fixture_model_destroy(m);
}

TEST(optim_reads_gradients_through_their_layout)
{
    model_t *a = tiny(), *b = tiny();
    size_t offs[2] = {2, 0}; /* bias first */
    CHECK_OK(model_set_grad_layout(b, offs));
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    optim_t *oa, *ob;
    CHECK_OK(optim_create(&c, a, &oa));
    CHECK_OK(optim_create(&c, b, &ob));
    for (int s = 0; s < 2; s++) {
        set_grads(a, 1.0f);
        set_grads(b, 1.0f);
        CHECK_OK(optim_step(oa, a));
        CHECK_OK(optim_step(ob, b));
    }
    CHECK_EQ(fixture_same(a, b, MODEL_PARAMS), 1);
    optim_destroy(oa);
    optim_destroy(ob);
    fixture_model_destroy(a);
    fixture_model_destroy(b);
}

TEST(optim_schedules_are_the_closed_forms)
{
    model_t *m = tiny();
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    c.lr = 0.2;
    optim_t *o;
    CHECK_OK(optim_create(&c, m, &o));
    CHECK(optim_lr_at(o, 0) == 0.2 && optim_lr_at(o, 12345) == 0.2);
    optim_destroy(o);
    c.schedule = OPTIM_COSINE;
    c.total_steps = 100;
    CHECK_OK(optim_create(&c, m, &o));
    CHECK(optim_lr_at(o, 0) == 0.2);
    CHECK(fabs(optim_lr_at(o, 50) - 0.1) < 1e-15);
    CHECK(fabs(optim_lr_at(o, 100)) < 1e-15);
    CHECK(fabs(optim_lr_at(o, 25) - 0.2 * (1 + cos(M_PI / 4)) / 2) < 1e-15);
    optim_destroy(o);
    c.schedule = OPTIM_STEP;
    c.step_size = 30;
    CHECK_OK(optim_create(&c, m, &o));
    CHECK(optim_lr_at(o, 29) == 0.2);
    CHECK(fabs(optim_lr_at(o, 30) - 0.02) < 1e-15);
    CHECK(fabs(optim_lr_at(o, 65) - 0.002) < 1e-15);
    /* a step uses its own rate: step 29 the undecayed one */
    optim_set_steps(o, 29);
    float p0 = fixture_get(m, MODEL_PARAMS, 0);
    set_grads(m, 1.0f);
    CHECK_OK(optim_step(o, m));
    CHECK(fixture_get(m, MODEL_PARAMS, 0) == p0 - 0.2f * grad_of(m, 0, 1.0f));
    optim_destroy(o);
    fixture_model_destroy(m);
}

TEST(optim_configs_are_checked)
{
    model_t *m = tiny();
    optim_t *o;
    struct optim_config c;
    optim_config_default(&c, OPTIM_SGD);
    c.lr = 0;
    CHECK_ERR(optim_create(&c, m, &o), ERR_ARG, "learning rate 0");
    optim_config_default(&c, OPTIM_SGD);
    c.momentum = 1.0;
    CHECK_ERR(optim_create(&c, m, &o), ERR_ARG, "momentum 1");
    optim_config_default(&c, OPTIM_SGD);
    c.nesterov = 1;
    c.dampening = 0.5;
    CHECK_ERR(optim_create(&c, m, &o), ERR_ARG, "Nesterov");
    optim_config_default(&c, OPTIM_SGD);
    c.schedule = OPTIM_COSINE;
    CHECK_ERR(optim_create(&c, m, &o), ERR_ARG, "total number of steps");
    optim_config_default(&c, OPTIM_ADAM);
    c.beta2 = 1.5;
    CHECK_ERR(optim_create(&c, m, &o), ERR_ARG, "betas");
    enum optim_kind k;
    enum optim_schedule s;
    CHECK_OK(optim_kind_parse("--optimizer", "adam", &k));
    CHECK_EQ(k, OPTIM_ADAM);
    CHECK_ERR(optim_kind_parse("--optimizer", "adamw", &k), ERR_ARG, "--optimizer=adamw: unknown optimizer (sgd, adam)");
    CHECK_OK(optim_schedule_parse("--schedule", "cosine", &s));
    CHECK_EQ(s, OPTIM_COSINE);
    CHECK_ERR(optim_schedule_parse("--schedule", "linear", &s), ERR_ARG, "constant, cosine, step");
    fixture_model_destroy(m);
}
