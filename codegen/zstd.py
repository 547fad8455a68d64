"""zstd for the generator, through libzstd with ctypes: the run-time library kiln links anyway, where a
zstd command or Python module may be absent. Compresses the header bundle, decompresses fatbin images."""

from __future__ import annotations

import ctypes
import ctypes.util

import errors

# ZSTD_cParameter values (zstd.h, stable API)
_C_COMPRESSION_LEVEL = 100
_C_CHECKSUM_FLAG = 201
# ZSTD_getFrameContentSize's answers for a frame that does not say its size, and for bytes not a frame
_CONTENTSIZE_UNKNOWN = 2**64 - 1
_CONTENTSIZE_ERROR = 2**64 - 2


class ZstdError(errors.GenError):
    pass


def compress(raw: bytes, level: int, checksum: bool = True) -> bytes:
    """One zstd frame holding `raw` (its size in the frame header; content checksum on unless asked)."""
    lib = _library()
    cctx = lib.ZSTD_createCCtx()
    try:
        for parameter, value in ((_C_COMPRESSION_LEVEL, level), (_C_CHECKSUM_FLAG, int(checksum))):
            if lib.ZSTD_isError(lib.ZSTD_CCtx_setParameter(cctx, parameter, value)):
                raise ZstdError("libzstd rejected a compression parameter")
        capacity = lib.ZSTD_compressBound(len(raw))
        out = ctypes.create_string_buffer(capacity)
        size = lib.ZSTD_compress2(cctx, out, capacity, bytes(raw), len(raw))
        if lib.ZSTD_isError(size):
            raise ZstdError(f"zstd: {lib.ZSTD_getErrorName(size).decode()}")
    finally:
        lib.ZSTD_freeCCtx(cctx)
    return out.raw[:size]


def decompress(frame: bytes, expected_size: int) -> bytes:
    """The content of one zstd frame that must hold exactly `expected_size` bytes."""
    lib = _library()
    claimed = lib.ZSTD_getFrameContentSize(frame, len(frame))
    if claimed in (_CONTENTSIZE_UNKNOWN, _CONTENTSIZE_ERROR):
        raise ZstdError("not a zstd frame that states its size")
    if claimed != expected_size:
        raise ZstdError(f"the zstd frame holds {claimed} bytes, expected {expected_size}")
    out = ctypes.create_string_buffer(max(expected_size, 1))
    size = lib.ZSTD_decompress(out, expected_size, frame, len(frame))
    if lib.ZSTD_isError(size):
        raise ZstdError(f"zstd: {lib.ZSTD_getErrorName(size).decode()}")
    if size != expected_size:
        raise ZstdError(f"the zstd frame decompressed to {size} bytes, expected {expected_size}")
    return out.raw[:size]


_lib = None


def _library():
    global _lib
    if _lib is not None:
        return _lib
    name = ctypes.util.find_library("zstd") or "libzstd.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        raise ZstdError(f"cannot load libzstd ({name}: {e}); install libzstd-dev") from None
    lib.ZSTD_createCCtx.restype = ctypes.c_void_p
    lib.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]
    lib.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.ZSTD_CCtx_setParameter.restype = ctypes.c_size_t
    lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_compress2.restype = ctypes.c_size_t
    lib.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
    lib.ZSTD_getErrorName.restype = ctypes.c_char_p
    _lib = lib
    return lib
