/* A deadline that fires without the GIL: one native thread a process (see deadline.py).
 *
 * arm(seconds, line, abort_address, comm_handle, code): if cancel() is not called within
 * `seconds`, the thread writes `line` to fd 2 and calls the MPI library's MPI_Abort (its address
 * and COMM_WORLD's handle come from Python, so nothing here links MPI); without an address, or
 * should MPI_Abort return, it ends the process with _exit(code). The thread waits on a condition
 * variable of CLOCK_MONOTONIC and never takes the GIL: a read that holds the GIL in C code for
 * ever (ADIOS2's BP5 reader on a truncated file) cannot stop it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*abort_fn)(intptr_t, int);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int started, armed, code = 1;
static unsigned long generation;
static struct timespec deadline;
static char *line;
static size_t line_len;
static abort_fn fn;
static intptr_t comm;

static void fire(void)
{
    size_t done = 0;
    while (done < line_len) {
        ssize_t n = write(2, line + done, line_len - done);
        if (n <= 0 && errno != EINTR)
            break;
        if (n > 0)
            done += (size_t)n;
    }
    if (fn != NULL)
        fn(comm, code);
    _exit(code);
}

static void *watch(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!armed)
            pthread_cond_wait(&cv, &mu);
        unsigned long gen = generation;
        int rc = 0;
        while (armed && generation == gen && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&cv, &mu, &deadline);
        if (armed && generation == gen && rc == ETIMEDOUT)
            fire();
    }
    return NULL;
}

static PyObject *arm(PyObject *self, PyObject *args)
{
    double seconds;
    const char *text;
    Py_ssize_t len;
    unsigned long long address, handle;
    int exit_code;
    (void)self;
    if (!PyArg_ParseTuple(args, "dy#KKi", &seconds, &text, &len, &address, &handle,
                          &exit_code))
        return NULL;
    char *copy = malloc((size_t)len);
    if (copy == NULL)
        return PyErr_NoMemory();
    memcpy(copy, text, (size_t)len);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&mu);
    if (!started) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, watch, NULL) != 0) {
            pthread_attr_destroy(&attr);
            pthread_mutex_unlock(&mu);
            free(copy);
            PyErr_SetString(PyExc_OSError, "cannot start the deadline thread");
            return NULL;
        }
        pthread_attr_destroy(&attr);
        started = 1;
    }
    free(line);
    line = copy;
    line_len = (size_t)len;
    fn = (abort_fn)(uintptr_t)address;
    comm = (intptr_t)handle;
    code = exit_code;
    double whole = (double)(time_t)seconds;
    deadline.tv_sec = now.tv_sec + (time_t)seconds;
    deadline.tv_nsec = now.tv_nsec + (long)((seconds - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    armed = 1;
    generation++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    Py_RETURN_NONE;
}

static PyObject *cancel(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pthread_mutex_lock(&mu);
    armed = 0;
    generation++;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"arm", arm, METH_VARARGS, "arm(seconds, line, abort_address, comm_handle, code)"},
    {"cancel", cancel, METH_NOARGS, "cancel the armed deadline"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_deadline", NULL, -1, methods};

PyMODINIT_FUNC PyInit__deadline(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &attr);
    pthread_condattr_destroy(&attr);
    return PyModule_Create(&module);
}
