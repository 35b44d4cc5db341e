"""``kperf new-op NAME --like OP``: a new op that works out of the box, from a template.

    kperf new-op rope --like swiglu      # <ops>/rope/ and benchmarks/bench_rope.py

The template is the project's own op OP where it has one, else kperf's reference op of
that name (the ops of kperf's own repository, which the wheel carries as
``kperf.reference``: gemm, fp8_gemm, attention, softmax, rmsnorm, layernorm, swiglu).
Its folder is copied under the new name, every spelling of the old name replaced
(``swiglu`` -> ``rope``, ``SwiGLU`` -> ``Rope``, ``tilelang_swiglu.py`` ->
``tilelang_rope.py``), imports of the template's package pointed at the project's, the
shared modules it imports copied where the project lacks them, and the benchmark file
written from the new op's declaration. The copy is the template's kernel under another
name: it passes the project's tests and compiles for every target as it stands; then its
kernel bodies, reference and cases are the author's (docs/new-op.md).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shutil
import sys
from pathlib import Path

from kperf import project

NAME = re.compile(r"[a-z][a-z0-9_]*")


class NewOpError(ValueError):
    """The name, the template or the project cannot make the op (the message says why)."""


def template_of(proj: project.Project, like: str) -> tuple[Path, str]:
    """(folder, package name) of the template op: the project's own op, else kperf's."""
    own = proj.ops_dir / like
    if (own / "__init__.py").is_file():
        return own, proj.ops
    spec = importlib.util.find_spec("kperf.reference")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        if (Path(root) / like / "__init__.py").is_file():
            return Path(root) / like, "kernels"
    known = sorted(p.name for r in roots for p in Path(r).iterdir()
                   if (p / "__init__.py").is_file())
    raise NewOpError(f"--like {like}: neither an op of {proj.ops} nor one of kperf's "
                     f"reference ops ({', '.join(known)})")


def renamed(text: str, old: str, new: str) -> str:
    """``text`` with every spelling of ``old`` replaced by ``new`` in its style: ``swiglu``
    -> ``rope``, ``SWIGLU`` -> ``ROPE``, ``SwiGLU`` or ``Swiglu`` -> ``Rope``."""
    camel = "".join(part[:1].upper() + part[1:] for part in new.split("_"))

    def spell(match: re.Match[str]) -> str:
        found = match.group(0)
        if found.islower():
            return new
        return new.upper() if found.isupper() else camel

    return re.sub(re.escape(old), spell, text, flags=re.IGNORECASE)


def retargeted(text: str, old_package: str, new_package: str) -> str:
    """Imports of ``old_package`` (``from kernels.rownorm import ...``) made imports of
    ``new_package``; nothing else of the text is touched."""
    if old_package == new_package:
        return text
    return re.sub(rf"^(\s*(?:from|import)\s+){re.escape(old_package)}(?=[.\s])",
                  rf"\g<1>{new_package}", text, flags=re.MULTILINE)


def _imported_modules(path: Path, package: str) -> set[str]:
    """The ``package.x.y`` modules a file imports (absolute imports)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n for n in names if n.split(".")[0] == package and "." in n}


def _shared_modules(files: list[Path], proj: project.Project, source_root: Path,
                    new: str) -> dict[Path, Path]:
    """{file of the template's package: where it goes in the project} for the modules the
    new op's files import from outside its folder that the project lacks. An import of
    another op's module the project does not have is refused, naming it."""
    copies: dict[Path, Path] = {}
    for path in files:
        for module in _imported_modules(path, proj.ops):
            parts = module.split(".")[1:]
            if parts[0] == new or (proj.ops_dir.joinpath(*parts).with_suffix(".py")).is_file() \
                    or (proj.ops_dir.joinpath(*parts) / "__init__.py").is_file():
                continue
            source = source_root.joinpath(*parts).with_suffix(".py")
            if len(parts) == 1 and source.is_file():
                copies[source] = proj.ops_dir / source.name
            elif len(parts) > 1 and (source_root / parts[0] / "__init__.py").is_file():
                raise NewOpError(f"the template imports {module}, a module of op "
                                 f"{parts[0]}, which {proj.ops} does not have: make it first "
                                 f"(kperf new-op {parts[0]} --like {parts[0]})")
    return copies


def new_op(proj: project.Project, name: str, like: str) -> list[Path]:
    """Write op ``name`` from template ``like``; the files written, relative to the root."""
    if not NAME.fullmatch(name) or name in ("reference",):
        raise NewOpError(f"{name!r}: an op's name is a lower-case Python identifier "
                         f"(rope, fused_moe)")
    target = proj.ops_dir / name
    if target.exists():
        raise NewOpError(f"{target.relative_to(proj.root)} exists already")
    if not (proj.ops_dir / "__init__.py").is_file():
        raise NewOpError(f"{proj.ops_dir.relative_to(proj.root)}/__init__.py: the ops "
                         f"package {proj.ops} does not exist (kperf.toml)")
    source, source_package = template_of(proj, like)
    written: list[Path] = []
    target.mkdir()
    try:
        for path in sorted(p for p in source.rglob("*") if p.is_file()
                           and "__pycache__" not in p.parts and p.suffix != ".pyc"):
            rel = Path(renamed(path.relative_to(source).as_posix(), like, name))
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            text = retargeted(path.read_text(), source_package, proj.ops)
            dest.write_text(renamed(text, like, name))
            written.append(dest)
        copies = _shared_modules([p for p in written if p.suffix == ".py"], proj,
                                 source.parent, name)
    except Exception:
        shutil.rmtree(target)
        raise
    for src, dest in copies.items():
        dest.write_text(retargeted(src.read_text(), source_package, proj.ops))
        written.append(dest)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="docs/new-op.md walks through it")
    parser.add_argument("name", help="the new op's name: its folder, its benchmark file")
    parser.add_argument("--like", required=True, metavar="OP",
                        help="the template: an op of this project, or of kperf's reference "
                             "ops (gemm, fp8_gemm, attention, softmax, rmsnorm, layernorm, "
                             "swiglu)")
    args = parser.parse_args(argv)
    from kperf import check

    try:
        proj = project.find()
        written = new_op(proj, args.name, args.like)
        bench = check.write_bench_file(proj, args.name)
    except (NewOpError, project.ProjectError) as err:
        print(f"kperf new-op: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(f"written: {path.relative_to(proj.root)}")
    print(f"written: {bench}")
    folder = (proj.ops_dir / args.name).relative_to(proj.root)
    print(f"\nop {args.name} is {args.like}'s kernel under a new name. Now yours:\n"
          f"  {folder}/spec.py        its cases (model layers), dtypes, flops, bytes\n"
          f"  {folder}/reference.py   inputs and the PyTorch reference\n"
          f"  {folder}/tilelang_{args.name}.py, triton_{args.name}.py   the kernels\n"
          f"then `kperf check --write {args.name}` (its benchmark file follows its cases) and "
          f"the tests (docs/new-op.md).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
