/* python/_baton.c: the CPython extension behind `import baton` (module baton._baton).
 *
 * One communicator per process, made by init() and freed by shutdown() (or at exit). Collectives take any
 * object exposing a C-contiguous buffer (numpy arrays, bytearray, array.array, memoryview) or a contiguous
 * CPU torch.Tensor (read through data_ptr(), so bf16 works though it has no numpy view; baton.torch hands
 * this module torch.Tensor and its dtype table, so numpy users never import torch). The element type comes
 * from the buffer format or the tensor dtype, or from dtype= (e.g. bf16 held in a uint16 numpy array).
 *
 * The GIL is released while the library runs. A process-wide mutex keeps the rule "one user thread at a
 * time" of baton/comm.h for starting and running collectives; waiting on a handle needs no mutex (the
 * library's own lock covers it). Library failures raise baton.Error carrying baton_last_error() and the
 * status name; bad arguments raise TypeError/ValueError. Nothing here aborts the interpreter.
 *
 * Ownership: a Handle keeps its objects (and buffer views) alive until wait() returns or the handle dies
 * (dying unwaited, it waits first: the library may still be writing). A SharedBuffer (buffer(nbytes)) is
 * memory baton shares with the other ranks of the node; the communicator outlives every SharedBuffer.
 * How a Python object becomes (pointer, count, dtype): _baton_args.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "_baton_args.h"
#include "baton/comm.h"
#include "baton_capi.h"

static baton_comm *g_comm;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* one user thread in the library at a time */
static long g_live_buffers;  /* SharedBuffers alive: the communicator is freed only when none is */
static int g_free_pending;   /* shutdown() asked while buffers were alive */
static PyObject *g_error;    /* baton.Error */

/* ---- errors ---- */

/* "what: reason: detail" for status rc on this thread: baton.Error's message (and the C++ work layer's, through
 * the capsule below). */
static void status_message(int rc, const char *what, char *out, size_t len) {
    const char *detail = baton_last_error();
    snprintf(out, len, "%s: %s%s%s", what, baton_strerror(rc), detail[0] ? ": " : "", detail);
}

static PyObject *raise_status(int rc, const char *what) {
    char text[2048];
    status_message(rc, what, text, sizeof text);
    PyObject *msg = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
    if (!msg) return NULL;
    PyObject *exc = PyObject_CallOneArg(g_error, msg);
    Py_DECREF(msg);
    if (!exc) return NULL;
    PyObject *name = PyUnicode_FromString(baton_status_name(rc));
    PyObject *code = PyLong_FromLong(rc);
    if (name && code) {
        PyObject_SetAttrString(exc, "status", name);
        PyObject_SetAttrString(exc, "code", code);
    }
    Py_XDECREF(name);
    Py_XDECREF(code);
    PyErr_SetObject(g_error, exc);
    Py_DECREF(exc);
    return NULL;
}

static baton_comm *need_comm(void) {
    if (!g_comm || g_free_pending) PyErr_SetString(g_error, "baton is not initialized: call baton.init() first");
    return g_comm && !g_free_pending ? g_comm : NULL;
}

/* ---- module functions ---- */

static PyObject *py_init(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    if (g_comm && !g_free_pending) Py_RETURN_NONE;
    if (g_comm) {
        PyErr_SetString(g_error, "baton.init(): the previous communicator is still in use by shared buffers");
        return NULL;
    }
    baton_comm *c = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = baton_init(&c, NULL);
    Py_END_ALLOW_THREADS
    if (rc < 0) return raise_status(rc, "baton.init");
    g_comm = c;
    Py_RETURN_NONE;
}

static void free_comm(void) {
    baton_comm *c = g_comm;
    g_comm = NULL;
    g_free_pending = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&g_lock);
    baton_comm_free(c);
    pthread_mutex_unlock(&g_lock);
    Py_END_ALLOW_THREADS
}

