/* scratch.c: the scratch memory a communicator keeps between collectives (see algo.h). */
#include <stdlib.h>

#include "comm/algo.h"
#include "util/util.h"

/* 64-byte aligned (cache lines, and the SIMD reductions' loads), never shrunk: a collective of the same
 * size finds its pages already faulted in. */
void *baton__scratch_get(baton_scratch *s, size_t bytes, void **owned) {
    *owned = NULL;
    if (bytes == 0) bytes = 1;
    if (!s) {   /* a group without a communicator (tests, tools): this call's own buffer */
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes) != 0) return NULL;
        *owned = p;
        return p;
    }
    if (s->cap >= bytes) return s->p;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    free(s->p);
    s->p = p;
    s->cap = bytes;
    return p;
}

void baton__scratch_free(baton_scratch *s) {
    if (!s) return;
    free(s->p);
    s->p = NULL;
    s->cap = 0;
}
