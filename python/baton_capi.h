/* python/baton_capi.h: the C functions baton._baton lends to baton.torch's C++ work layer
 * (python/baton/torch/_work.cpp), through the capsule baton._baton._capi (CPython's way for one extension to
 * call another). The C++ layer must use the communicator of baton._baton, not a copy of the library: both
 * extensions link libbaton.a privately, so it calls the library only through these pointers. */
#ifndef BATON_PY_CAPI_H
#define BATON_PY_CAPI_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BATON_CAPI_NAME "baton._baton._capi"
#define BATON_CAPI_VERSION 1

typedef struct baton_capi {
    int version; /* BATON_CAPI_VERSION */
    /* baton_allreduce_start on the module's communicator, in place, under its "one user thread" lock; call it
     * without the GIL. Returns a baton status (0 or a negative BATON_E*); *work is what wait() takes. */
    int (*allreduce_start)(void *buf, size_t count, int dtype, int op, void **work);
    /* baton_wait (frees the work); call it without the GIL, from any one thread. */
    int (*wait)(void *work);
    /* The message baton.Error would carry for status rc on this thread ("what: reason: detail"). */
    void (*describe)(int rc, const char *what, char *out, size_t len);
} baton_capi;

#ifdef __cplusplus
}
#endif
#endif
