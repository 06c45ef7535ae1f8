/* MDLoader's compiled batch kernels: the per-record and per-key work of building a batch, run
 * with the GIL released (mdloader_plugin/records/kernels.py is the Python face; every caller has
 * a numpy fallback that gives the same bytes).
 *
 *   copy_records(src, src_off, nbytes, dst, dst_off)     records -> one buffer (memcpy each)
 *   scan(buf, starts, limits, axes, pay, cnt, ext)       every header checked against record 0's;
 *                                                         payload offsets, element counts and
 *                                                         extents along the joined axis
 *   join(buf, pay, cnt, ext, k, K, lead, itemsize, out)  key k of every record joined
 *   shift(arr, code, ext, inc, lead)                     index key: + nodes of earlier graphs
 *   repeat(counts, out)                                  batch vector: i repeated counts[i] times
 *   fill(buf, pay, cnt, ext, leads, outs, shift, node,   all of a batch's keys joined, slice
 *        slices, batch)                                  tables, batch vector, index shifts
 *   feistel(x, out, keys, left, right, n, inverse)       the `feistel` epoch order at positions
 *                                                         x (or its inverse at ids x), uint64
 *
 * Arrays are passed as buffers (C-contiguous); int64 where not said. A check that fails returns
 * a non-zero code (and the record and key it failed at); nothing is written past a bound.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAGIC "MDLG"
#define VERSION 1
#define FIXED 16
#define ENTRY 8
#define NCODES 14
static const int ITEMSIZE[NCODES] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8, 8, 16};

typedef struct {
    Py_buffer b;
    int held;
} Buf;

static int get_buf(PyObject *o, Buf *out, int writable, Py_ssize_t itemsize, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    out->held = 0;
    if (PyObject_GetBuffer(o, &out->b, flags) < 0) return -1;
    out->held = 1;
    if (itemsize > 1 && out->b.itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes, got %zd", what, itemsize,
                     out->b.itemsize);
        return -1;
    }
    return 0;
}

static void release(Buf *bs, int n) {
    for (int i = 0; i < n; i++)
        if (bs[i].held) PyBuffer_Release(&bs[i].b);
}

static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline int64_t rd64(const uint8_t *p) { int64_t v; memcpy(&v, p, 8); return v; }

/* copy_records(src, src_off, nbytes, dst, dst_off) -> 0, or 1 when a record is out of bounds */
static PyObject *k_gather(PyObject *self, PyObject *args) {
    PyObject *o[5];
    Buf b[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    memset(b, 0, sizeof b);
    if (get_buf(o[0], &b[0], 0, 1, "src") || get_buf(o[1], &b[1], 0, 8, "src_off") ||
        get_buf(o[2], &b[2], 0, 8, "nbytes") || get_buf(o[3], &b[3], 1, 1, "dst") ||
        get_buf(o[4], &b[4], 0, 8, "dst_off")) {
        release(b, 5);
        return NULL;
    }
    Py_ssize_t n = b[1].b.len / 8;
    int bad = b[2].b.len / 8 != n || b[4].b.len / 8 != n;
    const uint8_t *src = b[0].b.buf;
    uint8_t *dst = b[3].b.buf;
    const int64_t *so = b[1].b.buf, *nb = b[2].b.buf, *dof = b[4].b.buf;
    Py_ssize_t slen = b[0].b.len, dlen = b[3].b.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !bad; i++)
        if (so[i] < 0 || nb[i] < 0 || dof[i] < 0 || so[i] > slen - nb[i] || dof[i] > dlen - nb[i])
            bad = 1;
    if (!bad)
        for (Py_ssize_t i = 0; i < n; i++) memcpy(dst + dof[i], src + so[i], (size_t)nb[i]);
    Py_END_ALLOW_THREADS
    release(b, 5);
    return PyLong_FromLong(bad);
}

/* scan(buf, starts, limits, axes, pay, cnt, ext) -> (code, record, key)
 * code 0: every record has record 0's schema (names, dtype codes, ranks, header length) and
 * shape off the joined axis, and every payload lies inside its record; pay[i*K+k] is the byte
 * offset of record i's key k in buf, cnt its element count, ext its extent along axes[k] (1 for
 * a 0-d key), all three [K, n] (key-major). code 1: a header or bound is bad; 2: the schema differs; 3: a shape off the
 * joined axis differs. */
