"""Checks that a file is a shared library this process can load and that it
exports a function, without loading it.

dlopen trusts the file: a truncated copy maps pages past the end of the file
and dies with SIGBUS when it touches them, and any library runs its
constructors before one can look for a symbol. So the file is read here
first, with pread only (a mapping of a file that shrinks would raise SIGBUS
here too): its ELF header must match this machine, every program header,
segment and section must lie inside the file, and the dynamic symbol table
(from the section headers, else from the dynamic segment, as the loader
finds it) must define the function. check() raises NotLoadable saying what
is wrong, in words for a user.
"""
import os
import platform
import stat
import struct
import sys

ET_NAMES = {1: "a relocatable object (.o), not a shared library", 2: "an executable, not a shared library",
            4: "a core dump, not a shared library"}
MACHINES = {3: "x86", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390x", 40: "arm", 62: "x86_64", 183: "aarch64",
            243: "riscv", 258: "loongarch"}
HOST_MACHINE = {"x86_64": 62, "amd64": 62, "i386": 3, "i686": 3, "aarch64": 183, "arm64": 183, "ppc64le": 21,
                "ppc64": 21, "s390x": 22, "riscv64": 243, "loongarch64": 258}
PT_LOAD, PT_DYNAMIC = 1, 2
SHT_NULL, SHT_NOBITS, SHT_DYNSYM = 0, 8, 11
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT, DT_GNU_HASH = 0, 4, 5, 6, 10, 11, 0x6FFFFEF5
STT_FUNC, STT_GNU_IFUNC = 2, 10


class NotLoadable(Exception):
    """The file cannot be loaded; the message says why ("is truncated ...")."""


class _Layout:
    """struct formats of one ELF class (32 or 64 bit), native byte order."""

    def __init__(self, bits: int):
        e = "<" if sys.byteorder == "little" else ">"
        if bits == 64:
            self.header, self.phdr, self.shdr = e + "HHIQQQIHHHHHH", e + "IIQQQQQQ", e + "IIQQQQIIQQ"
            self.sym, self.dyn, self.word = e + "IBBHQQ", e + "qQ", 8
        else:
            self.header, self.phdr, self.shdr = e + "HHIIIIIHHHHHH", e + "IIIIIIII", e + "IIIIIIIIII"
            self.sym, self.dyn, self.word = e + "IIIBBH", e + "iI", 4
        self.bits = bits

    def segment(self, raw):  # -> (type, offset, vaddr, filesz)
        f = struct.unpack(self.phdr, raw)
        return (f[0], f[2], f[3], f[5]) if self.bits == 64 else (f[0], f[1], f[2], f[4])

    def section(self, raw):  # -> (type, offset, size, link, entsize)
        f = struct.unpack(self.shdr, raw)
        return f[1], f[4], f[5], f[6], f[9]

    def symbols(self, raw):  # -> iterator of (name, info, shndx)
        for f in struct.iter_unpack(self.sym, raw):
            yield (f[0], f[1], f[3]) if self.bits == 64 else (f[0], f[3], f[5])


