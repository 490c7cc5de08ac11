"""Reader for the PTX subset the code generator emits: module directives, the kernel's
parameters and register declarations, labels, predicated instructions and their operands,
and the trailing `// LINE:COL what` comments.

Why a reader of its own: the translation validator must not trust the printer, so it reads
the text back exactly as `ptxas` would see it. The reader is deliberately permissive about
what it *parses* (any opcode with any modifiers, any operand shape below) and strict about
nothing: deciding whether an instruction is understood is the symbolic executor's job, so
an unfamiliar instruction becomes an `unknown` obligation rather than a parse failure.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field


class PtxSyntaxError(ValueError):
    """Text the reader cannot split into directives and instructions."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


# ---- operands -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reg:
    """A register (`%r12`, `%p3`) or a special register (`%tid.x`, `%ctaid.y`)."""

    name: str


@dataclass(frozen=True)
class Imm:
    """An integer immediate (`-1024`, `0x1f`) or a float one (`0f3F800000`: `bits` set)."""

    value: int
    bits: int | None = None  # 32 for 0f..., 64 for 0d...


@dataclass(frozen=True)
class Sym:
    """A name: a parameter, the shared array, a label."""

    name: str


@dataclass(frozen=True)
class Neg:
    """A negated predicate operand (`!%p3`)."""

    reg: Reg


@dataclass(frozen=True)
class Vec:
    """A vector operand `{a, b, ...}`."""

    items: tuple[Operand, ...]


@dataclass(frozen=True)
class Addr:
    """A memory operand `[base]`, `[base+8]` or a tensor operand `[tmap, {c0, c1}]`."""

    base: Operand
    offset: int = 0
    coords: Vec | None = None


@dataclass(frozen=True)
class Sink:
    """The bit bucket `_`."""


Operand = Reg | Imm | Sym | Neg | Vec | Addr | Sink


# ---- statements ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Annotation:
    """A `// LINE:COL what` comment: the source statement an instruction claims to implement."""

    line: int
    col: int
    what: str


@dataclass(frozen=True)
class Instr:
    """One instruction. `opcode` is the whole dotted mnemonic (`ld.global.nc.f32`); `parts` is
    it split at dots (`::` stays inside a part)."""

    index: int  # position among the instructions of the kernel
    line: int  # line of the PTX text
    guard: Reg | None
    guard_negated: bool
    opcode: str
    operands: tuple[Operand, ...]
    annotation: Annotation | None
    text: str
    # the unrolled-loop copies in effect: (loop variable uid, its value) from the latest
    # `// unrolled NAME (uid U) = V (copy I)` line above, one per uid (a claim, like the
    # annotation: it says which copy of a statement to compare with, never what is true)
    copies: tuple[tuple[int, int], ...] = ()

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.opcode.split("."))


@dataclass(frozen=True)
class Label:
    name: str
    line: int


@dataclass(frozen=True)
class Param:
    """A kernel parameter: `.param .u64 p_x`, `.param .align 64 .b8 tm_x[128]`."""

    name: str
    type: str  # "u64", "s64", "b8", ...
    align: int | None
    array: int | None
    line: int


@dataclass
class Module:
    version: str | None = None
    target: str | None = None
    address_size: int | None = None
    shared_decls: list[tuple[str, int | None, str, bool]] = field(default_factory=list)
    entry: str | None = None
    entries: int = 0
    params: list[Param] = field(default_factory=list)
    reqntid: tuple[int, ...] | None = None
    regs: dict[str, tuple[str, int]] = field(default_factory=dict)  # prefix -> (type, count)
    body: list[Instr | Label] = field(default_factory=list)
    header_comments: list[str] = field(default_factory=list)

    @property
    def instrs(self) -> list[Instr]:
        return [s for s in self.body if isinstance(s, Instr)]


# ---- tokens ----------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+)
  | (?P<nl>\n)
  | (?P<comment>//[^\n]*)
  | (?P<block>/\*.*?\*/)
  | (?P<float>0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16})
  | (?P<hex>-?0[xX][0-9a-fA-F]+U?)
  | (?P<decimal>[0-9]+\.[0-9]+)
  | (?P<int>-?[0-9]+U?)
  | (?P<reg>%[A-Za-z_][\w$]*(?:\.[A-Za-z]\w*)?)
  | (?P<word>\.?[A-Za-z_$][\w$]*(?:(?:\.|::)[\w$]+)*)
  | (?P<punct>[\[\]{}(),;:@!<>+_])