static PyObject *k_scan(PyObject *self, PyObject *args) {
    PyObject *o[7];
    Buf b[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    memset(b, 0, sizeof b);
    if (get_buf(o[0], &b[0], 0, 1, "buf") || get_buf(o[1], &b[1], 0, 8, "starts") ||
        get_buf(o[2], &b[2], 0, 8, "limits") || get_buf(o[3], &b[3], 0, 8, "axes") ||
        get_buf(o[4], &b[4], 1, 8, "pay") || get_buf(o[5], &b[5], 1, 8, "cnt") ||
        get_buf(o[6], &b[6], 1, 8, "ext")) {
        release(b, 7);
        return NULL;
    }
    const uint8_t *buf = b[0].b.buf;
    int64_t blen = b[0].b.len;
    Py_ssize_t n = b[1].b.len / 8, K = b[3].b.len / 8;
    const int64_t *starts = b[1].b.buf, *limits = b[2].b.buf, *axes = b[3].b.buf;
    int64_t *pay = b[4].b.buf, *cnt = b[5].b.buf, *ext = b[6].b.buf;
    long code = 0, rec = -1, key = -1;
    if (b[2].b.len / 8 != n || b[4].b.len / 8 != n * K || b[5].b.len / 8 != n * K ||
        b[6].b.len / 8 != n * K || n == 0 || K > 255) {
        release(b, 7);
        PyErr_SetString(PyExc_ValueError, "scan: table sizes do not match");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *r0 = NULL;
    uint32_t head0 = 0;
    for (Py_ssize_t i = 0; i < n && !code; i++) {
        int64_t s = starts[i], lim = limits[i];
        rec = (long)i;
        key = -1;
        if (s < 0 || lim < FIXED || s > blen - lim) { code = 1; break; }
        const uint8_t *r = buf + s;
        uint32_t head = rd32(r + 8), total = rd32(r + 12);
        if (memcmp(r, MAGIC, 4) || r[4] != VERSION || r[5] != K || head > total ||
            (int64_t)total > lim) { code = 1; break; }
        if (i == 0) { r0 = r; head0 = head; }
        else if (head != head0) { code = 2; break; }
        int64_t pos = FIXED, pos0 = FIXED;
        for (Py_ssize_t k = 0; k < K; k++) {
            key = (long)k;
            if (pos + ENTRY > head) { code = 1; break; }
            const uint8_t *e = r + pos, *e0 = r0 + pos0;
            int nlen = e[0], dcode = e[1], ndim = e[2];
            if (dcode >= NCODES) { code = 1; break; }
            if (pos + ENTRY + 8 * ndim + nlen > head) { code = 1; break; }
            if (i > 0 && (e[0] != e0[0] || e[1] != e0[1] || e[2] != e0[2] ||
                          memcmp(e + ENTRY + 8 * ndim, e0 + ENTRY + 8 * ndim, nlen))) {
                code = 2; break;
            }
            int64_t off = rd32(e + 4), ax = axes[k];
            double count = 1.0;
            int64_t c = 1, x = 1;
            for (int d = 0; d < ndim; d++) {
                int64_t v = rd64(e + ENTRY + 8 * d);
                if (v < 0) { code = 1; break; }
                if (d != ax && i > 0 && v != rd64(e0 + ENTRY + 8 * d)) { code = 3; break; }
                if (d == ax) x = v;
                count *= (double)v;
                c *= v;
            }
            if (code) break;
            if (ndim && (ax < 0 || ax >= ndim)) { code = 2; break; }
            if ((double)off + count * ITEMSIZE[dcode] > (double)total) { code = 1; break; }
            pay[k * n + i] = s + off;
            cnt[k * n + i] = c;
            ext[k * n + i] = ndim ? x : 1;
            pos += ENTRY + 8 * ndim + nlen;
            pos0 = pos;
        }
    }
    Py_END_ALLOW_THREADS
    release(b, 7);
    if (!code) rec = key = -1;
    return Py_BuildValue("(lll)", code, rec, key);
}

/* join(buf, pay, cnt, ext, k, K, lead, itemsize, out): key k of every record, joined along its
 * axis: `lead` rows (the product of the dims before the axis), each the records' segments in
 * turn. out must hold sum(cnt[:, k]) * itemsize bytes. Returns 0, or 1 when sizes disagree. */
static PyObject *k_join(PyObject *self, PyObject *args) {
    PyObject *o[5];
    Py_ssize_t k, K, lead, itemsize;
    Buf b[5];
    if (!PyArg_ParseTuple(args, "OOOOnnnnO", &o[0], &o[1], &o[2], &o[3], &k, &K, &lead,
                          &itemsize, &o[4]))
        return NULL;
    memset(b, 0, sizeof b);
    if (get_buf(o[0], &b[0], 0, 1, "buf") || get_buf(o[1], &b[1], 0, 8, "pay") ||
        get_buf(o[2], &b[2], 0, 8, "cnt") || get_buf(o[3], &b[3], 0, 8, "ext") ||
        get_buf(o[4], &b[4], 1, 0, "out")) {
        release(b, 5);
        return NULL;
    }
    Py_ssize_t n = K > 0 ? b[1].b.len / 8 / K : 0;
    const uint8_t *buf = b[0].b.buf;
    const int64_t *pay = b[1].b.buf, *cnt = b[2].b.buf;
    uint8_t *out = b[4].b.buf;
    int64_t olen = b[4].b.len, blen = b[0].b.len;
    int bad = k < 0 || k >= K || lead < 1 || itemsize < 1 || b[2].b.len != b[1].b.len;
    Py_BEGIN_ALLOW_THREADS
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        int64_t c = cnt[k * n + i];
        if (c % lead || pay[k * n + i] < 0 || pay[k * n + i] + c * itemsize > blen) bad = 1;
        total += c * itemsize;
    }
    if (!bad && total != olen) bad = 1;
    if (!bad) {
        int64_t row = total / lead, at = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t seg = cnt[k * n + i] / lead * itemsize;
            const uint8_t *src = buf + pay[k * n + i];
            for (Py_ssize_t r = 0; r < lead; r++) memcpy(out + r * row + at, src + r * seg, seg);
            at += seg;
        }
    }
    Py_END_ALLOW_THREADS
    release(b, 5);
    return PyLong_FromLong(bad);
}

