/* The counted path of the scalar-read wrappers, in C: xfer.float, xfer.int,
 * xfer.bool, xfer.index and xfer.item.
 *
 * Why: with counting on, the Python wrapper of a scalar read (two clock reads,
 * the bare call, the tensor's flags, two appends to the site's pending lists)
 * costs over a microsecond on a busy host; a read of a device scalar is the
 * most common sync in a training step, and the goal is half a microsecond.
 *
 * What: each function here is the Python wrapper of the same name
 * (xferaudit/packs/torch/implicit.py, runtime.py) for ONE case, and hands
 * every other case to that Python wrapper, unchanged (same arguments, same
 * keywords), so behaviour is the Python wrapper's by construction:
 *
 *   - counting on with nothing else to do around the call (recorder
 *     STATE.plain) and no timeline (the recorder tells this module, see
 *     set_flags()); and, with counting and the guard off (STATE.active
 *     false), the bare call itself, as the Python wrapper makes it;
 *   - the receiver's type is exactly torch.Tensor (no subclass: is_cpu and
 *     element_size are then torch's own);
 *   - the arguments are (x) or (x, site) / (x, site=...) for the conversions,
 *     (x) or (x, site=...) for item, with site a str;
 *
 * and, for the record, only the recorder's lock-free case: the site's pending
 * lists for this direction exist (recorder._pending) and are not due a fold;
 * else the Python recorder.record() is called with what was measured.
 *
 * The bare call is what the builtin does: float(x) is PyNumber_Float(x),
 * int(x) PyNumber_Long(x), bool(x) PyObject_IsTrue(x), operator.index(x)
 * PyNumber_Index(x), x.item() the method call. The clock is
 * CLOCK_MONOTONIC, time.perf_counter_ns()'s clock on Linux and macOS.
 *
 * Not built for free-threaded Python (setup.py): the pending lists are read
 * with borrowed references, which needs the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <time.h>

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *
Py_NewRef(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
#endif

enum { OP_FLOAT, OP_INT, OP_BOOL, OP_INDEX, OP_ITEM, N_OPS };

static const char *const OP_KEYS[N_OPS] = {"float", "int", "bool", "index", "item"};

static int active = 0;                /* STATE.active: counting or the guard on */
static int fast = 0;                  /* STATE.plain and no timeline */
static PyTypeObject *tensor_type = NULL;  /* torch.Tensor once bound */
static PyObject *pending = NULL;      /* recorder._pending: site -> (site, direction, times, bytes, tally) */
static PyObject *record_fn = NULL;    /* recorder.record */
static Py_ssize_t fold_at = 4096;     /* recorder._FOLD_AT */
static PyObject *fallback[N_OPS];     /* the Python wrappers */
static PyObject *keys[N_OPS];         /* "float", ... (the wrapper's key for record()) */
static PyObject *s_down, *s_none, *s_site, *s_is_cpu, *s_element_size, *s_item;

static inline long long
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The site's pending entry for `direction` (a new reference), or NULL: none
 * (no error set) or an error. Found as recorder.record() finds it: by the
 * site object's id, else (a full name made at run time) by the name. */
static PyObject *
find_pending(PyObject *site, PyObject *direction)
{
    PyObject *key = PyLong_FromVoidPtr(site);
    if (key == NULL)
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(pending, key); /* borrowed */
    Py_DECREF(key);
    if (hit == NULL && !PyErr_Occurred())
        hit = PyDict_GetItemWithError(pending, site);
    if (hit == NULL)
        return NULL;
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 5 || PyTuple_GET_ITEM(hit, 1) != direction
        || !PyList_CheckExact(PyTuple_GET_ITEM(hit, 2))
        || (PyTuple_GET_ITEM(hit, 3) != Py_None && !PyList_CheckExact(PyTuple_GET_ITEM(hit, 3))))
        return NULL;
    return Py_NewRef(hit);
}

/* Append `ns` (and `nbytes` where the direction keeps bytes) to the pending
 * lists of `hit`; 1 when done, 0 when the Python recorder must record it (a
 * fold is due), -1 on an error. */