static PyObject *py_shutdown(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    if (!g_comm || g_free_pending) Py_RETURN_NONE;
    if (g_live_buffers > 0) g_free_pending = 1; /* freed with the last shared buffer */
    else free_comm();
    Py_RETURN_NONE;
}

static PyObject *py_is_initialized(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    return PyBool_FromLong(g_comm && !g_free_pending);
}

#define QUERY(fn, call)                                              \
    static PyObject *fn(PyObject *self, PyObject *args) {            \
        (void)self, (void)args;                                      \
        baton_comm *c = need_comm();                                 \
        return c ? PyLong_FromLong(call(c)) : NULL;                  \
    }
QUERY(py_rank, baton_comm_rank)
QUERY(py_size, baton_comm_size)
QUERY(py_local_rank, baton_comm_local_rank)
QUERY(py_local_size, baton_comm_local_size)
QUERY(py_node_rank, baton_comm_node_rank)
QUERY(py_num_nodes, baton_comm_num_nodes)

/* Runs `call` with the GIL released and the process-wide mutex held. */
#define RUN(rc, call)                      \
    Py_BEGIN_ALLOW_THREADS                 \
    pthread_mutex_lock(&g_lock);           \
    rc = (call);                           \
    pthread_mutex_unlock(&g_lock);         \
    Py_END_ALLOW_THREADS

static PyObject *py_allreduce(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kws[] = {"send", "recv", "op", "dtype", NULL};
    PyObject *send, *recv, *opo = NULL, *dto = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO:allreduce", kws, &send, &recv, &opo, &dto)) return NULL;
    baton_comm *c = need_comm();
    baton_op op;
    int dt;
    if (!c || get_op(opo, &op) < 0 || get_dtype(dto, &dt) < 0) return NULL;
    arg_t s, r;
    if (get_pair(send, recv, dt, &s, &r) < 0) return NULL;
    if (s.count != r.count) {
        PyErr_Format(PyExc_ValueError, "baton.allreduce: input has %zu elements but output %zu", s.count, r.count);
        release_pair(send, recv, &s, &r);
        return NULL;
    }
    int rc;
    RUN(rc, baton_allreduce(c, s.ptr, r.ptr, s.count, s.dt, op));
    release_pair(send, recv, &s, &r);
    if (rc < 0) return raise_status(rc, "baton.allreduce");
    Py_INCREF(recv);
    return recv;
}

static PyObject *py_allgather(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kws[] = {"send", "recv", "dtype", NULL};
    PyObject *send, *recv, *dto = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:allgather", kws, &send, &recv, &dto)) return NULL;
    baton_comm *c = need_comm();
    int dt;
    if (!c || get_dtype(dto, &dt) < 0) return NULL;
    if (send == recv) {
        PyErr_SetString(PyExc_ValueError, "baton.allgather: the output must be a different object (world x input)");
        return NULL;
    }
    arg_t s, r;
    if (get_pair(send, recv, dt, &s, &r) < 0) return NULL;
    size_t world = (size_t)baton_comm_size(c);
    if (r.count != s.count * world) {
        PyErr_Format(PyExc_ValueError, "baton.allgather: output has %zu elements, needs %zu (input %zu x world %zu)",
                     r.count, s.count * world, s.count, world);
        release_pair(send, recv, &s, &r);
        return NULL;
    }
    int rc;
    RUN(rc, baton_allgather(c, s.ptr, r.ptr, s.count, s.dt));
    release_pair(send, recv, &s, &r);
    if (rc < 0) return raise_status(rc, "baton.allgather");
    Py_INCREF(recv);
    return recv;
}

