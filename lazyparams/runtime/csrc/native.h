/* Shared declarations of the compiled loops behind `lazyparams.runtime` (the `_native`
 * extension): buffer arguments, bit casts, the CPU features the loops may use, and the Python
 * functions each source file defines. The other csrc files hold the loops (transpose*.c,
 * cast*.c, float8*.c, lookup.c, quantize.c, gguf_*.c); module.c the buffer helpers and the
 * module itself.
 *
 * Each loop fills buffers the caller allocated and runs without the GIL, so that worker
 * threads convert in parallel. `runtime/native.py` checks every argument (dtypes, shapes,
 * contiguity, alignment, overlap) before calling in; the checks in C only guard memory safety,
 * and the loops take buffers at any address (LP_LOAD). Results are bit-identical to numpy's
 * and ml_dtypes' own conversions.
 */
#ifndef LAZYPARAMS_NATIVE_H
#define LAZYPARAMS_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The rounding tricks (adding a power of two to round to a spacing) need float arithmetic in
 * float precision: x87 builds evaluate wider, so the extension is not built there and the
 * numpy loops do the work. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "lazyparams' compiled loops need FLT_EVAL_METHOD == 0"
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && \
    !defined(__clang__)
/* Hot loops get AVX-512 and AVX2 builds, one chosen at load time (through glibc's ifunc) by
 * what the CPU has. */
#if __GNUC__ >= 12
#define LP_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define LP_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#else
#define LP_CLONES
#endif

#if defined(__GNUC__) && defined(__x86_64__)
/* The float16 conversions of AVX2-era CPUs, used where the CPU has them. */
#define LP_X86 1
#include <immintrin.h>
#else
#define LP_X86 0
#endif

/* Whether the CPU has AVX2 and F16C; set once when the module loads. */
extern int lp_has_f16c;
/* Whether it also has AVX-512 F and BW, for the casts' widest loops; VBMI (the byte
 * permutes), for their lookups in registers; and BF16, for float16 to bfloat16. */
extern int lp_has_avx512, lp_has_vbmi, lp_has_bf16;

/* A buffer argument: the object's memory, its shape and byte strides. */
typedef struct {
    Py_buffer view;
    int held;
} Buf;

/* The buffer arguments, or -1 with an error naming the argument `what`: any buffer by
 * `flags`; one of rank `ndim` and items of `itemsize` bytes (any when 0) whose last axis is
 * contiguous; a C-contiguous one of `want_len` bytes. */
int lp_get_view(PyObject *obj, Buf *buf, int flags, const char *what);
int lp_get_buf(PyObject *obj, Buf *buf, int writable, int ndim, Py_ssize_t itemsize,
               const char *what);
int lp_get_contiguous(PyObject *obj, Buf *buf, int writable, Py_ssize_t want_len,
                      Py_ssize_t itemsize, const char *what);
void lp_release(Buf *bufs, int n);
Py_ssize_t lp_flat_pair(PyObject *xo, PyObject *oo, Buf *b, Py_ssize_t in_size,
                        Py_ssize_t out_size);
/* The index of `kind` among `count` `names`, or -1 with a ValueError "expected kind
 * <expected>, got '<kind>'". */
int lp_kind_index(const char *kind, const char *const *names, int count, const char *expected);
/* A family of casts `f(kind, x, out)`, or `f(kind, x, out, table)` where `table_len` is not
 * 0: its kinds' names, what an unknown kind's error says was expected, the input's item size,
 * each kind's output item size (the table's too: `table_len` entries) and the loop
 * `run(which, x, out, n, table)` of the kind at index `which`. */
typedef struct {
    const char *const *names;
    int count;
    const char *expected;
    Py_ssize_t in_size;
    const Py_ssize_t *out_sizes;
    Py_ssize_t table_len;
    void (*run)(int which, const void *x, void *out, Py_ssize_t n, const void *table);
} LpCastKinds;
/* The Python call of a family of casts: its arguments checked (x and out 1-D, of one length,
 * their item sizes the kind's), the kind's loop run without the GIL; None, or NULL with an
 * error set. */
