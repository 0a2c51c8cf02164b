/* heap: how many bytes of malloc's heap are in use, for the tests that
 * promise a module's memory does not grow with its data (the dataset
 * readers, chapter 1).
 *
 * Both of glibc's pools count: the arenas (mallinfo2's uordblks) and the
 * blocks malloc serves straight from mmap (hblkhd). A large allocation goes
 * to the second, so a test counting only the first would miss exactly the
 * whole-file copy it exists to catch. Sanitizers bring their own malloc;
 * under them heap_measurable() is 0 and the tests say they are skipped.
 */
#ifndef DDP_HEAP_H
#define DDP_HEAP_H

#include <stddef.h>

/* 1 when heap_in_use() means something in this build. */
int heap_measurable(void);

/* Bytes in use now: arena chunks plus mmapped blocks. */
size_t heap_in_use(void);

#endif