static PyObject *py_reduce_scatter(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kws[] = {"send", "recv", "op", "dtype", NULL};
    PyObject *send, *recv, *opo = NULL, *dto = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO:reduce_scatter", kws, &send, &recv, &opo, &dto)) return NULL;
    baton_comm *c = need_comm();
    baton_op op;
    int dt;
    if (!c || get_op(opo, &op) < 0 || get_dtype(dto, &dt) < 0) return NULL;
    if (send == recv) {
        PyErr_SetString(PyExc_ValueError, "baton.reduce_scatter: the output must be a different object (input / world)");
        return NULL;
    }
    arg_t s, r;
    if (get_pair(send, recv, dt, &s, &r) < 0) return NULL;
    size_t world = (size_t)baton_comm_size(c);
    if (s.count != r.count * world) {
        PyErr_Format(PyExc_ValueError, "baton.reduce_scatter: input has %zu elements, needs output %zu x world %zu",
                     s.count, r.count, world);
        release_pair(send, recv, &s, &r);
        return NULL;
    }
    int rc;
    RUN(rc, baton_reduce_scatter(c, s.ptr, r.ptr, r.count, s.dt, op));
    release_pair(send, recv, &s, &r);
    if (rc < 0) return raise_status(rc, "baton.reduce_scatter");
    Py_INCREF(recv);
    return recv;
}

static int get_root(baton_comm *c, int root) {
    if (root < 0 || root >= baton_comm_size(c)) {
        PyErr_Format(PyExc_ValueError, "baton.broadcast: root %d is not a rank (0..%d)", root, baton_comm_size(c) - 1);
        return -1;
    }
    return 0;
}

static PyObject *py_broadcast(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kws[] = {"buf", "root", "dtype", NULL};
    PyObject *buf, *dto = NULL;
    int root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iO:broadcast_", kws, &buf, &root, &dto)) return NULL;
    baton_comm *c = need_comm();
    int dt;
    if (!c || get_dtype(dto, &dt) < 0 || get_root(c, root) < 0) return NULL;
    arg_t b;
    if (get_arg(buf, "the tensor", 1, dt, &b) < 0) return NULL;
    int rc;
    RUN(rc, baton_broadcast(c, b.ptr, b.count, b.dt, root));
    arg_release(&b);
    if (rc < 0) return raise_status(rc, "baton.broadcast");
    Py_INCREF(buf);
    return buf;
}

static PyObject *py_barrier(PyObject *self, PyObject *args) {
    (void)self, (void)args;
    baton_comm *c = need_comm();
    if (!c) return NULL;
    int rc;
    RUN(rc, baton_barrier(c));
    if (rc < 0) return raise_status(rc, "baton.barrier");
    Py_RETURN_NONE;
}

/* ---- Handle: an asynchronous collective in flight ---- */

typedef struct {
    PyObject_HEAD
    baton_work *work; /* NULL once waited */
    arg_t s, r;
    int same;         /* in place: r shares s's view */
    PyObject *result; /* what wait() returns */
    int status;       /* the finished work's status once waited */
    int waiting;      /* a thread is inside baton_wait for this handle */
} HandleObject;

static void handle_release(HandleObject *h) {
    arg_release(&h->s);
    if (!h->same) arg_release(&h->r);
    memset(&h->r, 0, sizeof h->r);
}

static PyObject *handle_wait(HandleObject *h, PyObject *args) {
    (void)args;
    if (h->work) {
        /* baton_wait frees the work: only one thread may call it; it is taken under the GIL */
        baton_work *w = h->work;
        h->work = NULL;
        h->waiting = 1;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = baton_wait(w);
        Py_END_ALLOW_THREADS
        h->waiting = 0;
        h->status = rc;
        handle_release(h);
        if (rc < 0) return raise_status(rc, "baton: asynchronous collective");
    } else if (h->waiting) { /* another thread waits: wait for it to finish */
        while (h->waiting) {
            Py_BEGIN_ALLOW_THREADS
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
            Py_END_ALLOW_THREADS
        }
        if (h->status < 0) return raise_status(h->status, "baton: asynchronous collective");
    } else if (h->status < 0) {
        return raise_status(h->status, "baton: asynchronous collective");
    }
    Py_INCREF(h->result);
    return h->result;
}