PyObject *lp_cast_call(PyObject *args, const LpCastKinds *kinds);
/* The module's function `name`, with its docstring DOC: the casts of `kinds` (an LpCastKinds). */
#define LP_CAST_FUNCTION(name, kinds, DOC)                                                    \
    const char lp_##name##_doc[] = PyDoc_STR(DOC);                                            \
    PyObject *lp_##name(PyObject *self, PyObject *args) { return lp_cast_call(args, &kinds); }

static inline uint32_t f32_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static inline float bits_f32(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Items of the callers' buffers, read and written at any address: a view may start at any
 * byte, and a typed access off its type's alignment is undefined behaviour. LP_LOAD(T, p) is
 * the T at p; LP_STORE(T, p, v) writes v there (T one of the types below, as one token). GCC
 * and Clang go through T declared 1-byte aligned: the same plain move, and still a T to alias
 * analysis, so the loops compile as before (through memcpy an access reads as char: every
 * store could then alias every load, and loops would gain run-time overlap checks). Other
 * compilers copy by memcpy, which they turn into the same move. */
#if defined(__GNUC__)
#define LP_ANY_ADDRESS(T)                                                                      \
    typedef T lp_any_##T __attribute__((aligned(1)));                                          \
    static inline T lp_load_##T(const void *p) { return *(const lp_any_##T *)p; }              \
    static inline void lp_store_##T(void *p, T v) { *(lp_any_##T *)p = v; }
#else
#define LP_ANY_ADDRESS(T)                                                                      \
    static inline T lp_load_##T(const void *p) {                                               \
        T v;                                                                                   \
        memcpy(&v, p, sizeof v);                                                               \
        return v;                                                                              \
    }                                                                                          \
    static inline void lp_store_##T(void *p, T v) { memcpy(p, &v, sizeof v); }
#endif
LP_ANY_ADDRESS(uint8_t)
LP_ANY_ADDRESS(uint16_t)
LP_ANY_ADDRESS(uint32_t)
LP_ANY_ADDRESS(uint64_t)
LP_ANY_ADDRESS(float)
#define LP_LOAD(T, p) lp_load_##T(p)
#define LP_STORE(T, p, v) lp_store_##T(p, v)

/* A conversion of runs of elements, as the transposes apply it while they gather a tile:
 * `kind` is one of LP_CONVERT_NAMES (0: a plain copy), `table` the entry of every code for
 * the table lookup of 1- and 2-byte sources. cast.c defines them. */
typedef struct {
    int kind;
    const void *table;
} LpConvert;

#define LP_CONVERT_COPY 0
#define LP_CONVERT_BF16_F16 6 /* "bfloat16>float16": streamed transposes convert it as they stage */
#define LP_CONVERT_LOOKUP 9 /* this kind and the float8 ones after it read `table` */
#define LP_CONVERT_KINDS 12
extern const char *const LP_CONVERT_NAMES[LP_CONVERT_KINDS];
int lp_convert_kind(const char *name);
void lp_convert(const LpConvert *conv, const void *x, Py_ssize_t in_size, void *out,
                Py_ssize_t out_size, Py_ssize_t n);
/* out[i] = table[x[i]] for `n` codes of `s` bytes and entries of `t` bytes (lookup.c). */
void lp_lookup_run(const void *x, Py_ssize_t s, void *out, Py_ssize_t t, const void *table,
                   Py_ssize_t n);

/* The cast `NAME(x, out, n)` from S to T: by the vector loop VEC where the CPU has it (HAS),
 * else (and off x86) by `NAME##_portable`. */
#if LP_X86
#define LP_PICK_CAST(NAME, S, T, HAS, VEC)                                                    \
    static void NAME(const S *x, T *out, Py_ssize_t n) {                                      \
        if (HAS) VEC(x, out, n);                                                              \
        else NAME##_portable(x, out, n);                                                      \
    }
