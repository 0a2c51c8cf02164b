/* faults: the --fault= grammar and its lookup (see faults.h). */
#include "sim/faults.h"

#include "base/cli.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fault_names[] = {"kill", "delay", "skip", "flip"};
static const char *const fault_forms[] = {"kill:R@K", "delay:R@K:MS", "skip:R@K", "flip:R@K"};
#define FAULT_FORM "KIND:R@K[:MS]"
#define FAULT_K_MEANS "K counts from 1: collective K, or for chapter 6's flip optimizer step K"

/* Parses one fault "kind:R@K[:MS]" (text is NUL-terminated, and cut up
 * here); `part` (len bytes) is the same fault as given, for messages, which
 * name the kind's form, the piece at fault and the range it takes. */
static int fault_parse_one(char *text, const char *part, int len, int world, struct fault *f)
{
    char *colon = strchr(text, ':');
    char *at = colon ? strchr(colon, '@') : NULL;
    if (!colon || !at)
        return err_set(ERR_ARG, "--fault=" FAULT_FORM ": '%.*s' is not of this form (e.g. kill:2@3, delay:1@2:500)",
                       len, part);
    *colon = *at = '\0';
    int kind = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(text, fault_names[k]) == 0)
            kind = k;
    if (kind < 0)
        return err_set(ERR_ARG, "--fault=" FAULT_FORM ": unknown kind '%s' in '%.*s' (kill, delay, skip or flip)",
                       text, len, part);
    const char *form = fault_forms[kind];
    char *ms = strchr(at + 1, ':');
    if (ms)
        *ms++ = '\0';
    if (kind == FAULT_DELAY && !ms)
        return err_set(ERR_ARG, "--fault=%s: '%.*s' has no :MS, the delay in milliseconds", form, len, part);
    if (kind != FAULT_DELAY && ms)
        return err_set(ERR_ARG, "--fault=%s: '%.*s' ends with :%s, but only delay takes :MS", form, len, part, ms);
    uint64_t rank, seq, millis = 0;
    if (cli_parse_range("fault", colon + 1, 0, (uint64_t)world - 1, &rank) < 0)
        return err_set(ERR_ARG, "--fault=%s: rank R must be 0 to %d (the world has %d rank%s), got '%s' in '%.*s'",
                       form, world - 1, world, world == 1 ? "" : "s", colon + 1, len, part);
    if (cli_parse_range("fault", at + 1, 1, UINT64_MAX, &seq) < 0)
        return err_set(ERR_ARG, "--fault=%s: K must be 1 to %llu (" FAULT_K_MEANS "), got '%s' in '%.*s'", form,
                       (unsigned long long)UINT64_MAX, at + 1, len, part);
    if (ms && cli_parse_range("fault", ms, 0, FAULT_MAX_DELAY_MS, &millis) < 0)
        return err_set(ERR_ARG, "--fault=%s: MS must be 0 to %llu milliseconds, got '%s' in '%.*s'", form,
                       (unsigned long long)FAULT_MAX_DELAY_MS, ms, len, part);
    *f = (struct fault){.kind = (enum fault_kind)kind, .rank = (int)rank, .seq = seq, .ms = millis};
    return 0;
}

/* A flip given twice for one rank at one K would flip the same bits twice,
 * putting them back (or, where a fault is taken once per collective, never
 * fire): either way not the run asked for. */
static int faults_check_flips(const struct fault *faults, int count)
{
    char one[64];
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++)
            if (faults[i].kind == FAULT_FLIP && faults[j].kind == FAULT_FLIP && faults[i].seq == faults[j].seq &&
                faults[i].rank == faults[j].rank)
                return err_set(ERR_ARG, "--fault=flip:R@K: '%s' is given twice: one flip per rank and K (a second, "
                                        "flipping the same bits, would put them back)",
                               fault_describe(&faults[i], one, sizeof one));
    return 0;
}

int faults_parse(const char *spec, int world, struct fault **out, int *count)
{
    *out = NULL;
    *count = 0;
    if (!spec)
        return 0;
    if (!*spec) /* "--fault=" is a typo, not a request for no faults */
        return err_set(ERR_ARG, "--fault: empty; give " FAULT_FORM " (e.g. kill:2@3)");
    char *copy = strdup(spec);
    size_t n = 1;
    for (const char *p = spec; *p; p++)
        n += *p == ',';
    struct fault *faults = calloc(n, sizeof *faults);
    if (!copy || !faults) {
        free(copy);
        free(faults);
        return err_set(ERR_NOMEM, "--fault: out of memory");
    }
    /* strsep, not strtok: strtok would skip the empty part of "kill:1@2,,"
     * and accept a spec with a missing fault */
    int used = 0, rc = 0;
    char *rest = copy;
    for (char *part; rc == 0 && (part = strsep(&rest, ",")) != NULL; used++) {
        if (!*part)
            rc = err_set(ERR_ARG, "--fault: '%s': part %d is empty (faults are separated by single commas)", spec,
                         used + 1);
        else
            rc = fault_parse_one(part, spec + (part - copy), (int)strlen(part), world, &faults[used]);
    }
    free(copy);
    if (rc == 0)
        rc = faults_check_flips(faults, used);
    if (rc < 0) {
        free(faults);
        return rc;
    }
    *out = faults;
    *count = used;
    return 0;
}

int faults_without(const char *spec, int world, enum fault_kind kind, char **out)
{
    *out = NULL;
    struct fault *faults;
    int count, rc = faults_parse(spec, world, &faults, &count);
    if (rc < 0)
        return rc;
    char one[64], *rest = NULL;
    size_t len = 0;
    for (int i = 0; i < count; i++)
        if (faults[i].kind != kind)
            len += strlen(fault_describe(&faults[i], one, sizeof one)) + 1;
    if (len > 0 && !(rest = malloc(len)))
        rc = err_set(ERR_NOMEM, "--fault: out of memory");
    for (size_t used = 0, i = 0; rest && i < (size_t)count; i++)
        if (faults[i].kind != kind)
            used += (size_t)snprintf(rest + used, len - used, "%s%s", used ? "," : "",
                                     fault_describe(&faults[i], one, sizeof one));
    free(faults);
    *out = rest;
    return rc;
}

struct fault *faults_take(struct fault *faults, int count, enum fault_kind kind, int rank, uint64_t seq)
{
    for (int i = 0; i < count; i++) {
        struct fault *f = &faults[i];
        if (f->rank == rank && f->kind == kind && f->seq == seq && !f->fired) { /* fired: only `rank` reads it */
            f->fired = 1;
            return f;
        }
    }
    return NULL;
}

uint64_t fault_delay_ns(const struct fault *f)
{
    return f->ms * 1000000u;
}

const char *fault_describe(const struct fault *f, char *buf, size_t len)
{
    if (f->kind == FAULT_DELAY)
        snprintf(buf, len, "delay:%d@%llu:%llu", f->rank, (unsigned long long)f->seq, (unsigned long long)f->ms);
    else
        snprintf(buf, len, "%s:%d@%llu", fault_names[f->kind], f->rank, (unsigned long long)f->seq);
    return buf;
}
