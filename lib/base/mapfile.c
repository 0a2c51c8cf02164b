/* mapfile: registered read-only mappings and the SIGBUS handler that names
 * them (see mapfile.h). */
#include "base/mapfile.h"

#include "base/error.h"
#include "base/fsutil.h"
#include "base/sigreg.h"

#include <errno.h> /* program_invocation_short_name (GNU) */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAPFILE_NAME_MAX 1024 /* a longer path is cut in the message, never in the mapping */

static struct sigreg mapfile_maps = SIGREG_INIT(MAPFILE_NAME_MAX);
static pthread_once_t mapfile_once = PTHREAD_ONCE_INIT;
static struct sigaction mapfile_previous; /* SIGBUS's action before ours */

/* ---- the handler: only async-signal-safe calls from here on --------------- */

static void mapfile_say(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

static void mapfile_say_u64(uint64_t v)
{
    char digits[24], *p = digits + sizeof digits;
    *--p = '\0';
    do
        *--p = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    mapfile_say(p);
}

static void mapfile_on_sigbus(int sig, siginfo_t *info, void *context)
{
    struct sigreg_entry e;
    char name[MAPFILE_NAME_MAX];
    if (info->si_code <= 0 || !sigreg_find(&mapfile_maps, (uintptr_t)info->si_addr, &e, name, sizeof name)) {
        /* Not one of ours: hand it to the action we replaced. A fault repeats
         * when we return; a SIGBUS sent with kill() must be sent again. */
        sigaction(SIGBUS, &mapfile_previous, NULL);
        if (info->si_code <= 0)
            raise(sig);
        (void)context;
        return;
    }
    uint64_t at = (uint64_t)((uintptr_t)info->si_addr - e.begin), mapped = (uint64_t)(e.end - e.begin);
    struct stat st;
    mapfile_say(program_invocation_short_name);
    mapfile_say(": ");
    mapfile_say(name);
    if (stat(name, &st) == 0 && (uint64_t)st.st_size < mapped) {
        mapfile_say(": truncated while mapped: it had ");
        mapfile_say_u64(mapped);
        mapfile_say(" bytes when it was opened and has ");
        mapfile_say_u64((uint64_t)st.st_size);
        mapfile_say(" now, and a read of byte ");
        mapfile_say_u64(at);
        mapfile_say(" faulted (SIGBUS).");
    } else {
        mapfile_say(": a read of byte ");
        mapfile_say_u64(at);
        mapfile_say(" of the mapped file faulted (SIGBUS): it was truncated while mapped (or its disk failed).");
    }
    mapfile_say(" A file being read must not be rewritten in place: write a new one and rename it over the old."
                " Stopping: the read cannot be resumed.\n");
    fsutil_tmp_remove_all();
    _exit(1);
}

/* ---- registering ------------------------------------------------------------ */

static void mapfile_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = mapfile_on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, &mapfile_previous);
}

int mapfile_map(int fd, size_t len, const char *name, const void **addr)
{
    pthread_once(&mapfile_once, mapfile_install);
    void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return err_set(ERR_IO, "%s: mmap of %zu bytes failed: %s", name, len, strerror(errno));
    /* Unregistered (no memory for the registry) it still works; a SIGBUS in
     * it is then a bare one, as without this module. */
    sigreg_add(&mapfile_maps, (uintptr_t)p, (uintptr_t)p + len, name);
    *addr = p;
    return 0;
}

void mapfile_unmap(const void *addr, size_t len)
{
    if (!addr)
        return;
    sigreg_remove(&mapfile_maps, sigreg_lookup(&mapfile_maps, (uintptr_t)addr));
    munmap((void *)addr, len);
}
