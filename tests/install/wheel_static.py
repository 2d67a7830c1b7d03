"""What scripts/check_wheels.sh checks in every wheel of the set without
running it: the name and the WHEEL file's tag, the metadata's version and
Python range, and in each ELF file (the extension and the command) the
architecture, the libraries it needs (glibc's only), the newest glibc
symbol version it needs (2.28 at most, no GLIBCXX: libc++ is linked in)
and that it is stripped. One line per wheel.

Usage: wheel_static.py VERSION WHEEL..."""

import email.parser
import io
import os
import re
import sys
import zipfile

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
LOADERS = {"x86_64": "ld-linux-x86-64.so.2", "aarch64": "ld-linux-aarch64.so.1"}
GLIBC_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1"}
NEWEST_GLIBC = (2, 28)


def check_elf(name, data, arch):
    """(newest glibc version needed, NEEDED) of one ELF file; asserts the rest."""
    elf = ELFFile(io.BytesIO(data))
    assert elf.elfclass == 64 and elf["e_machine"] == MACHINES[arch], \
        f"{name}: {elf['e_machine']}, not {arch}"
    sections = [s.name for s in elf.iter_sections()]
    unstripped = [s for s in sections if s == ".symtab" or s.startswith(".debug")]
    assert not unstripped, f"{name}: not stripped ({', '.join(unstripped)})"
    needed = set()
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            needed |= {tag.needed for tag in section.iter_tags("DT_NEEDED")}
    outside = needed - GLIBC_LIBS - {LOADERS[arch]}
    assert not outside, f"{name}: needs {sorted(outside)}, outside the manylinux policy"
    versions = set()
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for _, aux in section.iter_versions():
                versions |= {a.name for a in aux}
    foreign = [v for v in versions if not v.startswith("GLIBC_")]
    assert not foreign, f"{name}: needs {sorted(foreign)}"
    glibc = max(tuple(int(p) for p in v[len("GLIBC_"):].split(".")) for v in versions
                if v[len("GLIBC_"):][:1].isdigit())
    assert glibc <= NEWEST_GLIBC, f"{name}: needs GLIBC_{'.'.join(map(str, glibc))}"
    return glibc, needed


def check_wheel(path, version):
    name = os.path.basename(path)
    m = re.fullmatch(rf"lmdbloader-{re.escape(version)}-(cp3\d+)-(cp3\d+)-manylinux_2_28_(x86_64|aarch64)\.whl",
                     name)
    assert m and m[1] == m[2], f"{name}: not lmdbloader-{version}-cpXY-cpXY-manylinux_2_28_<arch>.whl"
    tag, arch = m[1], m[3]
    with zipfile.ZipFile(path) as z:
        info = f"lmdbloader-{version}.dist-info"
        wheel = email.parser.Parser().parsestr(z.read(f"{info}/WHEEL").decode())
        assert wheel.get_all("Tag") == [f"{tag}-{tag}-manylinux_2_28_{arch}"], wheel.get_all("Tag")
        assert wheel["Root-Is-Purelib"] == "false"
        meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
        assert meta["Version"] == version and meta["Requires-Python"], (meta["Version"], meta["Requires-Python"])
        suffix = f".cpython-{tag[2:]}-{arch}-linux-gnu.so"
        elves = [n for n in z.namelist() if n == f"lmdbloader/_core{suffix}" or
                 n == f"lmdbloader-{version}.data/scripts/lmdbloader"]
        assert len(elves) == 2, f"{name}: no lmdbloader/_core{suffix} or no command: {z.namelist()}"
        found = [check_elf(f"{name}:{n}", z.read(n), arch) for n in elves]
        sizes = {os.path.basename(n).split(".")[0]: z.getinfo(n).file_size for n in elves}
    glibc = max(g for g, _ in found)
    needed = sorted(set().union(*(n for _, n in found)))
    print(f"{name}: {arch}, {meta['Requires-Python']}, glibc {'.'.join(map(str, glibc))}, needs "
          f"{' '.join(needed)}, stripped (_core {sizes['_core'] / 1e6:.1f} MB, "
          f"command {sizes['lmdbloader'] / 1e6:.1f} MB)")


version, wheels = sys.argv[1], sys.argv[2:]
assert wheels, "no wheel given"
for w in wheels:
    check_wheel(w, version)