#define SHIFT(T, U)                                                                           \
    do {                                                                                      \
        T *a = (T *)arr;                                                                      \
        for (Py_ssize_t r = 0; r < lead; r++) {                                               \
            int64_t at = r * row;                                                             \
            for (Py_ssize_t i = 0; i < n; i++) {                                              \
                U v = (U)inc[i];                                                              \
                if (v)                                                                        \
                    for (int64_t j = at; j < at + ext[i]; j++) a[j] = (T)((U)a[j] + v);       \
                at += ext[i];                                                                 \
            }                                                                                 \
        }                                                                                     \
    } while (0)

/* shift(arr, code, ext, inc, lead): in place, record i's part of every one of `lead` rows
 * (ext[i] items a row) gets + inc[i], wrapping as numpy's unsafe cast of the int64 sum does.
 * code: the record dtype code (int8 1, uint8 2, int16 3, int32 5, int64 7). Returns 0, or 1
 * when sizes disagree or the dtype is not an integer one. */
static PyObject *k_shift(PyObject *self, PyObject *args) {
    PyObject *o[3];
    int code;
    Py_ssize_t lead;
    Buf b[3];
    if (!PyArg_ParseTuple(args, "OiOOn", &o[0], &code, &o[1], &o[2], &lead)) return NULL;
    memset(b, 0, sizeof b);
    if (get_buf(o[0], &b[0], 1, 0, "arr") || get_buf(o[1], &b[1], 0, 8, "ext") ||
        get_buf(o[2], &b[2], 0, 8, "inc")) {
        release(b, 3);
        return NULL;
    }
    Py_ssize_t n = b[1].b.len / 8;
    const int64_t *ext = b[1].b.buf, *inc = b[2].b.buf;
    void *arr = b[0].b.buf;
    int bad = b[2].b.len / 8 != n || lead < 1 || code < 0 || code >= NCODES;
    int64_t row = 0;
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        if (ext[i] < 0) bad = 1;
        row += ext[i];
    }
    if (!bad && row * lead * ITEMSIZE[code] != b[0].b.len) bad = 1;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        switch (code) {
            case 1: SHIFT(int8_t, uint8_t); break;
            case 2: SHIFT(uint8_t, uint8_t); break;
            case 3: SHIFT(int16_t, uint16_t); break;
            case 5: SHIFT(int32_t, uint32_t); break;
            case 7: SHIFT(int64_t, uint64_t); break;
            default: bad = 1;
        }
        Py_END_ALLOW_THREADS
    }
    release(b, 3);
    return PyLong_FromLong(bad);
}

