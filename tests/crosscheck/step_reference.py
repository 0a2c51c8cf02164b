#!/usr/bin/python3
"""step_reference: one training step of the MLP from a state our program
reached, computed by PyTorch in float64, and the bounds our float32 step must
lie within. tests/crosscheck/ddp_torch.py and chapter6_torch.py import it
(Debian's python3-torch, 1.13; /usr/bin/python3).

Why one step from our own state. Two float32 trainings of one network on the
same batches cannot be compared after many steps, however right both are. A
pre-activation within rounding of 0 is cut by ReLU on one side and passed on
by the other: that unit's derivative is 0 on one side and 1 on the other, so
its rows of the gradient differ by that sample's whole share (a percent of
the tensor's largest element), and with momentum the two runs part ways for
good. Which way it falls depends on the order of the sums: on OpenBLAS's
kernels (OPENBLAS_CORETYPE), on the CPU, on the number of ranks. So each
check starts from the float32 state our program saved, and PyTorch computes
that one step in float64, whose rounding (1e-16) is nothing next to ours. Our
step must then lie within bounds that hold whatever order our float32 sums
took:

- forward (logits, loss, BatchNorm's running statistics): an elementwise
  bound on our float32 error, carried through the layers. A dot product of n
  terms summed in any order is off by at most gamma(n) = n u / (1 - n u) times
  the sum of its terms' magnitudes, u = 2^-24 (Higham, Accuracy and Stability
  of Numerical Algorithms, 3.1), plus what its inputs were off; ReLU passes an
  error on and never enlarges it. A worst case: measured errors are 1e-4 to
  1e-6 of it.
- ReLU's edge. Where our ReLU masks are known (the unit test's cases write
  them), the step takes our side of every unit, and a unit where ours and the
  float64 sign disagree must be within that worst-case bound of 0: our masks
  are checked, not trusted. Where they are not (a chapter 6 checkpoint), the
  units that may have gone either way are those within EDGE_SIGMAS times the
  scale of their rounding error as a sum of independent roundings (Higham and
  Mary's probabilistic model, SIAM J. Sci. Comput. 41(5), 2019: each rounding
  error at most u, mean-independent of the others; a sum of such terms with
  coefficients c_i then exceeds t sqrt(sum c_i^2) u with probability below
  2 exp(-t^2 / 2)): at 9, 5e-18 per unit, against about a million units in a
  test. The worst-case bound would name a hundred units a step, most of them
  far from any real flip. For each such unit, what flipping its derivative
  changes the gradient by is added to the envelope (edge_envelope); our
  gradient may differ by the envelope there and nowhere else.
- the gradient: beyond the envelope, within GRAD_TOLERANCE of the tensor's
  largest element (at least GRAD_FLOOR of the model's largest gradient: with
  BatchNorm the bias before it has a gradient of exactly 0 in theory, so ours
  holds rounding noise only). The float32 sums of the backward pass are off
  by about sqrt(n) u of their terms, and a term can exceed the result where
  the sum cancels: measured up to 8e-6 (with BatchNorm), 6e-7 without; a
  wrong average (a sum, one rank's gradient), a wrong batch or a wrong
  derivative moves the gradient by 1e-2 and more.
- the envelope itself (envelope_cover, envelope_refusals): an allowance this
  wide could swallow a tensor, so it is bounded, per tensor. At no step may
  it cover more than ENVELOPE_SHARE of the elements (let them be off by
  COVERED of themselves or more). And it must leave enough of the tensor's
  largest gradients in view that the whole tensor off by a factor 1 +
  HIDDEN_SCALE shows at half the steps of a run or more: then an average off
  by more than HIDDEN_SCALE at every step (a divisor slightly wrong) fails
  whatever the envelope, at most steps, not by luck at one. Measured on
  chapter 6's run at EDGE_SIGMAS 9: it covers at most 25% of fc1.bias at a
  step (a unit on its edge in the second layer reaches every first-layer
  unit its sample passes), 12% of fc1.weight, and hides a 2e-4 scale error
  at 4% of the steps (at the worst step, 4.8e-4 of fc1.bias: no bound per
  step could be that tight); at 300 sigmas it covers up to 91% of fc1.bias
  and hides the scale error at nearly every step.
- the update: PyTorch's optimizer (torch.optim, in float64) applied to our
  gradient from our optimizer state; ours within the rounding of each
  operation of the rule, each at most u of the value it rounds
  (update_bounds): a worst case, measured up to 0.99 of it (a parameter
  that the update moves by less than its last place).
"""
from dataclasses import dataclass, field

