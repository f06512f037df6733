/* python/_baton_args.h: how the extension sees its arguments (python/_baton_args.c). Internal to the
 * extension module (its objects are built with hidden visibility); every function here runs with the GIL held. */
#ifndef BATON_PY_ARGS_H
#define BATON_PY_ARGS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "baton/comm.h"

/* A collective's buffer: a buffer-protocol object (numpy, bytearray, memoryview, ...) or a CPU torch.Tensor. */
typedef struct {
    PyObject *obj;   /* owned reference */
    Py_buffer view;  /* valid when has_view */
    int has_view;
    void *ptr;
    size_t count;    /* elements */
    baton_dtype dt;
} arg_t;

/* Interns the tensor attribute names read on every call; once, from PyInit. -1 with an exception set. */
int args_init(void);
/* torch.Tensor and its dtype table {torch.float32: 0, ...}, from baton.torch; takes new references. */
void args_register_torch(PyObject *tensor_type, PyObject *dtypes);

/* op / dtype arguments: a name ("sum", "bf16") or the number; None gives sum, and for the dtype -1 (take it
 * from the object). 0, or -1 with an exception set. */
int get_op(PyObject *o, baton_op *op);
int get_dtype(PyObject *o, int *dt);

/* o seen as (pointer, count, dtype); writable: baton writes into it (read-only buffers are refused);
 * dt_override >= 0 reinterprets elements of the same size. 0 (release with arg_release), or -1 with an
 * exception set and nothing held. what names the argument in messages. */
int get_arg(PyObject *o, const char *what, int writable, int dt_override, arg_t *a);
void arg_release(arg_t *a);
/* send and recv of an out-of-place collective (the same object: in place): same dtype, no partial overlap;
 * counts are the caller's to check. Release with release_pair. */
int get_pair(PyObject *send, PyObject *recv, int dt_override, arg_t *s, arg_t *r);
void release_pair(PyObject *send, PyObject *recv, arg_t *s, arg_t *r);

#endif