/* repeat(counts, out): out = [0]*counts[0] + [1]*counts[1] + ... (int64); 0, or 1 on a size
 * mismatch. */
static PyObject *k_repeat(PyObject *self, PyObject *args) {
    PyObject *o[2];
    Buf b[2];
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1])) return NULL;
    memset(b, 0, sizeof b);
    if (get_buf(o[0], &b[0], 0, 8, "counts") || get_buf(o[1], &b[1], 1, 8, "out")) {
        release(b, 2);
        return NULL;
    }
    Py_ssize_t n = b[0].b.len / 8, m = b[1].b.len / 8;
    const int64_t *c = b[0].b.buf;
    int64_t *out = b[1].b.buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (c[i] < 0) bad = 1;
        total += c[i];
    }
    if (total != m) bad = 1;
    if (!bad) {
        int64_t at = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            for (int64_t j = 0; j < c[i]; j++) out[at++] = (int64_t)i;
    }
    Py_END_ALLOW_THREADS
    release(b, 2);
    return PyLong_FromLong(bad);
}


/* fill(buf, pay, cnt, ext, leads, outs, shift, node_key, slices, batch): the whole column-wise
 * batch in one call. For each key k: join it into outs[k] (as join); slices[k] = [0, cumsum of
 * ext[k]] (n+1 items a key). With node_key >= 0: batch = graph i repeated ext[node_key][i]
 * times, and every key with shift[k] >= 0 (its dtype code) gets + the nodes of the earlier
 * graphs (as shift). Returns 0, or 1 when a size disagrees (nothing past a bound is written). */
