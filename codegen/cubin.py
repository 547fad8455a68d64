"""Reading CUDA device binaries at build time: the architecture of a cubin and the kernels it defines."""

from __future__ import annotations

import re
import struct

EM_CUDA = 190
STT_FUNC = 2
STO_CUDA_ENTRY = 0x10


class BinaryError(Exception):
    pass


def cubin_arch(data: bytes) -> int:
    """SM number from a cubin's ELF header (e_flags bits 8-15 on the ELF ABI v8 cubins CUDA 13 writes)."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        raise BinaryError("not a 64-bit ELF file")
    (machine,) = struct.unpack_from("<H", data, 18)
    if machine != EM_CUDA:
        raise BinaryError(f"ELF machine {machine}, expected {EM_CUDA} (EM_CUDA)")
    (flags,) = struct.unpack_from("<I", data, 48)
    return (flags >> 8) & 0xFF


def cubin_kernels(data: bytes) -> set[str]:
    """Names of the kernel entry points (STT_FUNC symbols flagged STO_CUDA_ENTRY) in a cubin."""
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _, sh_type, _, _, off, size, link, _, _, entsize in sections:
        if sh_type != 2:  # SHT_SYMTAB
            continue
        str_off = sections[link][4]
        for i in range(size // (entsize or 24)):
            st_name, st_info, st_other = struct.unpack_from("<IBB", data, off + i * 24)
            if st_info & 0xF == STT_FUNC and st_other & STO_CUDA_ENTRY:
                end = data.index(b"\0", str_off + st_name)
                names.add(data[str_off + st_name:end].decode())
    return names


def ptx_arch(text: str) -> int:
    m = re.search(r"^\s*\.target\s+sm_([0-9]+)", text, re.M)
    if not m:
        raise BinaryError("PTX without a .target directive")
    return int(m.group(1))


def ptx_kernels(text: str) -> set[str]:
    return set(re.findall(r"\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)", text))
