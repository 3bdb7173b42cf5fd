"""Loads libhvd.so and declares the prototypes of the C API (bindings/c/hvd.h).

Where the library is found, first match wins:
  1. $HVD_LIBRARY, the path of a libhvd.so (an error if it does not exist);
  2. the libhvd.so of the dprun that launched this process (found through the
     parent processes' executables): in its folder (a build tree, or this package's
     hvd/_native/) or in ../lib of it (an installed prefix, lib/<multiarch> too),
     so `build-x/dprun -np 4 python3 ...` uses build-x's library, which speaks the
     same protocol as that launcher;
  3. the one installed with this package (hvd/_native/libhvd.so, `pip install`);
  4. <repo>/build/libhvd.so, then <repo>/build*/libhvd.so (build-py, ...), the
     newest first, where <repo> is the checkout this package lives in;
  5. the system's libhvd.so.<abi> (the Debian package), by the loader's own search.
Once loaded, its version must match this package's in major.minor (hvd_version);
otherwise the first call fails with an error naming both versions and the path.

`check(status, call)` turns a non-zero status into the matching HvdError carrying
hvd_last_error(); it must run on the thread that made the call, right after it,
because the runtime's last-error detail is thread-local.
"""
import ctypes
import glob
import os
import threading

from hvd._version import __version__ as PACKAGE_VERSION

from hvd import errors

# hvd_status_t, as in hvd.h.
SUCCESS = 0
INVALID_ARGUMENT = 1
INVALID_USAGE = 2
IN_PROGRESS = 9

# hvd_reduce_op_t.
SUM, AVERAGE, MIN, MAX, PRODUCT, ADASUM = 0, 1, 2, 3, 4, 5

# hvd_dtype_t.
FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT8, UINT8, INT32, INT64, INT16 = range(9)
DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64",
               "int16"]
DTYPE_SIZES = [4, 8, 2, 2, 1, 1, 4, 8, 2]

GLOBAL_PROCESS_SET = 0
MAX_NAME_LENGTH = 1024

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class AllreduceArgs(ctypes.Structure):
    """hvd_allreduce_args_t as of this binding, field for field (tests/test_cuda.py
    compares its size and offsets with the C compiler's). Make one with
    new_allreduce_args(): hvd_allreduce_args_init_sized records this size in
    struct_size, so a later libhvd gives the fields it has beyond them their
    defaults."""
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("name", ctypes.c_char_p),
        ("sendbuf", ctypes.c_void_p),
        ("recvbuf", ctypes.c_void_p),
        ("count", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("op", ctypes.c_int),
        ("prescale_factor", ctypes.c_double),
        ("postscale_factor", ctypes.c_double),
        ("process_set", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("ndim", ctypes.c_int32),
    ]


def new_allreduce_args():
    """An AllreduceArgs with every field at its default (hvd_allreduce_args_init)."""
    args = AllreduceArgs()
    lib().hvd_allreduce_args_init_sized(ctypes.byref(args), ctypes.sizeof(args))
    return args


# struct_size of an AllreduceArgs built field by field (the hot path, _frontend).
ALLREDUCE_ARGS_SIZE = ctypes.sizeof(AllreduceArgs)


def _beside_launcher(max_depth=4):
    """libhvd.so next to the dprun executable among this process's ancestors."""
    pid = os.getppid()
    for _ in range(max_depth):
        if pid <= 1:
            return None
        try:
            exe = os.readlink("/proc/%d/exe" % pid)
            with open("/proc/%d/stat" % pid) as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if os.path.basename(exe) == "dprun":
            where = os.path.dirname(exe)
            candidates = [os.path.join(where, "libhvd.so"),
                          os.path.join(where, "..", "lib", "libhvd.so")]
            candidates += sorted(glob.glob(os.path.join(where, "..", "lib", "*", "libhvd.so")))
            for candidate in candidates:
                if os.path.isfile(candidate):
                    return os.path.normpath(candidate)
            return None
        pid = parent
    return None


# The library pip installs with this package (setup.py puts it there).
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", "libhvd.so")
# The SONAME of the ABI this binding speaks, for the loader's search.
SYSTEM_NAME = "libhvd.so.0"


def find_library():
    """The path of libhvd.so, by the search order in the module docstring."""
    env = os.environ.get("HVD_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise errors.InvalidArgumentError(
                "HVD_LIBRARY=%s: no such file (it must name libhvd.so itself)" % env)
        return env
    beside = _beside_launcher()
    if beside:
        return beside
    if os.path.isfile(BUNDLED):
        return BUNDLED
    default = os.path.join(REPO_ROOT, "build", "libhvd.so")
    if os.path.isfile(default):
        return default
    found = sorted(glob.glob(os.path.join(REPO_ROOT, "build*", "libhvd.so")),
                   key=os.path.getmtime, reverse=True)
    if found:
        return found[0]
    try:
        ctypes.CDLL(SYSTEM_NAME)
        return SYSTEM_NAME
    except OSError:
        pass
    raise errors.HvdError(
        "libhvd.so not found: install dprun (pip install ., or the Debian package), set "
        "HVD_LIBRARY to its path, or build it into %s/build "
        "(cmake -S %s -B %s/build -G Ninja && ninja -C %s/build)"
        % (REPO_ROOT, REPO_ROOT, REPO_ROOT, REPO_ROOT), status="HVD_NOT_INITIALIZED")


def check_version(loaded, path):
    """Raises unless the library at `path` has this package's major.minor version."""
    want = tuple(int(x) for x in PACKAGE_VERSION.split(".")[:2])
    try:
        fn = loaded.hvd_version
    except AttributeError:
        raise errors.InvalidUsageError(
            "the hvd package is version %s but %s has no hvd_version, so it is older "
            "(before 0.2): install the libhvd that came with this package, or point "
            "HVD_LIBRARY at it" % (PACKAGE_VERSION, path)) from None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(ctypes.c_int)] * 4
    v = [ctypes.c_int(-1) for _ in range(4)]
    fn(*[ctypes.byref(x) for x in v])
    have = "%d.%d.%d" % (v[0].value, v[1].value, v[2].value)
    if (v[0].value, v[1].value) != want:
        raise errors.InvalidUsageError(
            "the hvd package is version %s but %s is libhvd %s: their versions must agree in "
            "major.minor; install the libhvd that came with this package, or point "
            "HVD_LIBRARY at it" % (PACKAGE_VERSION, path, have))


