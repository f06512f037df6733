/* python/_baton_args.c: how the extension sees its arguments: ops and dtypes by name or number, and a
 * collective's buffer, a buffer-protocol object or a contiguous CPU torch.Tensor (read through data_ptr(), so
 * bf16 works though it has no numpy view), as (pointer, count, dtype) (_baton_args.h). */
#include "_baton_args.h"

#include <string.h>

static PyObject *g_tensor_type; /* torch.Tensor once baton.torch registered it, else NULL */
static PyObject *g_torch_dtypes; /* dict torch.dtype -> baton dtype number */
/* The tensor attributes read on every call, interned once (a lookup by a C string builds a new str each
 * time; these are the bulk of a small collective's cost from Python). */
static PyObject *s_is_cpu, *s_is_contiguous, *s_dtype, *s_data_ptr, *s_numel;

int args_init(void) {
    if (!(s_is_cpu = PyUnicode_InternFromString("is_cpu")) ||
        !(s_is_contiguous = PyUnicode_InternFromString("is_contiguous")) ||
        !(s_dtype = PyUnicode_InternFromString("dtype")) || !(s_data_ptr = PyUnicode_InternFromString("data_ptr")) ||
        !(s_numel = PyUnicode_InternFromString("numel")))
        return -1;
    return 0;
}

void args_register_torch(PyObject *tensor_type, PyObject *dtypes) {
    Py_INCREF(tensor_type);
    Py_INCREF(dtypes);
    Py_XSETREF(g_tensor_type, tensor_type);
    Py_XSETREF(g_torch_dtypes, dtypes);
}

/* ---- ops and dtypes: a str name ("sum", "bf16") or the number ---- */

static int parse_enum(PyObject *o, int count, int (*parse)(const char *, int *), const char *kind, int *out) {
    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v < 0 || v >= count) {
            PyErr_Format(PyExc_ValueError, "baton: %s %ld is out of range (0..%d)", kind, v, count - 1);
            return -1;
        }
        *out = (int)v;
        return 0;
    }
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "baton: %s must be a name or a number, not %.80s", kind, Py_TYPE(o)->tp_name);
        return -1;
    }
    const char *s = PyUnicode_AsUTF8(o);
    if (!s) return -1;
    if (parse(s, out) < 0) {
        PyErr_Format(PyExc_ValueError, "baton: %s", baton_last_error());
        return -1;
    }
    return 0;
}
static int op_parse_int(const char *s, int *out) {
    baton_op op;
    int rc = baton_op_parse(s, &op);
    *out = (int)op;
    return rc;
}
static int dtype_parse_int(const char *s, int *out) {
    baton_dtype dt;
    int rc = baton_dtype_parse(s, &dt);
    *out = (int)dt;
    return rc;
}
int get_op(PyObject *o, baton_op *op) {
    int v = BATON_SUM;
    if (o && o != Py_None && parse_enum(o, BATON_OP_COUNT, op_parse_int, "op", &v) < 0) return -1;
    *op = (baton_op)v;
    return 0;
}
int get_dtype(PyObject *o, int *dt) { /* -1: take it from the object */
    *dt = -1;
    if (!o || o == Py_None) return 0;
    return parse_enum(o, BATON_DTYPE_COUNT, dtype_parse_int, "dtype", dt);
}

/* ---- arguments: a buffer or a torch tensor, seen as (pointer, count, dtype) ---- */

void arg_release(arg_t *a) {
    if (a->has_view) PyBuffer_Release(&a->view);
    a->has_view = 0;
    Py_CLEAR(a->obj);
}

static int dtype_from_format(const char *fmt, Py_ssize_t itemsize, int *dt) {
    if (!fmt) fmt = "B";
    if (*fmt == '@' || *fmt == '=' || *fmt == '<') fmt++;
    if (fmt[0] && !fmt[1]) {
        switch (fmt[0]) {
        case 'f': if (itemsize == 4) { *dt = BATON_F32; return 0; } break;
        case 'd': if (itemsize == 8) { *dt = BATON_F64; return 0; } break;
        case 'e': if (itemsize == 2) { *dt = BATON_F16; return 0; } break;
        case 'i': case 'l': case 'q':
            if (itemsize == 4) { *dt = BATON_I32; return 0; }
            if (itemsize == 8) { *dt = BATON_I64; return 0; }
            break;
        default: break;
        }
    }
    return -1;
}

