/* The `_mapguard` module: read-only maps of file ranges that a shrinking file cannot crash.
 *
 * Reading a page of a map that lies past the end of its file (the file was truncated after it
 * was mapped: rewritten by another process, or on a network file system) raises SIGBUS, whose
 * default action ends the process. The handler here owns the ranges of the maps it made: a
 * fault inside one maps zero pages over the rest of it, so the read goes on, and marks the map
 * faulted, for `io.mapguard` to turn into an error naming the file and tensor before a wrong
 * value is written. Every other SIGBUS goes to the handler that was there before (Python's
 * faulthandler, say), or to the default action, as if this one were not installed.
 *
 * The handler is installed with the first map. Where another handler has replaced it since,
 * no map is made (guard_map returns None): the caller then reads the bytes instead. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#define LP_MAPGUARD 1
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#else
#define LP_MAPGUARD 0
#endif

/* At most this many guarded maps live at once; past it, callers read instead of mapping. Well
 * below Linux's default limit of 65530 maps a process holds (a fault splits a map in two). */
#define GUARD_SLOTS 8192

#if LP_MAPGUARD
/* One map's range [start, end), whole pages; end 0 when the slot is free. The signal handler
 * reads the slots without a lock: a slot's end is written last when it is taken, first when
 * it is freed, and neither happens while the map can be read (a map is freed only once no
 * buffer of it is held). */
typedef struct {
    uintptr_t start, end;
    int faulted;
} Guard;

static Guard guards[GUARD_SLOTS];
static int used_slots = 0;             /* slots [0, used_slots) have been taken at some time */
static int free_slots[GUARD_SLOTS];    /* freed slots, to take again first (under the GIL) */
static int free_count = 0;
static unsigned long long faults = 0;  /* faults handled, ever */
static uintptr_t page_size = 0;
static int installed = 0;
static struct sigaction previous;      /* the handler this one passes other faults to */

/* The slot whose range holds `addr`, or -1; `*end_of` gets that range's end. A slot freed
 * and taken again while this reads it is seen with its end changed (a map's end is written
 * last when taken, first when freed), so start and end always belong to one map. */
static int guard_of(uintptr_t addr, uintptr_t *end_of) {
    int used = __atomic_load_n(&used_slots, __ATOMIC_ACQUIRE);
    for (int i = 0; i < used; i++) {
        uintptr_t end = __atomic_load_n(&guards[i].end, __ATOMIC_ACQUIRE);
        if (end == 0 || addr >= end) continue;
        uintptr_t start = __atomic_load_n(&guards[i].start, __ATOMIC_ACQUIRE);
        if (addr >= start && __atomic_load_n(&guards[i].end, __ATOMIC_ACQUIRE) == end) {
            *end_of = end;
            return i;
        }
    }
    return -1;
}

/* A SIGBUS this handler does not own, to the handler before it; where that was the default
 * action, it is restored and the fault happens again (a sent signal is sent again) under it. */
static void pass_on(int sig, siginfo_t *info, void *context) {
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, context);
        return;
    }
    if (previous.sa_handler == SIG_IGN && info->si_code <= 0) return;
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(sig, &fallback, NULL);
    if (info->si_code <= 0) raise(sig);
}

/* A fault inside a guarded map: zero pages over the map from the faulting page on (the file
 * ends before it, so it ends before every later page too), and the map marked faulted. */
