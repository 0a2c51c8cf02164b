/* heap: malloc's bytes in use, both pools (see heap.h). */
#include "heap.h"

#include <malloc.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAP_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HEAP_UNDER_SANITIZER 1
#endif
#endif

#ifdef HEAP_UNDER_SANITIZER
int heap_measurable(void) { return 0; }
#else
int heap_measurable(void) { return 1; }
#endif

size_t heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}
