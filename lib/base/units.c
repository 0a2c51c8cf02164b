/* units: sizes as people read them (see units.h). */
#include "base/units.h"

#include <stdio.h>

char *units_format_bytes(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    enum { LAST = sizeof units / sizeof units[0] - 1 };
    int u = 0;
    while (u < LAST && bytes >> (10 * (u + 1)))
        u++;
    uint64_t whole = bytes >> (10 * u);
    if (whole << (10 * u) == bytes) { /* a whole number of its unit: no decimal to show */
        snprintf(buf, cap, "%llu %s", (unsigned long long)whole, units[u]);
        return buf;
    }
    double v = (double)bytes / (double)(1ull << (10 * u));
    if (v >= 1023.95 && u < LAST) /* would print 1024.0 KiB: that is 1.0 MiB */
        v /= 1024, u++;
    snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}