static int tensor_arg(PyObject *o, const char *what, int dt_override, arg_t *a) {
    PyObject *r = PyObject_GetAttr(o, s_is_cpu);
    if (!r) return -1;
    int cpu = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (cpu != 1) {
        if (cpu == 0) PyErr_Format(PyExc_ValueError, "baton: %s is not a CPU tensor; baton works on CPU memory (use .cpu())", what);
        return -1;
    }
    r = PyObject_CallMethodNoArgs(o, s_is_contiguous);
    if (!r) return -1;
    int contig = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (contig != 1) {
        if (contig == 0) PyErr_Format(PyExc_ValueError, "baton: %s is not contiguous; pass t.contiguous() (and copy back if you need it in place)", what);
        return -1;
    }
    r = PyObject_GetAttr(o, s_dtype);
    if (!r) return -1;
    PyObject *num = g_torch_dtypes ? PyDict_GetItemWithError(g_torch_dtypes, r) : NULL;
    if (!num) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "baton: %s has dtype %S; baton takes float32, float64, float16, bfloat16, int32, int64", what, r);
        Py_DECREF(r);
        return -1;
    }
    Py_DECREF(r);
    int dt = (int)PyLong_AsLong(num);
    if (dt_override >= 0 && baton_dtype_size((baton_dtype)dt_override) != baton_dtype_size((baton_dtype)dt)) {
        PyErr_Format(PyExc_ValueError, "baton: dtype=%s does not match %s's element size", baton_dtype_name((baton_dtype)dt_override), what);
        return -1;
    }
    if (dt_override >= 0) dt = dt_override;
    r = PyObject_CallMethodNoArgs(o, s_data_ptr);
    if (!r) return -1;
    a->ptr = PyLong_AsVoidPtr(r);
    Py_DECREF(r);
    r = PyObject_CallMethodNoArgs(o, s_numel);
    if (!r) return -1;
    a->count = (size_t)PyLong_AsSsize_t(r);
    Py_DECREF(r);
    if (PyErr_Occurred()) return -1;
    a->dt = (baton_dtype)dt;
    return 0;
}

/* writable: baton writes into this object (in-place or output), so a read-only buffer is refused. */
int get_arg(PyObject *o, const char *what, int writable, int dt_override, arg_t *a) {
    memset(a, 0, sizeof *a);
    if (g_tensor_type && PyObject_TypeCheck(o, (PyTypeObject *)g_tensor_type)) {
        if (tensor_arg(o, what, dt_override, a) < 0) return -1;
        Py_INCREF(o);
        a->obj = o;
        return 0;
    }
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, &a->view, flags) < 0) {
        if (!PyObject_CheckBuffer(o)) {
            PyErr_Format(PyExc_TypeError, "baton: %s must be a numpy array, a CPU torch tensor or another object "
                         "with the buffer protocol, not %.80s", what, Py_TYPE(o)->tp_name);
            return -1;
        }
        PyErr_Clear();
        Py_buffer probe;
        if (writable && PyObject_GetBuffer(o, &probe, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
            PyBuffer_Release(&probe);
            PyErr_Format(PyExc_ValueError, "baton: %s is read-only; baton writes into it (pass a writable copy)", what);
        } else {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "baton: %s is not C-contiguous; pass a contiguous copy "
                         "(numpy.ascontiguousarray) and copy back if you need it in place", what);
        }
        return -1;
    }
    a->has_view = 1;
    int dt = -1;
    if (dtype_from_format(a->view.format, a->view.itemsize, &dt) < 0) dt = -1;
    if (dt_override >= 0) {
        if ((size_t)a->view.itemsize != baton_dtype_size((baton_dtype)dt_override)) {
            PyErr_Format(PyExc_ValueError, "baton: dtype=%s needs %zu-byte elements but %s has %zd-byte ones",
                         baton_dtype_name((baton_dtype)dt_override), baton_dtype_size((baton_dtype)dt_override),
                         what, a->view.itemsize);
            PyBuffer_Release(&a->view);
            a->has_view = 0;
            return -1;
        }
        dt = dt_override;
    }
    if (dt < 0) {
        PyErr_Format(PyExc_TypeError, "baton: %s has element format '%s'; baton takes float32, float64, float16, "
                     "int32, int64 (bf16: pass uint16 data with dtype='bf16')", what, a->view.format ? a->view.format : "B");
        PyBuffer_Release(&a->view);
        a->has_view = 0;
        return -1;
    }
    a->ptr = a->view.buf;
    a->count = (size_t)(a->view.len / a->view.itemsize);
    a->dt = (baton_dtype)dt;
    Py_INCREF(o);
    a->obj = o;
    return 0;
}

/* send and recv of an out-of-place collective: same dtype; counts checked by the caller. */
int get_pair(PyObject *send, PyObject *recv, int dt_override, arg_t *s, arg_t *r) {
    if (send == recv) {
        if (get_arg(send, "the tensor", 1, dt_override, s) < 0) return -1;
        *r = *s;
        r->has_view = 0; /* s owns the view and the reference */
        return 0;
    }
    if (get_arg(send, "the input", 0, dt_override, s) < 0) return -1;
    if (get_arg(recv, "the output", 1, dt_override, r) < 0) {
        arg_release(s);
        return -1;
    }
    if (s->dt != r->dt) {
        PyErr_Format(PyExc_TypeError, "baton: input is %s but output is %s", baton_dtype_name(s->dt), baton_dtype_name(r->dt));
        arg_release(s);
        arg_release(r);
        return -1;
    }
    /* Two objects over the same memory: the very same range is in place; any other overlap is refused. */
    size_t es = baton_dtype_size(s->dt);
    const char *sp = s->ptr, *rp = r->ptr;
    if (s->count && r->count && sp != rp && sp < rp + r->count * es && rp < sp + s->count * es) {
        PyErr_SetString(PyExc_ValueError, "baton: the input and the output overlap in memory without being the same "
                        "range; pass separate arrays, or the same one for in place");
        arg_release(s);
        arg_release(r);
        return -1;
    }
    return 0;
}
void release_pair(PyObject *send, PyObject *recv, arg_t *s, arg_t *r) {
    arg_release(s);
    if (send != recv) arg_release(r);
}