import torch

U = 2.0 ** -24  # float32's unit roundoff
GRAD_TOLERANCE = 1e-4
GRAD_FLOOR = 1e-2
EDGE_SIGMAS = 9
# The envelope's bounds (envelope_refusals). An element the envelope lets be
# off by a tenth of itself is not checked in any sense that matters; at any
# step at least half of every tensor must be held closer than that, so that
# the comparison, not the envelope, decides most of the verdict. A tensor off
# by a factor 1 + HIDDEN_SCALE must show at half the steps or more (twice
# GRAD_TOLERANCE: its largest element need not be in view, one at least half
# its size must).
COVERED = 0.1
ENVELOPE_SHARE = 0.5
HIDDEN_SCALE = 2 * GRAD_TOLERANCE
BN_EPS = 1e-5
BN_MOMENTUM = 0.1


def gamma(n):
    return n * U / (1 - n * U)


def layer_sizes(state):
    """784, 256, 128, 10 from fc1.weight ... fcN.weight."""
    sizes, i = [], 1
    while f"fc{i}.weight" in state:
        w = state[f"fc{i}.weight"]
        sizes = sizes or [w.shape[1]]
        sizes.append(w.shape[0])
        i += 1
    return sizes


@dataclass
class Forward:
    logits: torch.Tensor
    loss: torch.Tensor
    logits_bound: torch.Tensor        # elementwise bound on our float32 logits' error
    logits_sigma: torch.Tensor        # their scale as sums of independent roundings (EDGE_SIGMAS; no BatchNorm)
    loss_bound: float
    edges: list                       # (layer, sample, unit) whose ReLU input may round to either side of 0
    off_edge: list                    # (layer, sample, unit) where the given masks disagree off the edge
    preactivations: dict              # layer -> ReLU's input [B, n]
    masks: dict                       # layer -> the units [B, n] ReLU passed (1.0) in this forward
    outputs: list                     # each layer's input: the batch, then each ReLU's output (.grad after backward)
    buffers: dict                     # BatchNorm's running statistics after this forward (train mode)
    buffer_bounds: dict


def forward(params, buffers, x, y, train=True, masks=None, edge_sigmas=EDGE_SIGMAS):
    """The MLP on float64 params (name -> tensor), BatchNorm when bn1.weight
    is there; x: the batch's bytes [B, in], y: labels. masks: layer -> the
    units [B, n] our ReLU passed, used instead of the float64 signs (each
    disagreement must be on the edge: Forward.off_edge lists those that are
    not). Without masks, a unit is on its edge within edge_sigmas. Returns a
    Forward."""
    nlayers = len(layer_sizes(params)) - 1
    bn = "bn1.weight" in params
    a = x.double() / 255
    err = U * a  # our inputs are the bytes over 255, rounded to float32
    sigma = U * a  # the same, as the scale of a sum of independent roundings (edges, below)
    edges, off_edge, new_buffers, buffer_bounds, pre, used, outputs = [], [], {}, {}, {}, {}, [a]
    for i in range(1, nlayers + 1):
        w, b = params[f"fc{i}.weight"], params[f"fc{i}.bias"]
        z = a @ w.t() + b
        with torch.no_grad():  # the bias, then n products summed in any order
            terms = a.abs() @ w.abs().t() + b.abs()
            err = gamma(w.shape[1] + 1) * terms + err @ w.abs().t()
            sigma = (U * U * (w.shape[1] + 1) * terms * terms + (sigma * sigma) @ (w * w).t()).sqrt()
        if i == nlayers:
            break
        if bn:
            z, err = batchnorm(params, buffers, i, z, err, train, new_buffers, buffer_bounds)
        with torch.no_grad():
            pre[i] = z.detach()
            mask = (z > 0).double()
            if not bn:  # sigma is not carried through BatchNorm: there the unit test's masks stand in
                edges += [(i, s, j) for s, j in (z.abs() <= edge_sigmas * sigma).nonzero().tolist()]
            if masks is not None:
                off_edge += [(i, s, j) for s, j in ((masks[i].double() != mask) & (z.abs() > err)).nonzero().tolist()]
                mask = masks[i].double()
            used[i] = mask
        a = z * mask  # ReLU, its derivative the mask
        if a.requires_grad:
            a.retain_grad()
        outputs.append(a)
    logits = z
    loss = torch.nn.functional.cross_entropy(logits, y)
    with torch.no_grad():  # log-sum-exp minus one logit moves by at most twice the largest logit error
        loss_bound = (2 * err.max(1).values).mean().item() + 4 * U * abs(loss.item())
    return Forward(logits, loss, err, sigma, loss_bound, edges, off_edge, pre, used, outputs, new_buffers,
                   buffer_bounds)