_P = ctypes.POINTER
_I, _I32, _I64, _D, _VP, _CP = (ctypes.c_int, ctypes.c_int32, ctypes.c_int64, ctypes.c_double,
                                ctypes.c_void_p, ctypes.c_char_p)

# name: (restype, argtypes). Handles travel as void*.
_PROTOTYPES = {
    "hvd_init": (_I, []),
    "hvd_shutdown": (_I, []),
    "hvd_is_initialized": (_I, [_P(_I)]),
    "hvd_elastic_generation": (_I, [_P(_I64)]),
    "hvd_elastic_update_pending": (_I, [_P(_I)]),
    "hvd_rank": (_I, [_P(_I)]),
    "hvd_size": (_I, [_P(_I)]),
    "hvd_local_rank": (_I, [_P(_I)]),
    "hvd_local_size": (_I, [_P(_I)]),
    "hvd_cross_rank": (_I, [_P(_I)]),
    "hvd_cross_size": (_I, [_P(_I)]),
    "hvd_check_health": (_I, []),
    "hvd_allreduce_args_init_sized": (None, [_P(AllreduceArgs), ctypes.c_size_t]),
    "hvd_allreduce_ex": (_I, [_P(AllreduceArgs), _P(_VP)]),
    "hvd_allgather_async": (_I, [_CP, _VP, _P(_I64), _I, _I, _I32, _P(_VP)]),
    "hvd_broadcast_async": (_I, [_CP, _VP, _I64, _I, _I, _I32, _P(_VP)]),
    "hvd_alltoall_async": (_I, [_CP, _VP, _P(_I64), _I, _I, _P(_I64), _I, _I32, _P(_VP)]),
    "hvd_reducescatter_async": (_I, [_CP, _VP, _P(_I64), _I, _I, _I, _D, _D, _I32, _P(_VP)]),
    "hvd_barrier": (_I, [_I32]),
    "hvd_join": (_I, [_I32, _P(_I)]),
    "hvd_grouped_allreduce_async": (_I, [_I, _P(_CP), _P(_VP), _P(_VP), _P(_I64), _P(_I), _I,
                                         _D, _D, _I32, _P(_VP)]),
    "hvd_grouped_allgather_async": (_I, [_I, _P(_CP), _P(_VP), _P(_P(_I64)), _P(_I), _P(_I),
                                         _I32, _P(_VP)]),
    "hvd_grouped_reducescatter_async": (_I, [_I, _P(_CP), _P(_VP), _P(_P(_I64)), _P(_I),
                                             _P(_I), _I, _D, _D, _I32, _P(_VP)]),
    "hvd_add_process_set": (_I, [_P(_I), _I, _P(_I32)]),
    "hvd_remove_process_set": (_I, [_I32]),
    "hvd_process_set_rank": (_I, [_I32, _P(_I)]),
    "hvd_process_set_size": (_I, [_I32, _P(_I)]),
    "hvd_process_set_ranks": (_I, [_I32, _P(_I), _I, _P(_I)]),
    "hvd_poll": (_I, [_VP, _P(_I)]),
    "hvd_wait": (_I, [_VP, _I64]),
    "hvd_handle_release": (None, [_VP]),
    "hvd_handle_result": (_I, [_VP, _P(_VP), _P(_I64), _P(_I), _P(_P(_I64))]),
    "hvd_handle_received_splits": (_I, [_VP, _P(_P(_I64)), _P(_I)]),
    "hvd_status_string": (_CP, [_I]),
    "hvd_last_error": (_CP, []),
}