static int
append_pending(PyObject *hit, long long nbytes, long long ns)
{
    PyObject *times = PyTuple_GET_ITEM(hit, 2);
    PyObject *sizes = PyTuple_GET_ITEM(hit, 3);
    if (PyList_GET_SIZE(times) + 1 >= fold_at)
        return 0; /* (the Python recorder appends and folds) */
    PyObject *t = PyLong_FromLongLong(ns);
    if (t == NULL)
        return -1;
    PyObject *b = NULL;
    if (sizes != Py_None && (b = PyLong_FromLongLong(nbytes)) == NULL) {
        Py_DECREF(t);
        return -1;
    }
    /* time first, as the Python recorder does (a call counts once its last list holds it) */
    int err = PyList_Append(times, t);
    Py_DECREF(t);
    if (err == 0 && b != NULL)
        err = PyList_Append(sizes, b);
    Py_XDECREF(b);
    return err < 0 ? -1 : 1;
}

/* The bare call: what the builtin, or the method call, does. */
static inline PyObject *
bare(int op, PyObject *x)
{
    switch (op) {
    case OP_FLOAT:
        return PyNumber_Float(x);
    case OP_INT:
        return PyNumber_Long(x);
    case OP_BOOL: {
        int r = PyObject_IsTrue(x);
        return r < 0 ? NULL : PyBool_FromLong(r);
    }
    case OP_INDEX:
        return PyNumber_Index(x);
    default:
        return PyObject_CallMethodNoArgs(x, s_item);
    }
}

static PyObject *
counted(int op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *x, *site = Py_None;
    if (nargs < 1 || fallback[op] == NULL)
        goto python;
    x = args[0];
    /* the arguments the Python wrapper takes without a question: (x), (x, site) for
     * a conversion (item's positional arguments are numpy's index), (x, site=...) */
    if (kwnames == NULL) {
        if (nargs == 2 && op != OP_ITEM)
            site = args[1];
        else if (nargs != 1)
            goto python;
    }
    else {
        if (nargs != 1 || PyTuple_GET_SIZE(kwnames) != 1)
            goto python;
        PyObject *k = PyTuple_GET_ITEM(kwnames, 0);
        if (k != s_site && !(PyUnicode_Check(k) && PyUnicode_Compare(k, s_site) == 0))
            goto python;
        site = args[1];
    }
    if (!active) /* counting and the guard off: the bare call, as the Python wrapper makes it */
        return bare(op, x);
    if (!fast || Py_TYPE(x) != tensor_type || tensor_type == NULL || !PyUnicode_CheckExact(site))
        goto python;

    /* Direction, bytes and the site's pending lists are found before the bare
     * call: a read of a device scalar waits for the device, and what runs after
     * the wait runs on cold caches. (A tensor's device and dtype do not change
     * in a read; a reset or fold meanwhile is handled as the Python recorder
     * handles one that lands between a call and its record.) */
    PyObject *is_cpu = PyObject_GetAttr(x, s_is_cpu);
    if (is_cpu == NULL)
        return NULL;
    int on_host = PyObject_IsTrue(is_cpu);
    Py_DECREF(is_cpu);
    if (on_host < 0)
        return NULL;
    PyObject *direction = on_host ? s_none : s_down;
    long long nbytes = 0;
    if (!on_host) { /* a read of one element (the bare call raises otherwise) */
        PyObject *es = PyObject_CallMethodNoArgs(x, s_element_size);
        if (es == NULL)
            return NULL;
        nbytes = PyLong_AsLongLong(es);
        Py_DECREF(es);
        if (nbytes == -1 && PyErr_Occurred())
            return NULL;
    }
    PyObject *hit = find_pending(site, direction);
    if (hit == NULL && PyErr_Occurred())
        return NULL;

    long long t0 = now_ns();
    PyObject *out = bare(op, x);
    long long ns = now_ns() - t0;
    if (out == NULL) {
        Py_XDECREF(hit);
        return NULL; /* the bare call's exception; nothing recorded, as in Python */
    }
    int done = 0;
    if (hit != NULL && fast) /* (still no timeline: else the Python recorder puts it there) */
        done = append_pending(hit, nbytes, ns);
    Py_XDECREF(hit);
    if (done < 0)
        goto error;
    if (!done) {
        PyObject *r = PyObject_CallFunction(record_fn, "OOOLiiL", site, keys[op], direction, nbytes,
                                            1, 0, ns);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
python:
    if (fallback[op] == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "xferaudit._fastcount: not configured");
        return NULL;
    }
    return PyObject_Vectorcall(fallback[op], args, (size_t)nargs, kwnames);
}

