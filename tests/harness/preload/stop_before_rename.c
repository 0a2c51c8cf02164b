/* stop_before_rename: an LD_PRELOAD library that stops a program in the middle
 * of an atomic save, by construction rather than by timing, so that a test
 * can kill it there on any machine under any load.
 *
 * Where it sits: under a chapter program, in tests/programs/chapter6.sh. Every
 * save of the project ends with rename(2) of a whole temporary file onto the
 * final name (lib/base/fsutil.c). With STOP_BEFORE_RENAME=SUFFIX in the
 * environment, the Nth rename (STOP_BEFORE_RENAME_AT=N, default 1) whose
 * destination ends with SUFFIX stops the whole process with SIGSTOP before it
 * renames: the new file is written and not yet in place, the previous one is
 * still whole. The test sees the process stopped (state T), kills it with
 * SIGKILL, and checks what a crash at that moment leaves.
 *
 * Built by the test that uses it (cc -shared -fPIC ... -ldl); not part of the
 * library or of any program.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int rename(const char *from, const char *to)
{
    static unsigned long matched;
    int (*real_rename)(const char *, const char *) =
        (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    const char *suffix = getenv("STOP_BEFORE_RENAME");
    if (suffix && *suffix && to && ends_with(to, suffix)) {
        const char *at = getenv("STOP_BEFORE_RENAME_AT");
        unsigned long want = at && *at ? strtoul(at, NULL, 10) : 1;
        if (__atomic_add_fetch(&matched, 1, __ATOMIC_SEQ_CST) == want)
            raise(SIGSTOP);
    }
    return real_rename(from, to);
}