def batchnorm(params, buffers, i, z, err, train, new_buffers, bounds):
    """BatchNorm1d of layer i on z [B, n], with the bound on our float32
    error carried through (ours: statistics in double from float32 z, then
    (z - mean) * invstd * gamma + beta in float32)."""
    g, beta = params[f"bn{i}.weight"], params[f"bn{i}.bias"]
    rm, rv = buffers[f"bn{i}.running_mean"].double(), buffers[f"bn{i}.running_var"].double()
    n = z.shape[0]
    if train:
        mean, var = z.mean(0), z.var(0, unbiased=False)
    else:
        mean, var = rm, rv
    s = (var + BN_EPS).sqrt()
    xhat = (z - mean) / s
    y = xhat * g + beta
    with torch.no_grad():
        if train:
            dmean = err.mean(0)
            dvar = (2 * (z - mean).abs() * (err + dmean) + (err + dmean) ** 2).mean(0)
            new_buffers[f"bn{i}.running_mean"] = (1 - BN_MOMENTUM) * rm + BN_MOMENTUM * mean
            new_buffers[f"bn{i}.running_var"] = (1 - BN_MOMENTUM) * rv + BN_MOMENTUM * var * n / (n - 1)
            bounds[f"bn{i}.running_mean"] = BN_MOMENTUM * dmean + U * new_buffers[f"bn{i}.running_mean"].abs()
            bounds[f"bn{i}.running_var"] = (BN_MOMENTUM * dvar * n / (n - 1)
                                            + U * new_buffers[f"bn{i}.running_var"].abs())
        else:
            dmean = torch.zeros_like(mean)
            dvar = torch.zeros_like(var)
        rel_s = dvar / (2 * s * s) + 2 * U  # invstd: from the variance's error, and its rounding to float32
        dx = (err + dmean + U * mean.abs()) / s + xhat.abs() * (rel_s + 2 * U)
        dy = g.abs() * dx + U * (g * xhat).abs() + U * y.abs()
    return y, dy


@dataclass
class Step:
    """A step from one state on one batch, as PyTorch computes it in float64."""
    forward: Forward
    grad: dict                        # name -> float64 gradient
    envelope: dict = field(default_factory=dict)  # name -> what the edges' flips can change it by


def reference_step(state, x, y, masks=None, edge_sigmas=EDGE_SIGMAS):
    """One forward and backward of the MLP from `state` (a state_dict of
    float32 tensors: parameters, and BatchNorm's buffers when it has them) on
    the batch (bytes x [B, in], labels y), in float64. With `masks` (layer ->
    [B, n], the units our ReLU passed) the step takes our side of every edge;
    without, it computes the envelope of every unit within edge_sigmas of its
    edge (edge_envelope)."""
    names = [n for n in state if n.startswith(("fc", "bn")) and n.endswith((".weight", ".bias"))]
    buffers = {n: t for n, t in state.items() if n not in names}
    params = {n: state[n].double().clone().requires_grad_() for n in names}
    f = forward(params, buffers, x, y, True, masks, edge_sigmas)
    f.loss.backward()
    grad = {n: p.grad for n, p in params.items()}
    if masks is not None:
        return Step(f, grad, {n: torch.zeros_like(g) for n, g in grad.items()})
    return Step(f, grad, edge_envelope(params, f))


