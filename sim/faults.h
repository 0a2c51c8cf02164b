/* faults: the simulator's fault injection (`--fault=`), chapter 5.
 *
 * Where it sits: inside the thread communicator (sim/comm_sim.c), which asks
 * before and after each collective whether this rank has a fault due. Each
 * kind reproduces one way real jobs fail:
 *
 *   kill:R@K        rank R exits just before collective K (a crashed or
 *                   OOM-killed process): the others hang until the watchdog.
 *   delay:R@K:MS    rank R sleeps MS milliseconds before collective K (a
 *                   straggler: slow storage, a long validation step): with
 *                   MS past the timeout it is the classic "NCCL timeout".
 *   skip:R@K        rank R never issues collective K (uneven batches: one
 *                   rank has a batch fewer, the classic "hangs at epoch 2").
 *   flip:R@K        after collective K, the lowest bits of one value in
 *                   rank R's result flip: R + 1 XORed into them, so rank 0's
 *                   lowest bit, and never two ranks alike (silent
 *                   divergence; `--check` catches it by comparing checksums
 *                   across ranks). Chapter 6 takes its flips out
 *                   (faults_without) and flips a parameter's bit after
 *                   optimizer step K instead (lib/ddp/replica.h).
 *
 * SPEC is one or more faults separated by commas: "kill:2@3,delay:1@1:50".
 * R is a rank (0 .. W-1), K a collective's sequence number (1 = the first),
 * MS milliseconds (at most FAULT_MAX_DELAY_MS). Each fault fires once. A
 * flip given twice for one rank at one K is refused: one flip per rank and K
 * (a second would put the bits back). Flips of several ranks at one K change
 * each rank's value differently, as independent faults would (sim/comm_sim.c,
 * and chapter 6's replica_flip): flipped ranks never agree with each other,
 * so they cannot outvote the healthy ones.
 */
#ifndef DDP_FAULTS_H
#define DDP_FAULTS_H

#include <stddef.h>
#include <stdint.h>

/* The longest delay, 584 years: the most milliseconds whose nanoseconds fit
 * 64 bits, so a delay is always as long as asked (a longer one is refused,
 * not cut short). */
#define FAULT_MAX_DELAY_MS (UINT64_MAX / 1000000u)

enum fault_kind { FAULT_KILL, FAULT_DELAY, FAULT_SKIP, FAULT_FLIP };

struct fault {
    enum fault_kind kind;
    int rank;
    uint64_t seq;
    uint64_t ms;  /* delay only */
    int fired;    /* touched only by the thread of `rank` */
};

/* Parses SPEC for a world of `world` ranks into a new array (free() it).
 * NULL gives no faults. 0, or ERR_ARG with err_msg() naming the fault's form
 * and quoting the bad fault, the piece at fault and the range it takes
 * ("--fault=kill:R@K: rank R must be 0 to 3 (the world has 4 ranks), got '7'
 * in 'kill:7@1'"; an empty SPEC, an empty part between commas, "kill:1@2,,",
 * and one flip given twice are errors too), or ERR_NOMEM. */
int faults_parse(const char *spec, int world, struct fault **out, int *count);

/* SPEC without its faults of `kind`, as a spec again, the others in their
 * order ("kill:1@2,flip:0@5" without flips is "kill:1@2"): for a program that
 * injects that kind itself (chapter 6 flips a parameter's bit after a step,
 * not a collective's). *out is NULL when no fault is left, else free() it.
 * 0, or faults_parse()'s error. */
int faults_without(const char *spec, int world, enum fault_kind kind, char **out);

/* The not-yet-fired fault of `kind` for `rank` at collective `seq`, marked
 * fired; NULL when none. */
struct fault *faults_take(struct fault *faults, int count, enum fault_kind kind, int rank, uint64_t seq);

/* A delay fault's length in nanoseconds. */
uint64_t fault_delay_ns(const struct fault *f);

/* "kill:2@3" into buf; returns buf. */
const char *fault_describe(const struct fault *f, char *buf, size_t len);

#endif
