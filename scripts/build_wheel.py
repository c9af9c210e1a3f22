#!/usr/bin/env python3
"""Builds the ggemm wheel: the Python package with libggemm.so inside.

    scripts/build_wheel.py --library build/libggemm.so [--out dist]

The package loads its library through ctypes (no Python extension), so the
wheel is `py3-none-<platform>`: any CPython 3, one platform. The platform
tag is read off the library itself: manylinux_2_<N>_x86_64, N the newest
glibc symbol version libggemm.so needs (2.34 when built on Debian 12), so
pip refuses the wheel where that glibc is missing instead of failing at
import. The wheel is assembled here with the standard library (a wheel is a
zip of the package and a .dist-info folder, PEP 427), so building it needs
no build tools, network or CUDA.
"""
import argparse
import base64
import hashlib
import os
import re
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_DIR = os.path.join(ROOT, "python")
PACKAGE_DIR = os.path.join(PYTHON_DIR, "ggemm")


def project_field(name):
    """A string field of [project] in python/pyproject.toml."""
    with open(os.path.join(PYTHON_DIR, "pyproject.toml")) as f:
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % name, f.read(), re.M)
    if not m:
        sys.exit(f"build_wheel: no {name} in python/pyproject.toml")
    return m.group(1)


def glibc_minor(library_bytes):
    """The newest GLIBC_2.<N> version the library's symbols need (its
    version-requirement strings)."""
    minors = [int(m) for m in re.findall(rb"GLIBC_2\.(\d+)\b", library_bytes)]
    if not minors:
        sys.exit("build_wheel: the library names no GLIBC_2.* version; is it a Linux shared library?")
    return max(minors)


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", required=True, help="libggemm.so to ship (a link is followed)")
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"), help="folder for the wheel")
    args = ap.parse_args()

    with open(os.path.realpath(args.library), "rb") as f:
        library = f.read()
    if not library.startswith(b"\x7fELF") or library[18:20] != b"\x3e\x00":  # e_machine EM_X86_64
        sys.exit(f"build_wheel: {args.library} is not an x86-64 ELF shared library")
    name, version = project_field("name"), project_field("version")
    with open(os.path.join(PACKAGE_DIR, "__init__.py")) as f:
        if f'__version__ = "{version}"' not in f.read():
            sys.exit(f"build_wheel: ggemm/__init__.py's __version__ is not pyproject's {version}")
    tag = f"py3-none-manylinux_2_{glibc_minor(library)}_x86_64"
    dist_info = f"{name}-{version}.dist-info"

    files = []  # (name in the wheel, bytes)
    for entry in sorted(os.listdir(PACKAGE_DIR)):
        if entry.endswith(".py") or entry == "py.typed":
            with open(os.path.join(PACKAGE_DIR, entry), "rb") as f:
                files.append((f"ggemm/{entry}", f.read()))
    # The package's loader looks in ggemm/_lib/ for libggemm.so.
    files.append(("ggemm/_lib/libggemm.so", library))
    with open(os.path.join(PYTHON_DIR, "README.md"), "rb") as f:
        readme = f.read().decode()
    metadata = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: {project_field('description')}\nRequires-Python: {project_field('requires-python')}\n"
        "Classifier: Programming Language :: Python :: 3\nClassifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Environment :: GPU :: NVIDIA CUDA\nProvides-Extra: test\nRequires-Dist: pytest; extra == \"test\"\n"
        "Description-Content-Type: text/markdown\n\n" + readme
    )
    files.append((f"{dist_info}/METADATA", metadata.encode()))
    wheel = f"Wheel-Version: 1.0\nGenerator: ggemm scripts/build_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
    files.append((f"{dist_info}/WHEEL", wheel.encode()))
    record = [record_line(n, d) for n, d in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{name}-{version}-{tag}.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))  # reproducible
            info.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    print(path)


if __name__ == "__main__":
    main()