static PyObject *handle_done(HandleObject *h, PyObject *args) {
    (void)args;
    if (h->waiting) Py_RETURN_FALSE;
    if (!h->work) Py_RETURN_TRUE;
    int done = 0, rc = baton_test(h->work, &done);
    if (rc < 0 || done) { /* finished (or failed): wait() returns at once and reports it */
        return PyBool_FromLong(1);
    }
    Py_RETURN_FALSE;
}

static void handle_dealloc(HandleObject *h) {
    if (h->work) { /* never waited: the library may still be using the memory */
        baton_work *w = h->work;
        Py_BEGIN_ALLOW_THREADS
        baton_wait(w);
        Py_END_ALLOW_THREADS
        h->work = NULL;
    }
    handle_release(h);
    Py_CLEAR(h->result);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyMethodDef handle_methods[] = {
    {"wait", (PyCFunction)handle_wait, METH_NOARGS, "Waits for the collective; returns its output or raises baton.Error."},
    {"done", (PyCFunction)handle_done, METH_NOARGS, "True once the collective has finished (wait() then returns at once)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "baton.Handle",
    .tp_basicsize = sizeof(HandleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An asynchronous collective in flight: wait() or done().",
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_methods = handle_methods,
};

static PyObject *new_handle(baton_work *w, arg_t *s, arg_t *r, int same, PyObject *result) {
    HandleObject *h = PyObject_New(HandleObject, &HandleType);
    if (!h) { /* cannot hand it out: finish it here */
        Py_BEGIN_ALLOW_THREADS
        baton_wait(w);
        Py_END_ALLOW_THREADS
        arg_release(s);
        if (!same) arg_release(r);
        return NULL;
    }
    h->work = w;
    h->s = *s;
    h->r = *r;
    h->same = same;
    h->status = 0;
    h->waiting = 0;
    Py_INCREF(result);
    h->result = result;
    return (PyObject *)h;
}

static PyObject *py_allreduce_async(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kws[] = {"send", "recv", "op", "dtype", NULL};
    PyObject *send, *recv, *opo = NULL, *dto = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO:allreduce_async", kws, &send, &recv, &opo, &dto)) return NULL;
    baton_comm *c = need_comm();
    baton_op op;
    int dt;
    if (!c || get_op(opo, &op) < 0 || get_dtype(dto, &dt) < 0) return NULL;
    arg_t s, r;
    if (get_pair(send, recv, dt, &s, &r) < 0) return NULL;
    if (s.count != r.count) {
        PyErr_Format(PyExc_ValueError, "baton.allreduce_async: input has %zu elements but output %zu", s.count, r.count);
        release_pair(send, recv, &s, &r);
        return NULL;
    }
    baton_work *w = NULL;
    int rc;
    RUN(rc, baton_allreduce_start(c, s.ptr, r.ptr, s.count, s.dt, op, &w));
    if (rc < 0) {
        release_pair(send, recv, &s, &r);
        return raise_status(rc, "baton.allreduce_async");
    }
    return new_handle(w, &s, &r, send == recv, recv);
}

static PyObject *py_broadcast_async(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kws[] = {"buf", "root", "dtype", NULL};
    PyObject *buf, *dto = NULL;
    int root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iO:broadcast_async_", kws, &buf, &root, &dto)) return NULL;
    baton_comm *c = need_comm();
    int dt;
    if (!c || get_dtype(dto, &dt) < 0 || get_root(c, root) < 0) return NULL;
    arg_t b, none;
    memset(&none, 0, sizeof none);
    if (get_arg(buf, "the tensor", 1, dt, &b) < 0) return NULL;
    baton_work *w = NULL;
    int rc;
    RUN(rc, baton_broadcast_start(c, b.ptr, b.count, b.dt, root, &w));
    if (rc < 0) {
        arg_release(&b);
        return raise_status(rc, "baton.broadcast_async_");
    }
    return new_handle(w, &b, &none, 0, buf);
}

/* ---- SharedBuffer: memory the node's ranks share; collectives on it skip baton's staging copy ---- */

typedef struct SharedBufferObject {
    PyObject_HEAD
    void *ptr;
    Py_ssize_t bytes;
    Py_ssize_t exports; /* live buffer views */
    struct SharedBufferObject *next, *prev; /* the live ones, for _owns (under the GIL) */
} SharedBufferObject;
static SharedBufferObject *g_sb_live;

static int sb_getbuffer(SharedBufferObject *b, Py_buffer *view, int flags) {
    if (PyBuffer_FillInfo(view, (PyObject *)b, b->ptr, b->bytes, 0, flags) < 0) return -1;
    b->exports++;
    return 0;
}
static void sb_releasebuffer(SharedBufferObject *b, Py_buffer *view) {
    (void)view;
    b->exports--;
}
static PyBufferProcs sb_as_buffer = {
    .bf_getbuffer = (getbufferproc)sb_getbuffer,
    .bf_releasebuffer = (releasebufferproc)sb_releasebuffer,
};

static void sb_dealloc(SharedBufferObject *b) {
    if (b->prev) b->prev->next = b->next;
    else if (g_sb_live == b) g_sb_live = b->next;
    if (b->next) b->next->prev = b->prev;
    if (b->ptr && g_comm) {
        baton_comm *c = g_comm;
        void *p = b->ptr;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&g_lock);
        baton_buffer_free(c, p);
        pthread_mutex_unlock(&g_lock);
        Py_END_ALLOW_THREADS
        b->ptr = NULL;
        if (--g_live_buffers == 0 && g_free_pending) free_comm();
    }
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyObject *sb_len(SharedBufferObject *b, PyObject *args) {
    (void)args;
    return PyLong_FromSsize_t(b->bytes);
}
static PyMethodDef sb_methods[] = {
    {"nbytes", (PyCFunction)sb_len, METH_NOARGS, "Size in bytes."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SharedBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "baton.SharedBuffer",
    .tp_basicsize = sizeof(SharedBufferObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory shared with the other ranks of this node (baton_buffer_alloc); view it with "
              "numpy.frombuffer or torch.frombuffer. Collective: every rank allocates the same size.",
    .tp_dealloc = (destructor)sb_dealloc,
    .tp_as_buffer = &sb_as_buffer,
    .tp_methods = sb_methods,
};

static PyObject *py_buffer(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n:buffer", &n)) return NULL;
    baton_comm *c = need_comm();
    if (!c) return NULL;
    if (n <= 0) {
        PyErr_SetString(PyExc_ValueError, "baton.buffer: the size must be a positive number of bytes");
        return NULL;
    }
    SharedBufferObject *b = PyObject_New(SharedBufferObject, &SharedBufferType);
    if (!b) return NULL;
    b->ptr = NULL;
    b->bytes = n;
    b->exports = 0;
    b->next = b->prev = NULL;
    void *p;
    RUN(p, baton_buffer_alloc(c, (size_t)n));
    if (!p) {
        Py_DECREF(b);
        return raise_status(BATON_ENOMEM, "baton.buffer");
    }
    b->ptr = p;
    g_live_buffers++;
    b->next = g_sb_live;
    if (g_sb_live) g_sb_live->prev = b;
    g_sb_live = b;
    return (PyObject *)b;
}

/* _attach(address, nbytes, fd): baton_buffer_attach (collective; fd -1 when this rank has nothing to attach).
 * baton.torch's process group attaches DDP's bucket storages once torch shares them through a file. */
static PyObject *py_attach(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long addr;
    Py_ssize_t n;
    int fd;
    if (!PyArg_ParseTuple(args, "Kni:_attach", &addr, &n, &fd)) return NULL;
    baton_comm *c = need_comm();
    if (!c) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "baton._attach: the size must not be negative");
        return NULL;
    }
    int rc;
    RUN(rc, baton_buffer_attach(c, (void *)(uintptr_t)addr, (size_t)n, fd));
    if (rc < 0) return raise_status(rc, "baton._attach");
    Py_RETURN_NONE;
}

/* _owns(address, nbytes): does [address, address + nbytes) overlap a live SharedBuffer (baton.buffer)? */
static PyObject *py_owns(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long addr;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Kn:_owns", &addr, &n)) return NULL;
    for (SharedBufferObject *b = g_sb_live; b; b = b->next) {
        uintptr_t lo = (uintptr_t)b->ptr, hi = lo + (uintptr_t)b->bytes;
        if ((uintptr_t)addr < hi && (uintptr_t)addr + (uintptr_t)n > lo) Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static PyObject *py_detach(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long addr;
    if (!PyArg_ParseTuple(args, "K:_detach", &addr)) return NULL;
    baton_comm *c = g_comm;
    if (c) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&g_lock);
        baton_buffer_detach(c, (void *)(uintptr_t)addr);
        pthread_mutex_unlock(&g_lock);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

/* baton.torch calls this once: torch.Tensor and {torch.float32: 0, ...}. */
static PyObject *py_register_torch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *type, *table;
    if (!PyArg_ParseTuple(args, "O!O!:_register_torch", &PyType_Type, &type, &PyDict_Type, &table)) return NULL;
    args_register_torch(type, table);
    Py_RETURN_NONE;
}

static PyObject *py_dtype_size(PyObject *self, PyObject *o) {
    (void)self;
    int dt;
    if (get_dtype(o, &dt) < 0) return NULL;
    if (dt < 0) {
        PyErr_SetString(PyExc_ValueError, "baton.dtype_size: give a dtype");
        return NULL;
    }
    return PyLong_FromSize_t(baton_dtype_size((baton_dtype)dt));
}

static PyMethodDef methods[] = {
    {"init", py_init, METH_NOARGS, "Joins the job (baton_init from the environment). Idempotent."},
    {"shutdown", py_shutdown, METH_NOARGS, "Frees the communicator (after the last shared buffer)."},
    {"is_initialized", py_is_initialized, METH_NOARGS, NULL},
    {"rank", py_rank, METH_NOARGS, NULL},
    {"size", py_size, METH_NOARGS, NULL},
    {"local_rank", py_local_rank, METH_NOARGS, NULL},
    {"local_size", py_local_size, METH_NOARGS, NULL},
    {"node_rank", py_node_rank, METH_NOARGS, NULL},
    {"num_nodes", py_num_nodes, METH_NOARGS, NULL},
    {"allreduce_into", (PyCFunction)(void (*)(void))py_allreduce, METH_VARARGS | METH_KEYWORDS,
     "allreduce_into(send, recv, op='sum', dtype=None): recv may be send (in place). Returns recv."},
    {"allgather_into", (PyCFunction)(void (*)(void))py_allgather, METH_VARARGS | METH_KEYWORDS,
     "allgather_into(send, recv, dtype=None): recv holds world x send, rank r's at r * len(send)."},
    {"reduce_scatter_into", (PyCFunction)(void (*)(void))py_reduce_scatter, METH_VARARGS | METH_KEYWORDS,
     "reduce_scatter_into(send, recv, op='sum', dtype=None): send holds world x recv."},
    {"broadcast_", (PyCFunction)(void (*)(void))py_broadcast, METH_VARARGS | METH_KEYWORDS,
     "broadcast_(buf, root=0, dtype=None): in place. Returns buf."},
    {"barrier", py_barrier, METH_NOARGS, NULL},
    {"allreduce_async_into", (PyCFunction)(void (*)(void))py_allreduce_async, METH_VARARGS | METH_KEYWORDS,
     "allreduce_async_into(send, recv, op='sum', dtype=None) -> Handle"},
    {"broadcast_async_", (PyCFunction)(void (*)(void))py_broadcast_async, METH_VARARGS | METH_KEYWORDS,
     "broadcast_async_(buf, root=0, dtype=None) -> Handle"},
    {"buffer", py_buffer, METH_VARARGS, "buffer(nbytes) -> SharedBuffer (collective: same size on every rank)"},
    {"dtype_size", py_dtype_size, METH_O, NULL},
    {"_register_torch", py_register_torch, METH_VARARGS, NULL},
    {"_attach", py_attach, METH_VARARGS, "_attach(address, nbytes, fd): baton_buffer_attach (collective)"},
    {"_owns", py_owns, METH_VARARGS, "_owns(address, nbytes): inside a live baton.buffer?"},
    {"_detach", py_detach, METH_VARARGS, "_detach(address): baton_buffer_detach"},
    {NULL, NULL, 0, NULL},
};

/* ---- the capsule baton._baton._capi (baton_capi.h): for baton.torch's C++ work layer ---- */

static int capi_allreduce_start(void *buf, size_t count, int dtype, int op, void **work) {
    if (dtype < 0 || dtype >= BATON_DTYPE_COUNT || op < 0 || op >= BATON_OP_COUNT) return BATON_EINVAL;
    pthread_mutex_lock(&g_lock);
    baton_comm *c = g_free_pending ? NULL : g_comm;
    baton_work *w = NULL;
    int rc = c ? baton_allreduce_start(c, buf, buf, count, (baton_dtype)dtype, (baton_op)op, &w) : BATON_EINVAL;
    pthread_mutex_unlock(&g_lock);
    *work = w;
    return rc;
}

static int capi_wait(void *work) { return baton_wait((baton_work *)work); }

static void capi_describe(int rc, const char *what, char *out, size_t len) {
    status_message(rc, what, out, len);
    size_t used = strlen(out);
    snprintf(out + used, len - used, " [%s]", baton_status_name(rc));
}

static const baton_capi g_capi = {BATON_CAPI_VERSION, capi_allreduce_start, capi_wait, capi_describe};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "baton._baton", "baton's collectives on Python buffers (see baton/__init__.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__baton(void) {
    if (PyType_Ready(&HandleType) < 0 || PyType_Ready(&SharedBufferType) < 0) return NULL;
    if (args_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    g_error = PyErr_NewExceptionWithDoc("baton.Error",
                                        "A failure reported by the baton library (dead rank, mismatch, timeout, ...). "
                                        "Attributes: status (e.g. 'BATON_EPEERDEAD') and code.",
                                        PyExc_RuntimeError, NULL);
    if (!g_error || PyModule_AddObjectRef(m, "Error", g_error) < 0 ||
        PyModule_AddObjectRef(m, "Handle", (PyObject *)&HandleType) < 0 ||
        PyModule_AddObjectRef(m, "SharedBuffer", (PyObject *)&SharedBufferType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *capi = PyCapsule_New((void *)&g_capi, BATON_CAPI_NAME, NULL);
    int added = capi ? PyModule_AddObjectRef(m, "_capi", capi) : -1;
    Py_XDECREF(capi);
    if (added < 0) {
        Py_DECREF(m);
        return NULL;
    }
    for (int d = 0; d < BATON_DTYPE_COUNT; d++) {
        char name[32];
        snprintf(name, sizeof name, "%s", baton_dtype_name((baton_dtype)d));
        for (char *p = name; *p; p++) *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        if (PyModule_AddIntConstant(m, name, d) < 0) { Py_DECREF(m); return NULL; }
    }
    for (int o = 0; o < BATON_OP_COUNT; o++) {
        char name[32];
        snprintf(name, sizeof name, "%s", baton_op_name((baton_op)o));
        for (char *p = name; *p; p++) *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        if (PyModule_AddIntConstant(m, name, o) < 0) { Py_DECREF(m); return NULL; }
    }
    return m;
}
