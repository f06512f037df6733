/* libs.c: the math libraries, loaded with dlopen on first use (issue 8, startup). oneDNN and OpenBLAS
 * relocate tens of thousands of symbols, and OpenBLAS starts a thread pool, at every program start; linked
 * directly they cost every `baton run` launcher, `baton --version` and every rank's start about 15 ms, even
 * in a process that never multiplies a matrix. Here they are one table: each library's soname, what to
 * install when it is missing, and the functions taken from it (typed from the library's own header, so a
 * changed prototype is a compile error). A library is opened once, under a lock; a failure is remembered and
 * reported in one line naming the library and the Debian package. */
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl_version.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/libs.h"
#include "util/util.h"

#define STR_(x) #x
#define STR(x) STR_(x)

enum { LIB_DNNL, LIB_BLAS, LIB_OMP, NLIBS };

static const struct {
    const char *what, *soname, *package;
} libs[NLIBS] = {
    [LIB_DNNL] = {"oneDNN", "libdnnl.so." STR(DNNL_VERSION_MAJOR), "libdnnl2"},
    [LIB_BLAS] = {"OpenBLAS", "libopenblas.so.0", "libopenblas0"},
    [LIB_OMP] = {"OpenMP (GNU)", "libgomp.so.1", "libgomp1"},
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int state[NLIBS];   /* 0 not tried, 1 loaded, -1 failed */
static char why[NLIBS][256];
static baton__dnnl_api dnnl_api;
static baton__blas_api blas_api;
static baton__omp_api omp_api;

#define LOAD_FN(f)                                                             \
    if (!(api->f = (__typeof__(api->f))dlsym(h, #f))) {                        \
        snprintf(why[lib], sizeof why[lib], "%s has no %s", libs[lib].soname, #f); \
        return -1;                                                             \
    }

static int fill_dnnl(baton__dnnl_api *api, void *h, int lib) {
    BATON_DNNL_FNS(LOAD_FN)
    return 0;
}
static int fill_blas(baton__blas_api *api, void *h, int lib) {
    BATON_BLAS_FNS(LOAD_FN)
    return 0;
}
static int fill_omp(baton__omp_api *api, void *h, int lib) {
    BATON_OMP_FNS(LOAD_FN)
    return 0;
}

/* Loads library lib once; returns 1 when it and every function of its table are there. */
static int load(int lib) {
    if (__atomic_load_n(&state[lib], __ATOMIC_ACQUIRE) == 1) return 1;   /* every call after the first */
    pthread_mutex_lock(&mu);
    if (!state[lib]) {
        state[lib] = -1;
        void *h = dlopen(libs[lib].soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(why[lib], sizeof why[lib], "%s", e ? e : libs[lib].soname);
        } else {
            int rc = lib == LIB_DNNL   ? fill_dnnl(&dnnl_api, h, lib)
                     : lib == LIB_BLAS ? fill_blas(&blas_api, h, lib)
                                       : fill_omp(&omp_api, h, lib);
            if (rc == 0) __atomic_store_n(&state[lib], 1, __ATOMIC_RELEASE);
            /* a library without its functions stays mapped: dlclose of a half-used library is not worth it */
        }
    }
    int ok = state[lib] == 1;
    pthread_mutex_unlock(&mu);
    return ok;
}

/* One line: "cannot load oneDNN (libdnnl.so.2: cannot open shared object file: ...); install libdnnl2". */
static const char *load_error(int lib, char *buf, size_t n) {
    snprintf(buf, n, "cannot load %s (%s); install the Debian package %s", libs[lib].what, why[lib], libs[lib].package);
    return buf;
}

static _Noreturn void die(int lib) {
    char msg[512];
    fprintf(stderr, "baton: %s\n", load_error(lib, msg, sizeof msg));
    exit(1);
}

const baton__dnnl_api *baton__dnnl(void) { return load(LIB_DNNL) ? &dnnl_api : NULL; }

const char *baton__dnnl_error(char *buf, size_t n) { return load_error(LIB_DNNL, buf, n); }

const baton__blas_api *baton__blas(void) {
    if (!load(LIB_BLAS)) die(LIB_BLAS);
    return &blas_api;
}

const baton__omp_api *baton__omp(void) {
    if (!load(LIB_OMP)) die(LIB_OMP);
    return &omp_api;
}

/* The OpenMP calls that `-fopenmp` code in src/nn makes (the row loops' `#pragma omp parallel for`), forwarded
 * to the libgomp loaded above, so nothing links libgomp and it is loaded at the first parallel loop. libbaton.so
 * keeps these local (src/libbaton.map) and a program does not export them, so oneDNN, which libgomp serves,
 * binds to libgomp's own. */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags) {
    baton__omp()->GOMP_parallel(fn, data, num_threads, flags);
}
int omp_get_max_threads(void) { return baton__omp()->omp_get_max_threads(); }
int omp_get_num_threads(void) { return baton__omp()->omp_get_num_threads(); }
int omp_get_thread_num(void) { return baton__omp()->omp_get_thread_num(); }
int omp_in_parallel(void) { return baton__omp()->omp_in_parallel(); }