""", re.VERBOSE | re.DOTALL)

_ANNOTATION = re.compile(r"^//\s*(\d+):(\d+)\s*(.*?)\s*$")
_UNROLLED = re.compile(r"^//\s*unrolled\s+\S+\s+\(uid\s+(\d+)\)\s*=\s*(-?\d+)\s+"
                       r"\(copy\s+\d+\)\s*$")


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    line: int


def _tokenize(text: str) -> tuple[list[_Tok], dict[int, str]]:
    toks: list[_Tok] = []
    comments: dict[int, str] = {}
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise PtxSyntaxError(f"unexpected character {text[pos]!r}", line)
        kind = m.lastgroup or ""
        s = m.group()
        if kind == "nl":
            line += 1
        elif kind == "comment":
            comments[line] = s
        elif kind == "block":
            line += s.count("\n")
        elif kind != "ws":
            if kind == "word" and s == "_":
                kind = "punct"
            toks.append(_Tok(kind, s, line))
        pos = m.end()
    return toks, comments


def _int(text: str) -> int:
    t = text.rstrip("U")
    return int(t, 16) if t.lstrip("-")[:2].lower() == "0x" else int(t)


# ---- parser ----------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks, self.comments = _tokenize(text)
        self.i = 0
        self.mod = Module()
        self.nins = 0
        self.lines = text.split("\n")
        self.markers = [(line, _UNROLLED.match(c)) for line, c in sorted(self.comments.items())
                        if _UNROLLED.match(c)]
        self.copies: dict[int, int] = {}  # loop uid -> the value of its copy in effect

    def peek(self, k: int = 0) -> _Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> _Tok:
        t = self.peek()
        if t is None:
            last = self.toks[-1].line if self.toks else 1
            raise PtxSyntaxError("unexpected end of text", last)
        self.i += 1
        return t

    def expect(self, text: str) -> _Tok:
        t = self.next()
        if t.text != text:
            raise PtxSyntaxError(f"expected {text!r}, found {t.text!r}", t.line)
        return t

    def at(self, text: str) -> bool:
        t = self.peek()
        return t is not None and t.text == text

    # -- module ---------------------------------------------------------------------------

    def module(self) -> Module:
        mod = self.mod
        mod.header_comments = [c for _, c in sorted(self.comments.items())
                               if not _ANNOTATION.match(c)]
        while self.peek() is not None:
            t = self.next()
            if t.text == ".version":
                mod.version = self.next().text
            elif t.text == ".target":
                mod.target = self.next().text
                while self.at(","):
                    self.next()
                    mod.target += "," + self.next().text
            elif t.text == ".address_size":
                mod.address_size = _int(self.next().text)
            elif t.text in (".extern", ".shared"):
                self.shared_decl(t)
            elif t.text in (".visible", ".entry"):
                if t.text == ".visible":
                    self.expect(".entry")
                self.entry()
            else:
                raise PtxSyntaxError(f"unexpected {t.text!r} at module level", t.line)
        return mod

    def shared_decl(self, first: _Tok) -> None:
        extern = first.text == ".extern"
        if extern:
            self.expect(".shared")
        align = None
        if self.at(".align"):
            self.next()
            align = _int(self.next().text)
        ty = self.next().text.lstrip(".")
        name = self.next().text
        while not self.at(";"):
            self.next()
        self.expect(";")
        self.mod.shared_decls.append((name, align, ty, extern))

    def entry(self) -> None:
        mod = self.mod
        mod.entries += 1
        mod.entry = self.next().text
        self.expect("(")
        while not self.at(")"):
            t = self.expect(".param")
            align = array = None
            ty = self.next().text
            if ty == ".align":
                align = _int(self.next().text)
                ty = self.next().text
            name = self.next().text
            if self.at("["):
                self.next()
                array = _int(self.next().text)
                self.expect("]")
            mod.params.append(Param(name, ty.lstrip("."), align, array, t.line))
            if self.at(","):
                self.next()
        self.expect(")")
        while not self.at("{"):
            t = self.next()
            if t.text == ".reqntid":
                dims = [_int(self.next().text)]
                while self.at(","):
                    self.next()
                    dims.append(_int(self.next().text))
                mod.reqntid = tuple(dims)
            elif t.text.startswith("."):
                while self.peek() is not None and not self.peek().text.startswith(".") \
                        and not self.at("{"):
                    self.next()
            else:
                raise PtxSyntaxError(f"unexpected {t.text!r} before the kernel body", t.line)
        self.expect("{")
        while not self.at("}"):
            self.statement()
        self.expect("}")

    # -- body -----------------------------------------------------------------------------

    def statement(self) -> None:
        t = self.peek()
        assert t is not None
        if t.text == ".reg":
            self.next()
            ty = self.next().text.lstrip(".")
            while True:
                name = self.next().text
                count = 1
                if self.at("<"):
                    self.next()
                    count = _int(self.next().text)
                    self.expect(">")
                self.mod.regs[name] = (ty, count)
                if not self.at(","):
                    break
                self.next()
            self.expect(";")
            return
        nxt = self.peek(1)
        if t.kind == "word" and nxt is not None and nxt.text == ":":
            self.next()
            self.next()
            self.mod.body.append(Label(t.text, t.line))
            return
        guard, negated = None, False
        if t.text == "@":
            self.next()
            if self.at("!"):
                self.next()
                negated = True
            g = self.next()
            if g.kind != "reg":
                raise PtxSyntaxError(f"expected a predicate after '@', found {g.text!r}", g.line)
            guard = Reg(g.text)
        op = self.next()
        if op.kind != "word":
            raise PtxSyntaxError(f"expected an instruction, found {op.text!r}", op.line)
        operands: list[Operand] = []
        while not self.at(";"):
            operands.append(self.operand())
            if self.at(","):
                self.next()
            elif not self.at(";"):
                bad = self.next()
                raise PtxSyntaxError(f"unexpected {bad.text!r} in operands", bad.line)
        end = self.expect(";")
        ann = None
        comment = self.comments.get(end.line)
        if comment is not None:
            m = _ANNOTATION.match(comment)
            if m is not None:
                ann = Annotation(int(m.group(1)), int(m.group(2)), m.group(3))
        text = self.lines[op.line - 1].strip() if op.line - 1 < len(self.lines) else op.text
        while self.markers and self.markers[0][0] < op.line:
            m = self.markers.pop(0)[1]
            self.copies[int(m.group(1))] = int(m.group(2))  # type: ignore[union-attr]
        self.mod.body.append(Instr(self.nins, op.line, guard, negated, op.text.lstrip("."),
                                   tuple(operands), ann, text,
                                   tuple(sorted(self.copies.items()))))
        self.nins += 1

    def operand(self) -> Operand:
        t = self.next()
        if t.kind == "reg":
            return Reg(t.text)
        if t.kind == "float":
            bits = 32 if t.text[1] in "fF" else 64
            return Imm(int(t.text[2:], 16), bits)
        if t.kind in ("int", "hex"):
            return Imm(_int(t.text))
        if t.text == "_":
            return Sink()
        if t.text == "!":
            r = self.next()
            if r.kind != "reg":
                raise PtxSyntaxError(f"expected a predicate after '!', found {r.text!r}", r.line)
            return Neg(Reg(r.text))
        if t.text == "-" and self.peek() is not None:
            raise PtxSyntaxError("unexpected '-'", t.line)
        if t.text == "{":
            items = []
            while not self.at("}"):
                items.append(self.operand())
                if self.at(","):
                    self.next()
            self.expect("}")
            return Vec(tuple(items))
        if t.text == "[":
            base = self.operand()
            offset = 0
            coords = None
            if self.at("+"):
                self.next()
                offset = _int(self.next().text)
            if self.at(","):
                self.next()
                v = self.operand()
                if not isinstance(v, Vec):
                    raise PtxSyntaxError("expected '{...}' coordinates", t.line)
                coords = v
            self.expect("]")
            return Addr(base, offset, coords)
        if t.kind == "word":
            return Sym(t.text)
        raise PtxSyntaxError(f"unexpected operand {t.text!r}", t.line)


def parse(text: str) -> Module:
    """The module in `text` (raises PtxSyntaxError)."""
    return _Parser(text).module()


def float_bits(value: float) -> int:
    """The binary32 bit pattern of a Python float (rounded to f32)."""
    return int.from_bytes(struct.pack(">f", value), "big")
