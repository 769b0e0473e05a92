/* Table lookups: out[i] = table[x[i]] for 1- and 2-byte codes and entries of 1, 2, 4 or 8
 * bytes, the conversions of the 1- and 2-byte floats that have no computed loop (tables those
 * libraries computed, bit for bit theirs). */
#include "native.h"

/* The entry of the code at `at` (codes, table and output may each start at any byte). */
#define ENTRY(S, T, at, table) LP_LOAD(T, (table) + LP_LOAD(S, at))

/* Table lookups. On little-endian CPUs, to entries narrower than eight bytes, eight codes at
 * a time, their entries gathered into 64-bit words so that each store writes eight bytes: the
 * stores of single narrow items, not the loads, bound the plain loop. */
#define PLAIN_LOOKUP(NAME, S, T)                                                               \
    LP_CLONES static void NAME(const S *x, T *out, const T *table, Py_ssize_t n) {           \
        for (Py_ssize_t i = 0; i < n; i++) LP_STORE(T, out + i, ENTRY(S, T, x + i, table));    \
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LOOKUP(NAME, S, T)                                                                     \
    LP_CLONES static void NAME(const S *x, T *out, const T *table, Py_ssize_t n) {           \
        const size_t per = 8 / sizeof(T);                                                      \
        Py_ssize_t i = 0;                                                                      \
        for (; i + 8 <= n; i += 8) {                                                           \
            uint64_t words[sizeof(T)];                                                         \
            for (size_t k = 0; k < sizeof(T); k++) {                                           \
                uint64_t w = 0;                                                                \
                for (size_t q = 0; q < per; q++) {                                             \
                    uint64_t e = ENTRY(S, T, x + i + k * per + q, table);                      \
                    w |= e << (8 * sizeof(T) * q);                                             \
                }                                                                              \
                words[k] = w;                                                                  \
            }                                                                                  \
            memcpy(out + i, words, sizeof words);                                              \
        }                                                                                      \
        for (; i < n; i++) LP_STORE(T, out + i, ENTRY(S, T, x + i, table));                    \
    }
#else
#define LOOKUP PLAIN_LOOKUP
#endif

LOOKUP(lookup_8_8, uint8_t, uint8_t)
LOOKUP(lookup_8_16, uint8_t, uint16_t)
LOOKUP(lookup_8_32, uint8_t, uint32_t)
PLAIN_LOOKUP(lookup_8_64, uint8_t, uint64_t)
LOOKUP(lookup_16_8, uint16_t, uint8_t)
LOOKUP(lookup_16_16, uint16_t, uint16_t)
LOOKUP(lookup_16_32, uint16_t, uint32_t)
PLAIN_LOOKUP(lookup_16_64, uint16_t, uint64_t)

#if LP_X86
/* Lookups to entries of 8 bytes with a large output: two entries a streamed 16-byte store,
 * after a head up to an aligned output (streaming halves their time: each line is written
 * without being read first). */
#define STREAMED_LOOKUP(NAME, PLAIN, S)                                                        \
    static void NAME(const S *x, uint64_t *out, const uint64_t *table, Py_ssize_t n,           \
                     Py_ssize_t head) {                                                        \
        Py_ssize_t i = head;                                                                   \
        PLAIN(x, out, table, head);                                                            \
        for (; i + 2 <= n; i += 2) {                                                           \
            __m128i v = _mm_set_epi64x((long long)ENTRY(S, uint64_t, x + i + 1, table),        \
                                       (long long)ENTRY(S, uint64_t, x + i, table));           \
            _mm_stream_si128((__m128i *)(out + i), v);                                         \
        }                                                                                      \
        _mm_sfence();                                                                          \
        PLAIN(x + i, out + i, table, n - i);                                                   \
    }

STREAMED_LOOKUP(lookup_8_64_streamed, lookup_8_64, uint8_t)
STREAMED_LOOKUP(lookup_16_64_streamed, lookup_16_64, uint16_t)
#endif

/* The lookup loop of an item size pair (the transposes' conversions use it too). */
void lp_lookup_run(const void *x, Py_ssize_t s, void *out, Py_ssize_t t, const void *table,
                       Py_ssize_t n) {
    if (s == 1) {
        if (t == 1) lookup_8_8(x, out, table, n);
        else if (t == 2) lookup_8_16(x, out, table, n);
        else if (t == 4) lookup_8_32(x, out, table, n);
        else lookup_8_64(x, out, table, n);
    } else {
        if (t == 1) lookup_16_8(x, out, table, n);
        else if (t == 2) lookup_16_16(x, out, table, n);
        else if (t == 4) lookup_16_32(x, out, table, n);
        else lookup_16_64(x, out, table, n);
    }
}

const char lp_lookup_doc[] = PyDoc_STR(
             "lookup(x, out, table): out[i] = table[x[i]] for 1-D `x` of 1- or 2-byte codes\n"
             "and a table of one entry per code, of out's item size (1, 2, 4 or 8 bytes).");

PyObject *lp_lookup(PyObject *self, PyObject *args) {
    PyObject *xo, *oo, *to;
    Buf b[3];
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "OOO", &xo, &oo, &to)) return NULL;
    Py_ssize_t n = lp_flat_pair(xo, oo, b, 0, 0);
    if (n < 0 || lp_get_buf(to, &b[2], 0, 1, b[1].view.itemsize, "table") < 0) {
        lp_release(b, 3);
        return NULL;
    }
    Py_ssize_t s = b[0].view.itemsize, t = b[1].view.itemsize;
    if ((s != 1 && s != 2) || (t != 1 && t != 2 && t != 4 && t != 8) ||
        b[2].view.shape[0] != ((Py_ssize_t)1 << (8 * s))) {
        lp_release(b, 3);
        PyErr_SetString(PyExc_ValueError, "expected 1- or 2-byte codes and a table of one "
                        "1-, 2-, 4- or 8-byte entry per code");
        return NULL;
    }
    const void *x = b[0].view.buf, *table = b[2].view.buf;
    void *out = b[1].view.buf;
    Py_ssize_t head = t == 8 ? lp_stream_head(out, 8, n) : -1;
    Py_BEGIN_ALLOW_THREADS
#if LP_X86
    if (lp_has_vbmi && s == 1 && t <= 2) lp_lookup8_512(x, out, t, table, n);
    else if (head >= 0 && s == 1) lookup_8_64_streamed(x, out, table, n, head);
    else if (head >= 0) lookup_16_64_streamed(x, out, table, n, head);
    else lp_lookup_run(x, s, out, t, table, n);
#else
    (void)head;
    lp_lookup_run(x, s, out, t, table, n);
#endif
    Py_END_ALLOW_THREADS
    lp_release(b, 3);
    Py_RETURN_NONE;
}
