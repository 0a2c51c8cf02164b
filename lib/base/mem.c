/* mem: sizes checked against 64 bits and against this machine (see mem.h). */
#include "base/mem.h"

#include "base/error.h"
#include "base/units.h"

#include <unistd.h>

uint64_t mem_physical_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

int mem_check_fits(const char *what, uint64_t bytes)
{
    uint64_t have = mem_physical_bytes();
    double usable = (double)have * MEM_USABLE_FRACTION;
    char need[16], of[16];
    if ((have > 0 && (double)bytes > usable) || bytes > SIZE_MAX)
        return err_set(ERR_NOMEM, "%s: needs %s, more than this machine can hold (%.0f%% of its %s)", what,
                       units_format_bytes(bytes, need, sizeof need), MEM_USABLE_FRACTION * 100,
                       units_format_bytes(have, of, sizeof of));
    return 0;
}

int mem_check_array(const char *what, uint64_t count, uint64_t size, size_t *bytes)
{
    uint64_t total;
    if (__builtin_mul_overflow(count, size, &total))
        return err_set(ERR_NOMEM, "%s: %llu x %llu bytes overflows 64 bits", what, (unsigned long long)count,
                       (unsigned long long)size);
    int rc = mem_check_fits(what, total);
    if (rc == 0)
        *bytes = (size_t)total;
    return rc;
}
