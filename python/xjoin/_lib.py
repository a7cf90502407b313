"""ctypes bindings of libxjoin.so (app/api/xjoin_api.h).

The library is $XJOIN_LIBRARY when set (the xjoin module sets it to an
installed libxjoin.so), else the package's own copy (xjoin/lib/, put
there when the package was built). ctypes releases the GIL around
every call, so other Python threads run while xjoin computes.
"""

import atexit
import ctypes
import os

(F32, F64, F16, I8, U8, I16, U16, I32, U32, I64, U64) = range(1, 12)

_HERE = os.path.dirname(os.path.abspath(__file__))
_ERR = 4096


def library_path():
    """The libxjoin.so this package loads."""
    env = os.environ.get("XJOIN_LIBRARY")
    if env:
        return env
    return os.path.join(_HERE, "lib", "libxjoin.so")


def _load():
    path = library_path()
    if not os.path.exists(path):
        raise ImportError("xjoin: no library at %s (build the package with "
                          "`pip install ./python`, or set XJOIN_LIBRARY)"
                          % path)
    lib = ctypes.CDLL(path)
    lib.xjoin_input.argtypes = [ctypes.c_char_p, ctypes.c_void_p,
                                ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_char_p, ctypes.c_size_t]
    lib.xjoin_input.restype = ctypes.c_int
    lib.xjoin_inputs_clear.argtypes = []
    lib.xjoin_inputs_clear.restype = None
    lib.xjoin_run.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                              ctypes.c_char_p, ctypes.c_size_t]
    lib.xjoin_run.restype = ctypes.c_int
    lib.xjoin_finalize.argtypes = []
    lib.xjoin_finalize.restype = None
    lib.xjoin_version.argtypes = []
    lib.xjoin_version.restype = ctypes.c_char_p
    atexit.register(lib.xjoin_finalize)
    return lib


_lib = _load()


def version():
    return _lib.xjoin_version().decode()


def input(name, data, dtype, rows, cols, rs, cs):
    err = ctypes.create_string_buffer(_ERR)
    code = _lib.xjoin_input(name.encode(), data, dtype, rows, cols, rs, cs,
                            err, _ERR)
    if code:
        from . import _raise
        _raise(code, err.value.decode(errors="replace"))


def clear():
    _lib.xjoin_inputs_clear()


def run(argv):
    """(exit code, message) of `xjoin argv...`."""
    args = (ctypes.c_char_p * len(argv))(*[a.encode() for a in argv])
    err = ctypes.create_string_buffer(_ERR)
    code = _lib.xjoin_run(len(argv), args, err, _ERR)
    return code, err.value.decode(errors="replace")
