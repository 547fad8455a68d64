"""Which module-scope `.global` variables a unit's PTX may write: whether its kernels may be loaded from
several modules (a unit split over JIT workers, one module per part; docs/DESIGN.md, "A unit's kernels
over several workers").

Two modules hold two copies of each variable. A variable nothing writes (CCCL's `static constexpr`
tables: the same bytes in every part) is the same in both; one a kernel writes and another reads is not.
PTX does not say which is `const` (a `__device__ const` table and a `__device__ int` counter are both a
`.global` definition), so the code is read: a variable may be written when an instruction that is not a
load (a store, atomic, reduction, bulk copy, ...) takes an address derived from it, when that address
is stored anywhere (a pointer in memory, a call's parameter), or when another variable's initialiser
holds it. Addresses are followed through registers within each function (any instruction whose source
mentions the variable, or a register holding its address, makes its destination hold one), to a fixed
point, a register standing for all its values in the function (nvcc's PTX sets most registers once).
The answer errs one way only: a variable it calls read-only is never written.
"""

from __future__ import annotations

import re

# The identifier-like runs of PTX: names, registers (%r1), directives (.global), numbers.
TOKEN = re.compile(r"[%.]?[A-Za-z_$][\w$]*|\d\w*")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# Directives of a function body that end at their line, with no ';'.
LINE_DIRECTIVE = re.compile(r"^[ \t]*\.(loc|file)\b[^\n]*$", re.M)
LABEL = re.compile(r"^\s*[A-Za-z_$][\w$]*\s*:(?!:)")
GUARD = re.compile(r"^\s*@!?%\w+\s*")
# Instructions that read memory at a bracketed address and write none.
READ_ONLY = ("ld", "ldu", "prefetch", "prefetchu")


class PtxShape(Exception):
    """Text that does not split into module-scope statements (braces that do not balance)."""


def _statements(text: str) -> list[tuple[str, str | None]]:
    """The module's statements as (head, body): a function's head and the text inside its braces, or a
    directive (with its initialiser) and None."""
    out: list[tuple[str, str | None]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if text.startswith((".version", ".target", ".address_size", ".file"), i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        start, depth, head_end, body = i, 0, -1, False
        while i < n:
            c = text[i]
            if c == '"':
                close = text.find('"', i + 1)
                i = n if close < 0 else close + 1
                continue
            i += 1
            if c == "=" and depth == 0 and head_end < 0:
                head_end = i - 1
            elif c == "{":
                if depth == 0 and head_end < 0:
                    head_end, body = i - 1, True
                depth += 1
            elif c == "}":
                depth -= 1
                if depth < 0:
                    raise PtxShape("a '}' closes nothing")
                if depth == 0 and body:
                    break
            elif c == ";" and depth == 0:
                break
        if depth != 0:
            raise PtxShape("a '{' is never closed")
        if body:
            out.append((text[start:head_end], text[head_end + 1:i - 1]))
        else:
            out.append((text[start:i], None))
    return out


def _defined(head: str) -> tuple[list[str], bool, str]:
    """A directive's `.global` variables, whether the host may name them (visible, weak, common, extern
    or managed: it may write them by name, which no text here shows), and its initialiser's text."""
    declaration, _, initialiser = head.partition("=")
    tokens = TOKEN.findall(declaration)
    if ".global" not in tokens:
        return [], False, ""
    names = [t for t in tokens if t[0] not in ".%" and not t[0].isdigit()]
    named = bool({".visible", ".weak", ".common", ".extern", ".managed"} & set(tokens))
    return names, named, initialiser


def _instructions(body: str) -> list[tuple[str, list[str]]]:
    """A function body's instructions as (opcode, operands), labels, guards and scopes dropped."""
    out = []
    current = []
    depth_vector = 0
    for c in body:
        if c == "{" and not "".join(current).strip():
            continue  # a scope opens
        if c == "}" and depth_vector == 0 and not "".join(current).strip():
            continue  # a scope closes
        if c == "{":
            depth_vector += 1
        elif c == "}":
            depth_vector -= 1
        if c == ";" and depth_vector == 0:
            out.append("".join(current))
            current = []
        else:
            current.append(c)
    result = []
    for text in out:
        while (m := LABEL.match(text)) is not None:
            text = text[m.end():]
        text = GUARD.sub("", text, count=1).strip()
        if not text or text.startswith("."):
            continue  # a declaration (.reg, .param, .local, .shared) or a pragma
        opcode, *rest = text.split(None, 1)
        result.append((opcode, _operands(rest[0] if rest else "")))
    return result


def _operands(text: str) -> list[str]:
    """Operands split at commas outside brackets, braces and parentheses."""
    parts, depth, current = [], 0, []
    for c in text:
        if c in "[{(":
            depth += 1
        elif c in "]})":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(c)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def writable_globals(ptx: str) -> set[str]:
    """The module-scope `.global` variables of `ptx` some code may write (see the module's note).
    Raises PtxShape for text whose braces do not balance."""
    statements = _statements(LINE_DIRECTIVE.sub("", COMMENT.sub("", ptx)))
    variables: set[str] = set()
    writable: set[str] = set()
    initialisers: list[str] = []
    for head, body in statements:
        if body is None:
            names, named, initialiser = _defined(head)
            variables.update(names)
            if named:
                writable.update(names)
            initialisers.append(initialiser)
    for initialiser in initialisers:
        writable.update(t for t in TOKEN.findall(initialiser) if t in variables)
    for head, body in statements:
        if body is None:
            continue
        instructions = _instructions(LINE_DIRECTIVE.sub("", body))
        holds: dict[str, set[str]] = {}  # register -> the variables whose address it may hold

        def held(text: str) -> set[str]:
            found: set[str] = set()
            for t in TOKEN.findall(text):
                if t in variables:
                    found.add(t)
                elif t in holds:
                    found |= holds[t]
            return found

        changed = True
        while changed:
            changed = False
            for opcode, operands in instructions:
                if not operands or opcode.split(".")[0] in READ_ONLY or "[" in operands[0]:
                    continue
                sources = set().union(*(held(o) for o in operands[1:])) if len(operands) > 1 else set()
                if not sources:
                    continue
                for register in TOKEN.findall(operands[0]):
                    if register.startswith("%") and not sources <= holds.get(register, set()):
                        holds[register] = holds.get(register, set()) | sources
                        changed = True
        for opcode, operands in instructions:
            if opcode.split(".")[0] in READ_ONLY or not any("[" in o for o in operands):
                continue
            for o in operands:
                writable |= held(o)
    return writable


def splittable(ptx: str) -> bool:
    """Whether a unit's kernels may be loaded from several modules: its PTX writes no module-scope
    `.global` variable (text that does not parse as PTX: no)."""
    try:
        return not writable_globals(ptx)
    except PtxShape:
        return False
