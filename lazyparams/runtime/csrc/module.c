/* The `_native` module: its buffer-argument helpers, its function table and its start-up
 * (CPU feature detection). The loops live in the other csrc files: the transposes in
 * transpose*.c, the casts in cast*.c, float8.c and lookup.c, the quantizers in quantize.c and
 * gguf_*.c. */
#include "native.h"

int lp_has_f16c = 0;
static int cpu_has_f16c = 0; /* what the CPU has; lp_has_f16c is what the loops use */
int lp_has_avx512 = 0, lp_has_vbmi = 0, lp_has_bf16 = 0;
/* what the CPU has (AVX-512 F and BW; VBMI; BF16), and whether tests let the loops use them */
static int cpu_has_avx512 = 0, cpu_has_vbmi = 0, cpu_has_bf16 = 0, want_avx512 = 1;

/* The AVX-512 flags the loops read, from what the CPU has and what is allowed. */
static void set_avx512(void) {
    lp_has_avx512 = want_avx512 && lp_has_f16c && cpu_has_avx512;
    lp_has_vbmi = lp_has_avx512 && cpu_has_vbmi;
    lp_has_bf16 = lp_has_avx512 && cpu_has_bf16;
}

/* `obj`'s buffer by the buffer protocol's `flags`; where it has none such (not a buffer,
 * read-only, not contiguous), the protocol's error, of its type, says which argument. */
int lp_get_view(PyObject *obj, Buf *buf, int flags, const char *what) {
    if (PyObject_GetBuffer(obj, &buf->view, flags) == 0) {
        buf->held = 1;
        return 0;
    }
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyErr_NormalizeException(&type, &value, &trace);
    const char *writable = flags & PyBUF_WRITABLE ? "writable " : "";
    const char *contiguous = (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS ? "C-contiguous "
                                                                                : "";
    PyErr_Format(type != NULL ? type : PyExc_TypeError, "expected %s as a %s%sbuffer (%S)", what,
                 writable, contiguous, value != NULL ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
    return -1;
}

/* A ValueError unless `buf`'s items are of `itemsize` bytes (any when 0). */
static int check_itemsize(const Buf *buf, Py_ssize_t itemsize, const char *what) {
    if (itemsize && buf->view.itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "expected %s of %zd-byte items, got %zd-byte items", what,
                     itemsize, buf->view.itemsize);
        return -1;
    }
    return 0;
}

/* `obj`'s buffer of rank `ndim` and item size `itemsize` (any when 0), rows possibly strided
 * but elements within a row adjacent. */
int lp_get_buf(PyObject *obj, Buf *buf, int writable, int ndim, Py_ssize_t itemsize,
               const char *what) {
    int flags = PyBUF_STRIDES | (writable ? PyBUF_WRITABLE : 0);
    if (lp_get_view(obj, buf, flags, what) < 0) return -1;
    if (buf->view.ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "expected %s of rank %d, got rank %d", what, ndim,
                     buf->view.ndim);
        return -1;
    }
    if (check_itemsize(buf, itemsize, what) < 0) return -1;
    if (ndim > 0 && buf->view.shape[ndim - 1] > 1 &&
        buf->view.strides[ndim - 1] != buf->view.itemsize) {
        PyErr_Format(PyExc_ValueError, "expected %s with adjacent elements in its last axis",
                     what);
        return -1;
    }
    return 0;
}

/* `obj`'s C-contiguous buffer of items of `itemsize` bytes (any when 0), of exactly
 * `want_len` bytes. */
int lp_get_contiguous(PyObject *obj, Buf *buf, int writable, Py_ssize_t want_len,
                      Py_ssize_t itemsize, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (lp_get_view(obj, buf, flags, what) < 0 || check_itemsize(buf, itemsize, what) < 0) {
        return -1;
    }
    if (buf->view.len != want_len) {
        PyErr_Format(PyExc_ValueError, "expected %s of %zd bytes, got %zd", what, want_len,
                     buf->view.len);
        return -1;
    }
    return 0;
}

void lp_release(Buf *bufs, int n) {
    for (int i = 0; i < n; i++) {
        if (bufs[i].held) {
            PyBuffer_Release(&bufs[i].view);
            bufs[i].held = 0;
        }
    }
}