def edge_envelope(params, f):
    """For each ReLU unit on its edge (layer l, sample b, unit i), what
    flipping its derivative changes the gradient by, summed in magnitude over
    the edges. The unit's pre-activation gets the upstream gradient g =
    dL/da_l[b, i] or none: fcl's row i moves by g a_(l-1)[b] (its bias by g),
    and g fcl.weight[i] goes down through the layers below, sample b's ReLUs
    as they are, moving each layer's rows by its outer product with that
    layer's input. Exact for one flip (the flipped unit's own output, within
    rounding of 0, is left as it is); several flips add up. Without
    BatchNorm only, whose backward mixes the batch's samples: pass our masks
    there instead."""
    if "bn1.weight" in params:
        raise ValueError("edge_envelope: a model with BatchNorm needs our ReLU masks")
    env = {n: torch.zeros_like(p) for n, p in params.items()}
    with torch.no_grad():
        for layer in {e[0] for e in f.edges}:
            picked = [(s, i) for l, s, i in f.edges if l == layer]
            samples = torch.tensor([s for s, _ in picked])
            units = torch.tensor([i for _, i in picked])
            delta = f.outputs[layer].grad[samples, units].unsqueeze(1)  # [F, 1]: each edge's g
            rows = torch.zeros(len(picked), params[f"fc{layer}.bias"].shape[0], dtype=torch.float64)
            rows[torch.arange(len(picked)), units] = 1
            for l in range(layer, 0, -1):
                dz = delta * rows if l == layer else delta * f.masks[l][samples]  # [F, n_l]
                env[f"fc{l}.weight"] += dz.abs().t() @ f.outputs[l - 1][samples].abs()
                env[f"fc{l}.bias"] += dz.abs().sum(0)
                delta = dz @ params[f"fc{l}.weight"]  # [F, n_(l-1)]
    return env


def gradient_scales(step):
    """Per tensor: what GRAD_TOLERANCE is a share of, its largest element, at
    least GRAD_FLOOR of the model's largest gradient."""
    floor = GRAD_FLOOR * max(g.abs().max().item() for g in step.grad.values())
    return {n: max(ref.abs().max().item(), floor, 1e-300) for n, ref in step.grad.items()}


def gradient_errors(ours, step, slack=None):
    """Per tensor: the largest difference between our gradient and PyTorch's
    beyond the envelope (and beyond `slack`, name -> tensor, what deriving
    ours cost), over the tensor's scale (gradient_scales). Compare with
    GRAD_TOLERANCE."""
    scale = gradient_scales(step)
    out = {}
    for n, ref in step.grad.items():
        allowed = step.envelope[n] + (slack[n] if slack else 0)
        excess = ((ours[n].double() - ref).abs() - allowed).clamp(min=0)
        out[n] = excess.max().item() / scale[n]
    return out


def envelope_cover(step, slack=None):
    """Per tensor, what the envelope (with `slack`, as gradient_errors takes
    it) leaves unchecked at this step: (share, hides), the share of the
    elements it covers (lets be off by COVERED of themselves or more), and
    whether the whole tensor off by a factor 1 + HIDDEN_SCALE would pass
    because of it (no element large enough with an allowance small enough to
    show it, where the plain tolerance alone would)."""
    scale = gradient_scales(step)
    out = {}
    for n, ref in step.grad.items():
        allowed = step.envelope[n] + (slack[n] if slack else 0)
        size = ref.abs()
        share = (step.envelope[n] > COVERED * size).double().mean().item()
        off, limit = HIDDEN_SCALE * size, GRAD_TOLERANCE * scale[n]
        out[n] = (share, bool((off > limit).any()) and not bool((off - allowed > limit).any()))
    return out


def envelope_refusals(covers):
    """covers: step -> envelope_cover() of that step, over a run. Per tensor
    whose envelope is past its bounds, why: {"share": ..., "hidden": ...}
    (ENVELOPE_SHARE, HIDDEN_SCALE), each bound that refuses it."""
    out = {}
    for n in next(iter(covers.values())):
        widest = max(covers, key=lambda k: covers[k][n][0])
        hidden = sum(c[n][1] for c in covers.values())
        why = {}
        if covers[widest][n][0] > ENVELOPE_SHARE:
            why["share"] = (f"at step {widest} it lets {100 * covers[widest][n][0]:.0f}% of the elements be off by "
                            f"{COVERED:g} of themselves, more than {100 * ENVELOPE_SHARE:.0f}%")
        if 2 * hidden > len(covers):
            why["hidden"] = (f"the tensor off by a factor 1 + {HIDDEN_SCALE:g} would pass at {hidden} of "
                             f"{len(covers)} steps, its largest gradients inside the envelope")
        if why:
            out[n] = why
    return out


def within(ours, ref, bound):
    """The largest |ours - ref| / bound over a tensor (<= 1: within)."""
    d = (ours.double() - ref.double()).abs()
    return (d / bound.clamp(min=1e-300)).max().item() if d.numel() else 0.0