#else
#define LP_PICK_CAST(NAME, S, T, HAS, VEC)                                                    \
    static void NAME(const S *x, T *out, Py_ssize_t n) { NAME##_portable(x, out, n); }
#endif

/* The casts' vector loops store an output of LP_CAST_STREAM_BYTES or more around the cache,
 * as the transposes do theirs (native.STREAM_BYTES): it could not stay there anyway, and
 * streamed stores skip reading each line before writing it. Runs of the transposes'
 * conversions are far shorter, and stay in the cache. */
#define LP_CAST_STREAM_BYTES ((Py_ssize_t)8 << 20)

/* How far ahead of their reads the casts' vector loops prefetch their input: the hardware's
 * prefetcher alone leaves them waiting on memory between its bursts. */
#define LP_CAST_PREFETCH_BYTES 2048

/* Elements a cast writing `n` items of `size` bytes at `out` does before its output reaches a
 * 32-byte boundary, from where it streams; -1 where it stores through the cache. */
static inline Py_ssize_t lp_stream_head(const void *out, Py_ssize_t size, Py_ssize_t n) {
    if (n * size < LP_CAST_STREAM_BYTES || (uintptr_t)out % (uintptr_t)size) return -1;
    return (Py_ssize_t)((32 - (uintptr_t)out % 32) % 32) / size;
}

#if LP_X86
/* A vector store of a cast's loop, streamed (to an aligned address) or through the cache;
 * `stream` is a constant where the loop is inlined. */
__attribute__((target("avx2"), always_inline)) static inline void lp_put32(void *p, __m256i v,
                                                                         const int stream) {
    if (stream) _mm256_stream_si256((__m256i *)p, v);
    else _mm256_storeu_si256((__m256i *)p, v);
}

/* The float8 rounding of float32 magnitudes `mag` in 32-bit lanes of VEC (W bits wide,
 * intrinsics PRE##_..., the function's attributes ATTR), to a format of `man` mantissa bits
 * and exponent bias `bias`, half to even: NAME returns each lane's code as a normal (rebiased
 * and rounded in one add), and sets *sub to it as a subnormal (by adding the power of two whose
 * float32 spacing is the format's subnormal step). float8.c's AVX2 loops and cast64.c's
 * AVX-512 ones share it. */
#define LP_FLOAT8_ROUNDING(NAME, ATTR, VEC, PRE, W)                                           \
    ATTR static inline __attribute__((always_inline)) VEC NAME(VEC mag, const int man,        \
                                                               const int bias, VEC *sub) {    \
        const int shift = 23 - man;                                                           \
        VEC odd = PRE##_and_si##W(PRE##_srli_epi32(mag, shift), PRE##_set1_epi32(1));         \
        VEC bump = PRE##_set1_epi32(                                                          \
            (int)(((uint32_t)(bias - 127) << 23) + ((1u << (shift - 1)) - 1u)));              \
        VEC magic = PRE##_set1_epi32((1 - bias - man + 23 + 127) << 23);                      \
        VEC sum = PRE##_castps_si##W(                                                         \
            PRE##_add_ps(PRE##_castsi##W##_ps(mag), PRE##_castsi##W##_ps(magic)));            \
        *sub = PRE##_sub_epi32(sum, magic);                                                   \
        return PRE##_srli_epi32(PRE##_add_epi32(PRE##_add_epi32(mag, bump), odd), shift);     \
    }

/* The body of a cast's vector run (in a function of `x`, `out`, `n` and a constant `stream`
 * that returns the elements it did): COUNT elements a step, STEP(x, i, v) converting those
 * from x + i into the vectors v (32 bytes of output each) and returning whether one needs
 * the element loop's rules (a NaN the CPU's conversions would change), REDO(x + i, redo,
 * COUNT) then giving the outputs element by element. The stores stream where `stream`. */
#define LP_CAST_STEPS(COUNT, STEP, REDO)                                                     \
    _Static_assert((COUNT) * sizeof *out % 32 == 0, "a step's outputs fill whole vectors");   \
    Py_ssize_t i = 0;                                                                         \
    for (; i + (COUNT) <= n; i += (COUNT)) {                                                  \
        __m256i v[(COUNT) * sizeof *out / 32];                                                \
        if (STEP(x, i, v)) {                                                                  \
            __typeof__(*out) redo[COUNT];                                                     \
            REDO(x + i, redo, COUNT);                                                         \
            memcpy(v, redo, sizeof redo);                                                     \
        }                                                                                     \
        for (size_t q = 0; q < sizeof v / 32; q++) {                                          \
            lp_put32(out + i + q * 32 / sizeof *out, v[q], stream);                           \
        }                                                                                     \
    }                                                                                         \
    return i