/* The index of `kind` among `count` `names`; -1 with a ValueError naming what was `expected`
 * where it is none of them. */
int lp_kind_index(const char *kind, const char *const *names, int count, const char *expected) {
    for (int i = 0; i < count; i++) {
        if (strcmp(kind, names[i]) == 0) return i;
    }
    PyErr_Format(PyExc_ValueError, "expected kind %s, got '%s'", expected, kind);
    return -1;
}

/* The element count of two 1-D buffers of one length (item sizes as given, any when 0), or
 * -1 with an error set. */
Py_ssize_t lp_flat_pair(PyObject *xo, PyObject *oo, Buf *b, Py_ssize_t in_size,
                        Py_ssize_t out_size) {
    if (lp_get_buf(xo, &b[0], 0, 1, in_size, "x") < 0 ||
        lp_get_buf(oo, &b[1], 1, 1, out_size, "out") < 0) {
        return -1;
    }
    if (b[0].view.shape[0] != b[1].view.shape[0]) {
        PyErr_SetString(PyExc_ValueError, "expected out of the input's length");
        return -1;
    }
    return b[0].view.shape[0];
}

PyObject *lp_cast_call(PyObject *args, const LpCastKinds *kinds) {
    const char *kind;
    PyObject *xo, *oo, *to = NULL;
    Buf b[3];
    memset(b, 0, sizeof b);
    const char *format = kinds->table_len ? "sOOO" : "sOO";
    if (!PyArg_ParseTuple(args, format, &kind, &xo, &oo, &to)) return NULL;
    int which = lp_kind_index(kind, kinds->names, kinds->count, kinds->expected);
    if (which < 0) return NULL;
    Py_ssize_t size = kinds->out_sizes[which], n = lp_flat_pair(xo, oo, b, kinds->in_size, size);
    if (n >= 0 && to != NULL && (lp_get_buf(to, &b[2], 0, 1, size, "table") < 0 ||
                                 b[2].view.shape[0] != kinds->table_len)) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "expected a table of %zd codes", kinds->table_len);
        }
        n = -1;
    }
    if (n >= 0) {
        const void *x = b[0].view.buf, *table = b[2].view.buf;
        void *out = b[1].view.buf;
        Py_BEGIN_ALLOW_THREADS
        kinds->run(which, x, out, n, table);
        Py_END_ALLOW_THREADS
    }
    lp_release(b, 3);
    if (n < 0) return NULL;
    Py_RETURN_NONE;
}

/* use_f16c(on): let the loops use the CPU's float16 conversions (where it has them) or only
 * the portable loops, for tests of both; returns whether they were in use. */
static PyObject *use_f16c(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    int before = lp_has_f16c;
    lp_has_f16c = on && cpu_has_f16c;
    set_avx512();
    return PyBool_FromLong(before);
}

/* use_avx512(on): let the casts and transposes use their AVX-512 loops (where the CPU has
 * AVX-512 F and BW, and VBMI for the lookups, and the float16 conversions are in use) or stop
 * at their AVX2 ones, so that tests on such a CPU run both; returns whether they were wanted. */
static PyObject *use_avx512(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    int before = want_avx512;
    want_avx512 = on;
    set_avx512();
    return PyBool_FromLong(before);
}

#define LP_METHOD(name) {#name, lp_##name, METH_VARARGS, lp_##name##_doc},
static PyMethodDef methods[] = {
    LP_FUNCTIONS(LP_METHOD)
    {"transpose_path", lp_transpose_path, METH_O, lp_transpose_path_doc},
    {"use_f16c", use_f16c, METH_O, "use_f16c(on): use the CPU's float16 conversions or not."},
    {"use_avx512", use_avx512, METH_O, "use_avx512(on): use the AVX-512 loops or not."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "Compiled loops behind lazyparams' layout, cast and quantization kernels.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
#if LP_X86
    __builtin_cpu_init();
    cpu_has_f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    lp_has_f16c = cpu_has_f16c;
    cpu_has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    cpu_has_vbmi = cpu_has_avx512 && __builtin_cpu_supports("avx512vbmi");
    cpu_has_bf16 = cpu_has_avx512 && __builtin_cpu_supports("avx512bf16");
    set_avx512();
#endif
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "BLOCKED_TRANSPOSE", LP_BLOCKED_TRANSPOSE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