# Newer entry points, used when the library has them (see has()).
_OPTIONAL_PROTOTYPES = {
    "hvd_barrier_async": (_I, [_I32, _P(_VP)]),
    "hvd_join_async": (_I, [_I32, _P(_VP)]),
    "hvd_handle_join_rank": (_I, [_VP, _P(_I)]),
    "hvd_cuda_built": (_I, [_P(_I)]),
    "hvd_nccl_version": (_I, [_P(_I)]),
    "hvd_grouped_allreduce_ex": (_I, [_I, _P(_P(AllreduceArgs)), _P(_VP)]),
    "hvd_version": (_I, [_P(_I), _P(_I), _P(_I), _P(_I)]),
    "hvd_wait_enqueued": (_I, [_VP, _I64]),
    "hvd_handle_order_stream": (_I, [_VP, _VP]),
    "hvd_start_timeline": (_I, [_CP, _I]),
    "hvd_stop_timeline": (_I, []),
    "hvd_detect_launcher": (_I, [_CP, ctypes.c_size_t, _P(ctypes.c_size_t)]),
    # The device forms (hvd.h, "Device tensors"); a device tensor needs them.
    "hvd_allgather_ex": (_I, [_CP, _VP, _P(_I64), _I, _I, _I32, _I32, _VP, _P(_VP)]),
    "hvd_broadcast_ex": (_I, [_CP, _VP, _I64, _I, _I, _I32, _I32, _VP, _P(_VP)]),
    "hvd_alltoall_ex": (_I, [_CP, _VP, _P(_I64), _I, _I, _P(_I64), _I, _I32, _I32, _VP,
                             _P(_VP)]),
    "hvd_reducescatter_ex": (_I, [_CP, _VP, _P(_I64), _I, _I, _I, _D, _D, _I32, _I32, _VP,
                                  _P(_VP)]),
}

_lib = None
_lib_lock = threading.Lock()


def lib():
    """The loaded library (loaded on first use), with every prototype declared."""
    global _lib
    if _lib is None:
        with _lib_lock:
            if _lib is None:
                path = find_library()
                # CDLL releases the GIL around every call, so blocking calls (hvd_wait,
                # hvd_barrier) let other Python threads run. RTLD_DEEPBIND: libhvd and
                # its libraries (protobuf) resolve their symbols among themselves first.
                # TensorFlow imports its framework library RTLD_GLOBAL, with a protobuf
                # of its own under the same symbol names; without it, libhvd's calls
                # into protobuf would land in TensorFlow's and crash.
                loaded = ctypes.CDLL(path, mode=os.RTLD_DEEPBIND)
                check_version(loaded, path)
                loaded.optional = set()
                for name, (restype, argtypes) in list(_PROTOTYPES.items()) + list(
                        _OPTIONAL_PROTOTYPES.items()):
                    try:
                        fn = getattr(loaded, name)
                    except AttributeError:
                        if name in _OPTIONAL_PROTOTYPES:
                            continue
                        raise errors.HvdError("%s lacks %s: it is older than this binding"
                                              % (path, name), status="HVD_INTERNAL") from None
                    fn.restype = restype
                    fn.argtypes = argtypes
                    if name in _OPTIONAL_PROTOTYPES:
                        loaded.optional.add(name)
                loaded.path = path
                _lib = loaded
    return _lib


def has(name):
    """Whether the loaded library provides the optional entry point `name`."""
    return name in lib().optional


def require(name, what):
    """Raises InvalidUsageError unless the loaded library has the entry point
    `name` (required or optional), which `what` (a tensor) needs."""
    if name not in _PROTOTYPES and not has(name):
        raise errors.InvalidUsageError(
            "%s needs %s, which %s lacks: it is older than this binding; rebuild libhvd"
            % (what, name, lib().path))


_cuda_built = None


def cuda_built():
    """Whether the loaded libhvd was built with CUDA (hvd_cuda_built), asked once."""
    global _cuda_built
    if _cuda_built is None:
        out = ctypes.c_int(0)
        if has("hvd_cuda_built"):
            check(lib().hvd_cuda_built(ctypes.byref(out)), "hvd_cuda_built")
        _cuda_built = out.value == 1
    return _cuda_built


def nccl_version():
    """The NCCL version code the loaded libhvd was built with (hvd_nccl_version), 0
    without NCCL."""
    out = ctypes.c_int(0)
    if has("hvd_nccl_version"):
        check(lib().hvd_nccl_version(ctypes.byref(out)), "hvd_nccl_version")
    return out.value


def status_name(code):
    return lib().hvd_status_string(code).decode("utf-8", "replace")


def make_error(code, call):
    """The HvdError for status `code` returned by `call`, with the thread's detail."""
    detail = lib().hvd_last_error().decode("utf-8", "replace")
    name = status_name(code)
    message = "%s failed with %s: %s" % (call, name, detail or "(no detail)")
    return errors.error_class(name)(message, status=name, code=code, detail=detail)


def check(code, call):
    """Raises the HvdError for a non-zero status; `call` names the C call and tensor."""
    if code != SUCCESS:
        raise make_error(code, call)