#define WRAPPER(name, op, doc)                                                                    \
    static PyObject *name##_impl(PyObject *self, PyObject *const *args, Py_ssize_t nargs,        \
                                 PyObject *kwnames)                                              \
    {                                                                                            \
        return counted(op, args, nargs, kwnames);                                                \
    }                                                                                            \
    PyDoc_STRVAR(name##_doc, doc);

WRAPPER(float_, OP_FLOAT, "float(x, site=None)\n--\n\n``float(x)``, counted at `site` (see xferaudit.packs.torch.implicit.float).")
WRAPPER(int_, OP_INT, "int(x, site=None)\n--\n\n``int(x)``, counted at `site` (see xferaudit.packs.torch.implicit.int).")
WRAPPER(bool_, OP_BOOL, "bool(x, site=None)\n--\n\n``bool(x)``, counted at `site` (see xferaudit.packs.torch.implicit.bool).")
WRAPPER(index_, OP_INDEX, "index(x, site=None)\n--\n\n``operator.index(x)``, counted at `site` (see xferaudit.packs.torch.implicit.index).")
WRAPPER(item_, OP_ITEM, "item(x, *args, site=None)\n--\n\n``x.item()``, counted at `site` (see xferaudit.packs.torch.runtime.item).")

static PyObject *
set_flags(PyObject *self, PyObject *args)
{
    int a, f;
    if (!PyArg_ParseTuple(args, "pp:set_flags", &a, &f))
        return NULL;
    active = a;
    fast = a && f;
    Py_RETURN_NONE;
}

static PyObject *
bind_tensor(PyObject *self, PyObject *arg)
{
    if (arg != Py_None && !PyType_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "bind_tensor: a type or None");
        return NULL;
    }
    PyObject *old = (PyObject *)tensor_type;
    tensor_type = arg == Py_None ? NULL : (PyTypeObject *)Py_NewRef(arg);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *p, *rec, *fb;
    Py_ssize_t fold;
    if (!PyArg_ParseTuple(args, "O!OnO!:configure", &PyDict_Type, &p, &rec, &fold, &PyDict_Type, &fb))
        return NULL;
    PyObject *found[N_OPS];
    for (int i = 0; i < N_OPS; i++) {
        found[i] = PyDict_GetItemString(fb, OP_KEYS[i]); /* borrowed */
        if (found[i] == NULL || !PyCallable_Check(found[i])) {
            PyErr_Format(PyExc_ValueError, "configure: no Python wrapper for %s", OP_KEYS[i]);
            return NULL;
        }
    }
    Py_XSETREF(pending, Py_NewRef(p));
    Py_XSETREF(record_fn, Py_NewRef(rec));
    fold_at = fold;
    for (int i = 0; i < N_OPS; i++)
        Py_XSETREF(fallback[i], Py_NewRef(found[i]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"float", (PyCFunction)(void (*)(void))float__impl, METH_FASTCALL | METH_KEYWORDS, float__doc},
    {"int", (PyCFunction)(void (*)(void))int__impl, METH_FASTCALL | METH_KEYWORDS, int__doc},
    {"bool", (PyCFunction)(void (*)(void))bool__impl, METH_FASTCALL | METH_KEYWORDS, bool__doc},
    {"index", (PyCFunction)(void (*)(void))index__impl, METH_FASTCALL | METH_KEYWORDS, index__doc},
    {"item", (PyCFunction)(void (*)(void))item__impl, METH_FASTCALL | METH_KEYWORDS, item__doc},
    {"set_flags", set_flags, METH_VARARGS,
     "set_flags(active, fast): counting or the guard on; counting on with nothing else around a "
     "call and no timeline (the recorder's switches)."},
    {"bind_tensor", bind_tensor, METH_O, "The exact tensor type of the fast path (torch.Tensor), or None."},
    {"configure", configure, METH_VARARGS,
     "configure(pending, record, fold_at, wrappers): the recorder's pending dict, record(), "
     "fold threshold, and the Python wrappers by key."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastcount",
    "The counted path of xfer.float/int/bool/index/item in C (see xferaudit.runtime.counted.fastpath).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__fastcount(void)
{
    s_down = PyUnicode_InternFromString("down");
    s_none = PyUnicode_InternFromString("none");
    s_site = PyUnicode_InternFromString("site");
    s_is_cpu = PyUnicode_InternFromString("is_cpu");
    s_element_size = PyUnicode_InternFromString("element_size");
    s_item = PyUnicode_InternFromString("item");
    if (!s_down || !s_none || !s_site || !s_is_cpu || !s_element_size || !s_item)
        return NULL;
    for (int i = 0; i < N_OPS; i++)
        if ((keys[i] = PyUnicode_InternFromString(OP_KEYS[i])) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