/* The body of a cast of `n` elements from `x` to `out` by its vector run RUN(x, out, n,
 * stream) (returning the elements it did) and its element loop REST(x, out, n): where the
 * output is large, REST does the elements before the first aligned output and RUN streams
 * its stores from there; elsewhere RUN stores through the cache. REST does the tail. */
#define LP_STREAMED_CAST(x, out, n, RUN, REST)                                                \
    do {                                                                                      \
        Py_ssize_t head_ = lp_stream_head(out, sizeof *(out), n), done_;                      \
        if (head_ >= 0) {                                                                     \
            REST(x, out, head_);                                                              \
            done_ = head_ + RUN((x) + head_, (out) + head_, (n) - head_, 1);                  \
            _mm_sfence();                                                                     \
        } else {                                                                              \
            done_ = RUN(x, out, n, 0);                                                        \
        }                                                                                     \
        REST((x) + done_, (out) + done_, (n) - done_);                                        \
    } while (0)
#endif

/* The float8 loops of float8.c: float32 to float8_e4m3fn (`finite`), else float8_e5m2; the
 * casts from float8 codes by kind (cast8's, their output item sizes LP_CAST8_SIZES), `table`
 * the target's bits of every code. */
void lp_f32_to_float8(const uint32_t *x, uint8_t *out, Py_ssize_t n, int finite);
extern const Py_ssize_t LP_CAST8_SIZES[8];
void lp_float8_cast(int which, const void *x, void *out, Py_ssize_t n, const void *table);
/* `n` values to a float8 format through float32, a block at a time in a buffer that stays in
 * the first-level cache: widen(x, wide, m) gives the float32 bits of m values from x, items
 * of `size` bytes. */
void lp_float8_by_blocks(const void *x, Py_ssize_t size, uint8_t *out, Py_ssize_t n, int finite,
                         void (*widen)(const void *x, uint32_t *wide, Py_ssize_t m));
/* float16 (`half`) or bfloat16 to a float8 in 16-bit lanes (float8_half.c; AVX2 only, called
 * where lp_has_f16c). */
void lp_half_to_float8_f16c(const uint16_t *x, uint8_t *out, Py_ssize_t n, int half,
                            int finite);

/* The AVX-512 loops of cast512.c: out[i] = table[x[i]] for byte codes and entries of `t` (1
 * or 2) bytes (only where lp_has_vbmi); float16 (`half`) or bfloat16 to a float8 (where
 * lp_has_avx512); float16 to bfloat16 (where lp_has_bf16). */
void lp_lookup8_512(const uint8_t *x, void *out, Py_ssize_t t, const void *table, Py_ssize_t n);
void lp_half_to_float8_512(const uint16_t *x, uint8_t *out, Py_ssize_t n, int half, int finite);
void lp_half_to_bfloat_512(const uint16_t *x, uint16_t *out, Py_ssize_t n);

/* The module's functions f(*args), `lp_<name>` each, with the docstring `lp_<name>_doc`. */
#define LP_FUNCTIONS(F)                                                                       \
    F(transpose2d)                 /* transpose.c */                                          \
    F(cast) F(cast16)              /* cast.c */                                               \
    F(cast8)                       /* float8.c */                                             \
    F(cast64)                      /* cast64.c */                                             \
    F(lookup)                      /* lookup.c */                                             \
    F(quantize_int8) F(quantize_int4)         /* quantize.c */                                \
    F(quantize_legacy) F(dequantize_legacy)   /* gguf_legacy.c */                             \
    F(quantize_gguf_k) F(dequantize_gguf_k)   /* gguf_kquants.c */
#define LP_DECLARE(name)                                                                      \
    PyObject *lp_##name(PyObject *self, PyObject *args);                                      \
    extern const char lp_##name##_doc[];
LP_FUNCTIONS(LP_DECLARE)
/* transpose_stream.c's, of one argument */
PyObject *lp_transpose_path(PyObject *self, PyObject *arg);
extern const char lp_transpose_path_doc[];
void lp_half_to_double(const uint16_t *x, uint64_t *out, Py_ssize_t n); /* cast64.c */

/* Whether transpose2d has its blocked loops here (SSE2); without them it would be slower than
 * the numpy tiles, and the Python side declines. */
#if defined(__SSE2__)
#define LP_BLOCKED_TRANSPOSE 1
#else
#define LP_BLOCKED_TRANSPOSE 0
#endif

#endif
