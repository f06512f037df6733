/* copy.h: memory copies for collectives. baton__copy_stream writes with non-temporal stores (AVX-512 or
 * AVX2 where the CPU has them, chosen once at run time), for results larger than the caches that will
 * not be read again at once: it skips reading the destination into the cache first. Same bytes as
 * memcpy. Source and destination must not overlap. */
#ifndef BATON_COPY_H
#define BATON_COPY_H

#include <stddef.h>

void baton__copy_stream(void *dst, const void *src, size_t n);
/* Must follow a batch of stream copies before another rank may read the destination. */
void baton__copy_stream_fence(void);

#endif