static void on_sigbus(int sig, siginfo_t *info, void *context) {
    int saved_errno = errno;
    uintptr_t end = 0;
    int slot = info->si_code > 0 ? guard_of((uintptr_t)info->si_addr, &end) : -1;
    if (slot < 0) {
        pass_on(sig, info, context);
        errno = saved_errno;
        return;
    }
    /* recorded first: another thread that reads the zeros before this returns finds the
     * fault counted when it next checks */
    __atomic_store_n(&guards[slot].faulted, 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&faults, 1, __ATOMIC_RELEASE);
    uintptr_t from = (uintptr_t)info->si_addr & ~(page_size - 1);
    void *zeros = mmap((void *)from, (size_t)(end - from), PROT_READ,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (zeros == MAP_FAILED) pass_on(sig, info, context);
    errno = saved_errno;
}

/* Whether the handler is in place: installed now if it never was; 0 where another handler
 * has replaced it since. */
static int handler_in_place(void) {
    struct sigaction now;
    if (sigaction(SIGBUS, NULL, &now) != 0) return 0;
    if (installed) return (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_sigbus;
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = on_sigbus;
    mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&mine.sa_mask);
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    previous = now;  /* before ours is live: a fault on another thread meanwhile is passed on */
    if (sigaction(SIGBUS, &mine, NULL) != 0) return 0;
    installed = 1;
    return 1;
}

/* A free slot for [start, end), or -1 when all are taken. */
static int take_slot(uintptr_t start, uintptr_t end) {
    int slot;
    if (free_count > 0) slot = free_slots[--free_count];
    else if (used_slots < GUARD_SLOTS) slot = used_slots;
    else return -1;
    guards[slot].faulted = 0;
    __atomic_store_n(&guards[slot].start, start, __ATOMIC_RELAXED);
    __atomic_store_n(&guards[slot].end, end, __ATOMIC_RELEASE);
    if (slot == used_slots) __atomic_store_n(&used_slots, slot + 1, __ATOMIC_RELEASE);
    return slot;
}

static void free_slot(int slot) {
    __atomic_store_n(&guards[slot].end, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&guards[slot].start, 0, __ATOMIC_RELAXED);
    free_slots[free_count++] = slot;
}
#endif

/* A guarded map: its bytes by the buffer protocol (read-only), its length and its slices, as
 * an mmap has them. */
typedef struct {
    PyObject_HEAD
    void *base;
    Py_ssize_t length;
    int slot;
    PyObject *weakrefs;
} GuardedMap;

static int guarded_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    GuardedMap *map = (GuardedMap *)self;
    return PyBuffer_FillInfo(view, self, map->base, map->length, 1, flags);
}

/* Weak references are cleared before the slot is freed, so their callbacks may still ask
 * guard_faulted(slot) about this map. */
static void guarded_dealloc(PyObject *self) {
    GuardedMap *map = (GuardedMap *)self;
    if (map->weakrefs != NULL) PyObject_ClearWeakRefs(self);
#if LP_MAPGUARD
    if (map->base != NULL) {
        free_slot(map->slot);
        munmap(map->base, (size_t)map->length);
    }
#endif
    Py_TYPE(self)->tp_free(self);
}

static Py_ssize_t guarded_length(PyObject *self) {
    return ((GuardedMap *)self)->length;
}

/* map[i] as an int and map[a:b:c] as bytes, as an mmap reads. */
static PyObject *guarded_subscript(PyObject *self, PyObject *key) {
    GuardedMap *map = (GuardedMap *)self;
    const unsigned char *bytes = map->base;
    if (PyIndex_Check(key)) {
        Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) return NULL;
        if (i < 0) i += map->length;
        if (i < 0 || i >= map->length) {
            PyErr_Format(PyExc_IndexError, "expected an index below %zd", map->length);
            return NULL;
        }
        return PyLong_FromLong(bytes[i]);
    }
    if (!PySlice_Check(key)) {
        PyErr_Format(PyExc_TypeError, "expected an index or a slice, got %.100s",
                     Py_TYPE(key)->tp_name);
        return NULL;
    }
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
    Py_ssize_t n = PySlice_AdjustIndices(map->length, &start, &stop, step);
    if (step == 1) return PyBytes_FromStringAndSize((const char *)bytes + start, n);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL) return NULL;
    char *to = PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0; k < n; k++) to[k] = (char)bytes[start + k * step];
    return out;
}

static PyObject *guarded_slot(PyObject *self, void *closure) {
    return PyLong_FromLong(((GuardedMap *)self)->slot);
}

