"""How fast find_code reads a Python file's outline from its lines, against `ast.parse` on the same files,
and how long it takes on hostile files built to make it slow.

    .venv/bin/python bench/bench_outline.py [--tarball django__django-16139.tar.gz ...]

For each tarball (default: django and sympy from the shared SWE-bench tarballs): the CPU time of
`outline.scan` and of `ast.parse` + `outline.from_tree` over its Python files, the ratio, and how
many files the scan declined (left to the parser) or read otherwise than the parser (must be 0).
Then each hostile shape, about 500 KB: the scan's time and what it returned.
"""

from __future__ import annotations

import argparse
import ast
import gc
import sys
import tarfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from swebench_data import swebench_path  # noqa: E402

from harness.tools.retrieval import outline  # noqa: E402

N = 500_000
HOSTILE = {
    "brackets nested 250,000 deep": "x = " + "(" * (N // 2) + ")" * (N // 2) + "\n",
    "99 nested classes, 30 methods each": "".join(
        " " * i + f"class C{i}:\n" + (" " * (i + 1) + "def f(self): pass\n") * 30 for i in range(99)),
    "quotes and backslashes": ('"' * 3 + "\\" * 5) * (N // 8),
    "one string of escaped quotes": "x = '" + "\\'" * (N // 2) + "'\n",
    "160,000 decorators": "@x\n" * (N // 3) + "def f(): pass\n",
    "a triple quote left open": "x = 1\n" + "'''" + "a\n" * (N // 2),
    "35,000 one-line functions": "def f(): pass\n" * (N // 14),
    "lines indented up to 400": "def f():\n" + "".join(" " * (k % 400 + 1) + "x\n" for k in range(1200)),
}


def _python_files(tarball: Path) -> list[str]:
    with tarfile.open(tarball) as archive:
        return [archive.extractfile(m).read().decode("utf-8", "replace")  # type: ignore[union-attr]
                for m in archive if m.isfile() and m.name.endswith((".py", ".pyi"))]


def _parse(text: str) -> outline.Outline | None:
    try:
        return outline.from_tree(ast.parse(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def compare(tarball: Path) -> None:
    texts = _python_files(tarball)
    scanned, parsed = [], []
    start = time.process_time()
    for text in texts:
        scanned.append(outline.scan(text))
    scan_time = time.process_time() - start
    start = time.process_time()
    for text in texts:
        parsed.append(_parse(text))
    parse_time = time.process_time() - start
    declined = sum(1 for s, p in zip(scanned, parsed, strict=True) if s is None and p is not None)
    differ = sum(1 for s, p in zip(scanned, parsed, strict=True) if s is not None and p is not None and s != p)
    print(f"{tarball.name}: {len(texts)} Python files; scan {scan_time:.2f} s, ast.parse {parse_time:.2f} s "
          f"({parse_time / scan_time:.1f}x faster); declined {declined}, read otherwise than the parser {differ}")


def hostile() -> None:
    for name, text in HOSTILE.items():
        start = time.perf_counter()
        found = outline.scan(text)
        took = time.perf_counter() - start
        start = time.perf_counter()
        parsed = _parse(text)
        parse_took = time.perf_counter() - start
        what = "declined" if found is None else f"{len(found)} top-level blocks"
        print(f"  {name:38} {len(text):>8} chars: scan {took:.3f} s ({what}); ast.parse {parse_took:.3f} s "
              f"({'fails' if parsed is None else 'parses'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tarball", action="append", type=Path,
                        help="a source tarball (default: django__django-16139 and sympy__sympy-20590)")
    args = parser.parse_args()
    names = ("django__django-16139", "sympy__sympy-20590")
    tarballs = args.tarball or [swebench_path("repos") / f"{n}.tar.gz" for n in names]
    warnings.simplefilter("ignore")
    gc.disable()                       # as the analysis runs (see lint.gc_paused)
    for tarball in tarballs:
        compare(tarball)
    print("hostile files:")
    hostile()


if __name__ == "__main__":
    main()