class _Elf:
    def __init__(self, fd: int, size: int):
        self.fd, self.size = fd, size

    def read(self, offset: int, n: int, what: str) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise NotLoadable(f"is truncated or damaged: the file has {self.size} bytes, but byte {offset + n} is "
                              f"needed for {what} (an incomplete copy or download?)")
        data = os.pread(self.fd, n, offset)
        if len(data) != n:
            raise NotLoadable("changed while it was being checked")
        return data

    def inside(self, offset: int, n: int, what: str) -> None:
        if offset < 0 or n < 0 or offset + n > self.size:
            self.read(offset, n, what)  # raises

    def check(self, symbol: str) -> None:
        if self.size == 0:
            raise NotLoadable("is empty (0 bytes)")
        ident = os.pread(self.fd, 16, 0)
        if not ident.startswith(b"\x7fELF"):
            raise NotLoadable(f"is not a shared library (not an ELF file: it begins with {ident[:8]!r})")
        if len(ident) < 16 or ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise NotLoadable("is truncated or damaged: its ELF identification is incomplete or invalid")
        bits, host_bits = 32 * ident[4], struct.calcsize("P") * 8
        if bits != host_bits:
            raise NotLoadable(f"is a {bits}-bit library; this Python is {host_bits}-bit")
        if ("little" if ident[5] == 1 else "big") != sys.byteorder:
            raise NotLoadable(f"is a {'little' if ident[5] == 1 else 'big'}-endian library; this machine is "
                              f"{sys.byteorder}-endian")
        self.lay = lay = _Layout(bits)
        (e_type, machine, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, _) = struct.unpack(
            lay.header, self.read(16, struct.calcsize(lay.header), "ELF header"))
        if e_type != 3:
            raise NotLoadable("is " + ET_NAMES.get(e_type, f"an ELF file of type {e_type}, not a shared library"))
        host = HOST_MACHINE.get(platform.machine().lower())
        if host is not None and machine != host:
            raise NotLoadable(f"is built for {MACHINES.get(machine, f'machine {machine}')}; this machine is "
                              f"{platform.machine()}")
        if phnum == 0 or phentsize != struct.calcsize(lay.phdr):
            raise NotLoadable("is damaged: it has no valid program headers")
        table = self.read(phoff, phnum * phentsize, "program headers")
        self.segments = [lay.segment(table[i * phentsize:(i + 1) * phentsize]) for i in range(phnum)]
        for i, (kind, offset, _, filesz) in enumerate(self.segments):
            if kind in (PT_LOAD, PT_DYNAMIC):
                self.inside(offset, filesz, f"segment {i}")
        if not any(s[0] == PT_LOAD for s in self.segments):
            raise NotLoadable("is damaged: it has no loadable segment")
        if not any(s[0] == PT_DYNAMIC for s in self.segments):
            raise NotLoadable("is not a shared library (it has no dynamic section)")
        sections = self.sections(shoff, shentsize, shnum)
        found = self.find_in_sections(sections, symbol) if sections else None
        if found is None:
            found = self.find_in_dynamic(symbol)
        if not found:
            raise NotLoadable(f"does not export the function {symbol}")

    def sections(self, shoff: int, shentsize: int, shnum: int) -> list:
        if shoff == 0:
            return []
        if shentsize != struct.calcsize(self.lay.shdr):
            raise NotLoadable("is damaged: its section headers have the wrong size")
        if shnum == 0:  # extended numbering: the count is in section 0
            shnum = self.lay.section(self.read(shoff, shentsize, "section headers"))[2]
        table = self.read(shoff, shnum * shentsize, "section headers")
        out = [self.lay.section(table[i * shentsize:(i + 1) * shentsize]) for i in range(shnum)]
        for i, (kind, offset, size, _, _) in enumerate(out):
            if kind not in (SHT_NULL, SHT_NOBITS):
                self.inside(offset, size, f"section {i}")
        return out

    def lookup(self, symtab: bytes, strtab: bytes, symbol: str) -> bool:
        name = symbol.encode() + b"\0"
        offsets, at = set(), strtab.find(name)
        while at >= 0:  # the name may also be the tail of a longer one
            offsets.add(at)
            at = strtab.find(name, at + 1)
        return any(n in offsets and shndx != 0 and (info & 0xF) in (STT_FUNC, STT_GNU_IFUNC)
                   for n, info, shndx in self.lay.symbols(symtab))

    def find_in_sections(self, sections: list, symbol: str):
        """True/False from the .dynsym section; None when there is none."""
        for i, (kind, offset, size, link, entsize) in enumerate(sections):
            if kind != SHT_DYNSYM:
                continue
            if entsize != struct.calcsize(self.lay.sym) or not 0 < link < len(sections):
                raise NotLoadable("is damaged: its dynamic symbol table is invalid")
            _, str_off, str_size, _, _ = sections[link]
            size -= size % entsize
            return self.lookup(self.read(offset, size, "dynamic symbols"),
                               self.read(str_off, str_size, "dynamic symbol names"), symbol)
        return None

    def file_offset(self, vaddr: int, n: int, what: str) -> int:
        for kind, offset, start, filesz in self.segments:
            if kind == PT_LOAD and start <= vaddr and vaddr + n <= start + filesz:
                return offset + vaddr - start
        raise NotLoadable(f"is damaged: its {what} lie outside its loadable segments")

    def find_in_dynamic(self, symbol: str) -> bool:
        """The loader's way: DT_SYMTAB and DT_STRTAB, counted by DT_HASH or DT_GNU_HASH."""
        kind, offset, _, filesz = next(s for s in self.segments if s[0] == PT_DYNAMIC)
        tags = {}
        for tag, value in struct.iter_unpack(self.lay.dyn, self.read(offset, filesz - filesz % (self.lay.word * 2),
                                                                     "dynamic section")):
            if tag == DT_NULL:
                break
            tags.setdefault(tag, value)
        if DT_SYMTAB not in tags or DT_STRTAB not in tags or DT_STRSZ not in tags:
            raise NotLoadable("is damaged: it has no dynamic symbol table")
        entsize = struct.calcsize(self.lay.sym)
        count = self.symbol_count(tags)
        strtab = self.read(self.file_offset(tags[DT_STRTAB], tags[DT_STRSZ], "symbol names"), tags[DT_STRSZ],
                           "dynamic symbol names")
        symtab = self.read(self.file_offset(tags[DT_SYMTAB], count * entsize, "symbols"), count * entsize,
                           "dynamic symbols")
        return self.lookup(symtab, strtab, symbol)

    def symbol_count(self, tags: dict) -> int:
        def words(vaddr, n, size, what):
            raw = self.read(self.file_offset(vaddr, n * size, what), n * size, what)
            return struct.unpack(f"{'<' if sys.byteorder == 'little' else '>'}{n}{'I' if size == 4 else 'Q'}", raw)
        if DT_HASH in tags:
            return words(tags[DT_HASH], 2, 4, "symbol hash table")[1]
        if DT_GNU_HASH not in tags:
            raise NotLoadable("is damaged: it has no symbol hash table")
        base = tags[DT_GNU_HASH]
        nbuckets, symoffset, bloom_size, _ = words(base, 4, 4, "symbol hash table")
        buckets_at = base + 16 + bloom_size * self.lay.word
        buckets = words(buckets_at, nbuckets, 4, "symbol hash buckets") if nbuckets else ()
        last = max(buckets, default=0)
        if last < symoffset:
            return symoffset
        chain_at = buckets_at + 4 * nbuckets
        while not words(chain_at + 4 * (last - symoffset), 1, 4, "symbol hash chain")[0] & 1:
            last += 1  # the last bucket's chain ends at the first odd hash
        return last + 1


def check(path: str, symbol: str) -> None:
    """Raises NotLoadable unless `path` is a shared library for this machine,
    whole, that defines the function `symbol`."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NotLoadable("does not exist") from None
    except OSError as e:
        raise NotLoadable(f"cannot be read ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise NotLoadable("is a directory, not a plugin library (a .so file)")
    if not stat.S_ISREG(st.st_mode):
        raise NotLoadable("is not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise NotLoadable(f"cannot be read ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotLoadable("is not a regular file")
        _Elf(fd, st.st_size).check(symbol)
    except OSError as e:
        raise NotLoadable(f"cannot be read ({e.strerror})") from None
    finally:
        os.close(fd)