static PyObject *k_fill(PyObject *self, PyObject *args) {
    PyObject *o[6], *outs, *so, *bo;
    Py_ssize_t node_key;
    Buf b[8];
    if (!PyArg_ParseTuple(args, "OOOOOOOnOO", &o[0], &o[1], &o[2], &o[3], &o[4], &outs, &o[5],
                          &node_key, &so, &bo))
        return NULL;
    memset(b, 0, sizeof b);
    if (!PyList_Check(outs)) {
        PyErr_SetString(PyExc_TypeError, "fill: outs must be a list");
        return NULL;
    }
    if (get_buf(o[0], &b[0], 0, 1, "buf") || get_buf(o[1], &b[1], 0, 8, "pay") ||
        get_buf(o[2], &b[2], 0, 8, "cnt") || get_buf(o[3], &b[3], 0, 8, "ext") ||
        get_buf(o[4], &b[4], 0, 8, "leads") || get_buf(o[5], &b[5], 0, 8, "shift") ||
        get_buf(so, &b[6], 1, 8, "slices") || get_buf(bo, &b[7], 1, 8, "batch")) {
        release(b, 8);
        return NULL;
    }
    Py_ssize_t K = b[4].b.len / 8, nout = PyList_GET_SIZE(outs);
    Py_ssize_t n = K > 0 ? b[1].b.len / 8 / K : 0;
    if (nout != K || K == 0 || b[5].b.len / 8 != K || b[2].b.len != b[1].b.len ||
        b[3].b.len != b[1].b.len || b[6].b.len / 8 != K * (n + 1) || node_key >= K) {
        release(b, 8);
        return PyLong_FromLong(1);
    }
    Buf *ob = PyMem_Calloc((size_t)K, sizeof(Buf));
    if (!ob) { release(b, 8); return PyErr_NoMemory(); }
    for (Py_ssize_t k = 0; k < K; k++)
        if (get_buf(PyList_GET_ITEM(outs, k), &ob[k], 1, 0, "out")) {
            release(ob, (int)K); PyMem_Free(ob); release(b, 8);
            return NULL;
        }
    const uint8_t *buf = b[0].b.buf;
    const int64_t *pay = b[1].b.buf, *cnt = b[2].b.buf, *ext = b[3].b.buf, *leads = b[4].b.buf;
    const int64_t *shift = b[5].b.buf;
    int64_t *slices = b[6].b.buf, *batch = b[7].b.buf, blen = b[0].b.len;
    Py_ssize_t nbatch = b[7].b.len / 8;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < K && !bad; k++) {  /* every size first: nothing written if bad */
        int64_t lead = leads[k], isz = ob[k].b.itemsize, total = 0, row = 0;
        if (lead < 1 || isz < 1) { bad = 1; break; }
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t c = cnt[k * n + i], p = pay[k * n + i];
            if (c < 0 || c % lead || p < 0 || p > blen - c * isz || ext[k * n + i] < 0) {
                bad = 1; break;
            }
            total += c * isz;
            row += ext[k * n + i];
        }
        if (!bad && total != ob[k].b.len) bad = 1;
        if (!bad && shift[k] >= 0 && (node_key < 0 || shift[k] >= NCODES ||
                                      ITEMSIZE[shift[k]] != isz || row * lead * isz != total))
            bad = 1;
    }
    if (!bad && node_key >= 0) {
        int64_t nodes = 0;
        for (Py_ssize_t i = 0; i < n; i++) nodes += ext[node_key * n + i];
        if (nodes != nbatch) bad = 1;
    }
    if (!bad) {
        for (Py_ssize_t k = 0; k < K; k++) {
            int64_t lead = leads[k], isz = ob[k].b.itemsize, rowb = ob[k].b.len / lead, at = 0;
            uint8_t *out = ob[k].b.buf;
            int64_t *s = slices + k * (n + 1);
            s[0] = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                int64_t seg = cnt[k * n + i] / lead * isz;
                const uint8_t *src = buf + pay[k * n + i];
                for (Py_ssize_t r = 0; r < lead; r++) memcpy(out + r * rowb + at, src + r * seg, seg);
                at += seg;
                s[i + 1] = s[i] + ext[k * n + i];
            }
        }
        if (node_key >= 0) {
            const int64_t *inc = slices + node_key * (n + 1), *nodes = ext + node_key * n;
            int64_t at = 0;
            for (Py_ssize_t i = 0; i < n; i++)
                for (int64_t j = 0; j < nodes[i]; j++) batch[at++] = (int64_t)i;
            for (Py_ssize_t k = 0; k < K; k++) {
                if (shift[k] < 0) continue;
                const int64_t *e = ext + k * n;
                Py_ssize_t lead = (Py_ssize_t)leads[k];
                int64_t row = slices[k * (n + 1) + n];
                void *arr = ob[k].b.buf;
                switch (shift[k]) {
                    case 1: { const int64_t *ext = e; SHIFT(int8_t, uint8_t); break; }
                    case 2: { const int64_t *ext = e; SHIFT(uint8_t, uint8_t); break; }
                    case 3: { const int64_t *ext = e; SHIFT(int16_t, uint16_t); break; }
                    case 5: { const int64_t *ext = e; SHIFT(int32_t, uint32_t); break; }
                    case 7: { const int64_t *ext = e; SHIFT(int64_t, uint64_t); break; }
                    default: bad = 1;
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    release(ob, (int)K);
    PyMem_Free(ob);
    release(b, 8);
    return PyLong_FromLong(bad);
}

/* The `feistel` order's mix (splitmix64's finaliser of v plus the round's constant): the same
 * bits as mdloader_plugin/sampling/order.py's _mix. */
static inline uint64_t mix64(uint64_t v, uint64_t i) {
    v += (i + 1) * 0x9E3779B97F4A7C15ULL;
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ULL;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBULL;
    return v ^ (v >> 31);
}

#define LANES 8

/* The network over nl (<= LANES) positions x at once, round by round: one position's rounds are a
 * chain of dependent multiplies, several in flight keep the core busy (~4x here). v may be x. */
static inline void feistel_lanes_fwd(const uint64_t *x, uint64_t *v, const uint64_t *keys,
                                     int rounds, int a, int b, int nl) {
    uint64_t left[LANES], right[LANES];
    for (int l = 0; l < nl; l++) { left[l] = x[l] >> b; right[l] = x[l] & ((1ULL << b) - 1); }
    for (int i = 0; i < rounds; i++) {
        uint64_t mask = (1ULL << a) - 1;
        for (int l = 0; l < nl; l++) {
            uint64_t t = right[l];
            right[l] = left[l] ^ (mix64(t ^ keys[i], (uint64_t)i) & mask);
            left[l] = t;
        }
        int s = a; a = b; b = s;
    }
    for (int l = 0; l < nl; l++) v[l] = (left[l] << b) | right[l];
}

static inline void feistel_lanes_inv(const uint64_t *x, uint64_t *v, const uint64_t *keys,
                                     int rounds, int a, int b, int nl) {
    if (rounds % 2) { int s = a; a = b; b = s; }
    uint64_t left[LANES], right[LANES];
    for (int l = 0; l < nl; l++) { left[l] = x[l] >> b; right[l] = x[l] & ((1ULL << b) - 1); }
    for (int i = rounds - 1; i >= 0; i--) {
        int s = a; a = b; b = s;
        uint64_t mask = (1ULL << a) - 1;
        for (int l = 0; l < nl; l++) {
            uint64_t t = left[l];
            left[l] = right[l] ^ (mix64(t ^ keys[i], (uint64_t)i) & mask);
            right[l] = t;
        }
    }
    for (int l = 0; l < nl; l++) v[l] = (left[l] << b) | right[l];
}

static inline void feistel_lanes(const uint64_t *x, uint64_t *v, const uint64_t *keys,
                                 int rounds, int a, int b, int nl, int inverse) {
    if (inverse) feistel_lanes_inv(x, v, keys, rounds, a, b, nl);
    else feistel_lanes_fwd(x, v, keys, rounds, a, b, nl);
}

/* feistel(x, out, keys, left, right, n, inverse): out[i] = the order's id at position x[i]
 * (inverse: the position of id x[i]), cycle-walked into [0, n); left/right: the halves' bits
 * before round 0. Returns 0, or 1 when sizes disagree, the halves do not fit 64 bits, or an x is
 * not below 2**(left + right) (nothing is written then). */
static PyObject *k_feistel(PyObject *self, PyObject *args) {
    PyObject *o[3];
    int a, b, inverse;
    unsigned long long n;
    Buf bs[3];
    if (!PyArg_ParseTuple(args, "OOOiiKp", &o[0], &o[1], &o[2], &a, &b, &n, &inverse))
        return NULL;
    memset(bs, 0, sizeof bs);
    if (get_buf(o[0], &bs[0], 0, 8, "x") || get_buf(o[1], &bs[1], 1, 8, "out") ||
        get_buf(o[2], &bs[2], 0, 8, "keys")) {
        release(bs, 3);
        return NULL;
    }
    Py_ssize_t m = bs[0].b.len / 8;
    int rounds = (int)(bs[2].b.len / 8);
    const uint64_t *x = bs[0].b.buf, *keys = bs[2].b.buf;
    uint64_t *out = bs[1].b.buf;
    int bad = bs[1].b.len / 8 != m || a < 1 || b < 1 || a + b > 63 || n == 0 ||
              n > (1ULL << (a + b));
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < m && !bad; i++)
        if (x[i] >> (a + b)) bad = 1;
    if (!bad) {
        Py_ssize_t i = 0;
        for (; i + LANES <= m; i += LANES)
            feistel_lanes(x + i, out + i, keys, rounds, a, b, LANES, inverse);
        if (i < m)
            feistel_lanes(x + i, out + i, keys, rounds, a, b, (int)(m - i), inverse);
        for (i = 0; i < m; i++)  /* cycle walking: a bijection of [0, n) */
            while (out[i] >= n)
                feistel_lanes(out + i, out + i, keys, rounds, a, b, 1, inverse);
    }
    Py_END_ALLOW_THREADS
    release(bs, 3);
    return PyLong_FromLong(bad);
}

static PyMethodDef methods[] = {
    {"copy_records", k_gather, METH_VARARGS, "records -> one buffer, a memcpy each (GIL released)"},
    {"scan", k_scan, METH_VARARGS, "check every record header against record 0's"},
    {"join", k_join, METH_VARARGS, "key k of every record joined along its axis"},
    {"shift", k_shift, METH_VARARGS, "add each record's node offset to an index key"},
    {"repeat", k_repeat, METH_VARARGS, "the batch vector"},
    {"fill", k_fill, METH_VARARGS, "a whole column-wise batch: join, slices, batch, shift"},
    {"feistel", k_feistel, METH_VARARGS, "the feistel epoch order (or its inverse), cycle-walked"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels",
                                    "MDLoader's compiled batch kernels (GIL released).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