static PyBufferProcs guarded_buffer = {guarded_getbuffer, NULL};
static PyMappingMethods guarded_mapping = {guarded_length, guarded_subscript, NULL};
static PySequenceMethods guarded_sequence = {guarded_length};
static PyGetSetDef guarded_getset[] = {
    {"slot", guarded_slot, NULL, "The map's slot, for guard_faulted.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GuardedMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "lazyparams.io._mapguard.GuardedMap",
    .tp_basicsize = sizeof(GuardedMap),
    .tp_dealloc = guarded_dealloc,
    .tp_as_buffer = &guarded_buffer,
    .tp_as_mapping = &guarded_mapping,
    .tp_as_sequence = &guarded_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read-only map of a file range that reads as zeros past a shrunk file's end.",
    .tp_weaklistoffset = offsetof(GuardedMap, weakrefs),
    .tp_getset = guarded_getset,
};

static const char guard_map_doc[] =
    "guard_map(fd, offset, length): a guarded read-only map of `length` bytes at `offset` (a\n"
    "multiple of the page size) of the file `fd`; None where maps cannot be guarded here (no\n"
    "slot left, no room for another map, or another SIGBUS handler installed since the first\n"
    "map). OSError where the map fails otherwise.";

static PyObject *guard_map(PyObject *self, PyObject *args) {
    int fd;
    long long offset;
    Py_ssize_t length;
    if (!PyArg_ParseTuple(args, "iLn", &fd, &offset, &length)) return NULL;
#if LP_MAPGUARD
    if (!handler_in_place()) Py_RETURN_NONE;
    if (length <= 0 || offset < 0 || (uintptr_t)offset % page_size) {
        PyErr_Format(PyExc_ValueError,
                     "expected a positive length and an offset on a page boundary, got %zd "
                     "bytes at %lld",
                     length, offset);
        return NULL;
    }
    void *base = mmap(NULL, (size_t)length, PROT_READ, MAP_PRIVATE, fd, (off_t)offset);
    if (base == MAP_FAILED && errno == ENOMEM) Py_RETURN_NONE;  /* the caller reads instead */
    if (base == MAP_FAILED) return PyErr_SetFromErrno(PyExc_OSError);
    uintptr_t end = ((uintptr_t)base + (uintptr_t)length + page_size - 1) & ~(page_size - 1);
    int slot = take_slot((uintptr_t)base, end);
    GuardedMap *map = slot < 0 ? NULL : PyObject_New(GuardedMap, &GuardedMapType);
    if (map == NULL) {
        if (slot >= 0) free_slot(slot);
        munmap(base, (size_t)length);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    map->base = base;
    map->length = length;
    map->slot = slot;
    map->weakrefs = NULL;
    return (PyObject *)map;
#else
    Py_RETURN_NONE;
#endif
}

static PyObject *guard_faulted(PyObject *self, PyObject *arg) {
    long slot = PyLong_AsLong(arg);
    if (slot == -1 && PyErr_Occurred()) return NULL;
    if (slot < 0 || slot >= GUARD_SLOTS) {
        PyErr_Format(PyExc_ValueError, "expected a slot in [0, %d), got %ld", GUARD_SLOTS, slot);
        return NULL;
    }
#if LP_MAPGUARD
    return PyBool_FromLong(__atomic_load_n(&guards[slot].faulted, __ATOMIC_ACQUIRE));
#else
    Py_RETURN_FALSE;
#endif
}

static PyObject *guard_faults(PyObject *self, PyObject *unused) {
#if LP_MAPGUARD
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&faults, __ATOMIC_ACQUIRE));
#else
    return PyLong_FromLong(0);
#endif
}

static PyMethodDef guard_methods[] = {
    {"guard_map", guard_map, METH_VARARGS, guard_map_doc},
    {"guard_faulted", guard_faulted, METH_O,
     "guard_faulted(slot): whether a read of the guarded map in `slot` found its file shrunk."},
    {"guard_faults", guard_faults, METH_NOARGS,
     "guard_faults(): how many reads of guarded maps have found their file shrunk, ever."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_mapguard",
    "Guarded maps: file ranges whose pages read as zeros, not SIGBUS, past a shrunk file's end.",
    -1, guard_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__mapguard(void) {
    if (PyType_Ready(&GuardedMapType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&GuardedMapType);
    if (PyModule_AddObject(m, "GuardedMap", (PyObject *)&GuardedMapType) < 0) {
        Py_DECREF(&GuardedMapType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
