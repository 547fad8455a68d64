"""Minimal cubin-shaped ELF files for the generator's tests: the header fields and symbol table kiln reads."""

import struct


def fake_cubin(arch: int, kernels: list[str]) -> bytes:
    strtab = b"\0" + b"".join(k.encode() + b"\0" for k in kernels)
    syms = bytearray(24)  # the null symbol
    pos = 1
    for k in kernels:
        syms += struct.pack("<IBBHQQ", pos, 0x12, 0x10, 0, 0, 0)  # STB_GLOBAL|STT_FUNC, STO_CUDA_ENTRY
        pos += len(k) + 1
    header_size, shentsize = 64, 64
    strtab_off = header_size
    symtab_off = strtab_off + len(strtab)
    shoff = symtab_off + len(syms)
    ident = b"\x7fELF" + bytes([2, 1, 1, 65, 8]) + bytes(7)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 0x6000000 | (arch << 8) | 2,
                                 header_size, 0, 0, shentsize, 3, 1)
    sections = bytes(64)
    sections += struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, strtab_off, len(strtab), 0, 0, 1, 0)
    sections += struct.pack("<IIQQQQIIQQ", 0, 2, 0, 0, symtab_off, len(syms), 1, 1, 8, 24)
    return header + strtab + bytes(syms) + sections


def fake_ptx(arch: int, kernels: list[str]) -> bytes:
    body = "".join(f".visible .entry {k}()\n{{\n\tret;\n}}\n" for k in kernels)
    return f".version 9.0\n.target sm_{arch}\n.address_size 64\n\n{body}".encode()
