/* libs.h: oneDNN, OpenBLAS and GNU OpenMP as tables of functions, loaded with dlopen on first use (libs.c).
 * Only the files that multiply matrices include this header; nothing links the libraries themselves. */
#ifndef BATON_NN_LIBS_H
#define BATON_NN_LIBS_H

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stddef.h>

/* The functions baton calls, one X per function; the table's field has the header's own type. */
#define BATON_DNNL_FNS(X)                                                                                   \
    X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_get_effective_cpu_isa)                              \
    X(dnnl_memory_desc_init_by_strides) X(dnnl_matmul_desc_init) X(dnnl_primitive_attr_create)             \
    X(dnnl_primitive_attr_set_post_ops) X(dnnl_primitive_attr_destroy) X(dnnl_post_ops_create)             \
    X(dnnl_post_ops_append_sum) X(dnnl_post_ops_destroy) X(dnnl_primitive_desc_create)                     \
    X(dnnl_primitive_desc_destroy) X(dnnl_primitive_create) X(dnnl_primitive_execute)                      \
    X(dnnl_primitive_destroy) X(dnnl_memory_create) X(dnnl_memory_set_data_handle) X(dnnl_memory_destroy) \
    X(dnnl_primitive_attr_set_scratchpad_mode) X(dnnl_primitive_desc_query_md) X(dnnl_memory_desc_get_size)  \
    X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_equal) X(dnnl_reorder_primitive_desc_create)           \
    X(dnnl_sgemm)
#define BATON_BLAS_FNS(X) X(cblas_sgemm) X(openblas_set_num_threads)
/* GNU OpenMP's entry for `#pragma omp parallel` (src/nn is built with -fopenmp); libgomp has no header for it */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
#define BATON_OMP_FNS(X) \
    X(omp_set_num_threads) X(omp_get_max_threads) X(omp_get_num_threads) X(omp_get_thread_num) X(omp_in_parallel) X(GOMP_parallel)

#define BATON_LIB_FIELD_(f) __typeof__(f) *f;
typedef struct { BATON_DNNL_FNS(BATON_LIB_FIELD_) } baton__dnnl_api;
typedef struct { BATON_BLAS_FNS(BATON_LIB_FIELD_) } baton__blas_api;
typedef struct { BATON_OMP_FNS(BATON_LIB_FIELD_) } baton__omp_api;
#undef BATON_LIB_FIELD_

/* oneDNN, or NULL when it cannot be loaded (baton__dnnl_error says why, in one line). */
const baton__dnnl_api *baton__dnnl(void);
const char *baton__dnnl_error(char *buf, size_t n);
/* OpenBLAS and OpenMP: there is no other backend, so a missing library ends the process with one line
 * ("baton: cannot load OpenBLAS (...); install the Debian package libopenblas0") and exit code 1. */
const baton__blas_api *baton__blas(void);
const baton__omp_api *baton__omp(void);

#endif