def reference_update(kind, hyper, params, grads, state, steps_taken):
    """PyTorch's optimizer, in float64, from our parameters, our gradient and
    our optimizer state (name -> {"momentum_buffer": ...} or {"exp_avg": ...,
    "exp_avg_sq": ...}; empty before the first step). hyper: lr, momentum,
    dampening, nesterov, weight_decay, betas, eps. Returns, per parameter, the
    parameter and the optimizer state after the step ({"param": ...,
    "momentum_buffer": ...}), and elementwise bounds on our float32 step's
    error in each (update_bounds)."""
    p64 = {n: params[n].double().clone() for n in grads}
    if kind == "adam":
        opt = torch.optim.Adam(p64.values(), lr=hyper["lr"], betas=hyper["betas"], eps=hyper["eps"],
                               weight_decay=hyper["weight_decay"])
    else:
        opt = torch.optim.SGD(p64.values(), lr=hyper["lr"], momentum=hyper["momentum"],
                              dampening=hyper["dampening"], nesterov=hyper["nesterov"],
                              weight_decay=hyper["weight_decay"])
    for n, p in p64.items():
        p.grad = grads[n].double().clone()
        if state.get(n):
            s = {k: v.double().clone() for k, v in state[n].items()}
            if kind == "adam":
                s["step"] = torch.tensor(float(steps_taken))
            opt.state[p] = s
    before = {n: {k: v.clone() for k, v in opt.state[p].items() if k != "step"} for n, p in p64.items()
              if p in opt.state}
    opt.step()
    after = {n: dict({k: v for k, v in opt.state[p].items() if k != "step"}, param=p.detach())
             for n, p in p64.items()}
    bounds = {n: update_bounds(kind, hyper, params[n].double(), grads[n].double(), before.get(n, {}), after[n],
                               steps_taken + 1) for n in p64}
    return after, bounds


def update_bounds(kind, h, p, g, s, new, t):
    """Our float32 optimizer rule (lib/ddp/optim.c) rounds each operation
    once, and its scalars (lr, momentum, betas, eps) are float32 roundings of
    PyTorch's doubles: each rounding is off by at most u of the value it
    rounds. This sums those, operation by operation, elementwise, with the
    errors they carry on (first order: what is left is below u^2). s: the
    state before the step, new: after it (PyTorch's). Returns a bound for the
    parameter and for each state tensor."""
    wd = h["weight_decay"]
    d = g + wd * p if wd else g
    dd = (2 * U * (wd * p).abs() + U * d.abs()) if wd else torch.zeros_like(g)
    out = {}
    if kind == "adam":
        b1, b2 = h["betas"]
        m0 = s.get("exp_avg", torch.zeros_like(g))
        v0 = s.get("exp_avg_sq", torch.zeros_like(g))
        m, v = new["exp_avg"], new["exp_avg_sq"]
        dm = 2 * U * (b1 * m0).abs() + (1 - b1) * dd + 2 * U * (1 - b1) * d.abs() + U * m.abs()
        dv = 2 * U * b2 * v0 + (1 - b2) * 2 * d.abs() * dd + 3 * U * (1 - b2) * d * d + U * v
        bc1, bc2s = 1 - b1 ** t, (1 - b2 ** t) ** 0.5
        root = v.sqrt()
        droot = torch.minimum(dv / (2 * root).clamp(min=1e-300), dv.sqrt()) + U * root
        den = root / bc2s + h["eps"]
        dden = droot / bc2s + 2 * U * root / bc2s + 2 * U * h["eps"]
        step = h["lr"] / bc1
        dupd = step * (dm + 3 * U * m.abs()) / den + step * m.abs() * dden / (den * den)
        # 1e-30: a moment flushed from a subnormal to 0 (Adam's step runs with FTZ and DAZ)
        out.update(exp_avg=dm + 1e-30, exp_avg_sq=dv + 1e-30)
    else:
        mu, damp = h["momentum"], 1 - h["dampening"]
        if mu:
            first = "momentum_buffer" not in s
            b = new["momentum_buffer"]
            db = dd if first else 2 * U * (mu * s["momentum_buffer"]).abs() + damp * dd + 2 * U * (damp * d).abs() \
                + U * b.abs()
            out["momentum_buffer"] = db + 1e-300
            if h["nesterov"]:
                dd = dd + mu * db + 2 * U * (mu * b).abs() + U * (d + mu * b).abs()
                d = d + mu * b
            else:
                d, dd = b, db
        dupd = h["lr"] * dd + 2 * U * h["lr"] * d.abs()
    out["param"] = dupd + U * new["param"].abs() + 1e-30  # the sum's own rounding
    # 1%: the second-order terms left out, below u^2 of the same magnitudes, and float64's own rounding
    return {k: 1.01 * v for k, v in out.items()}
