"""The house rules of the library's layout, checked on the code itself.

- The engine imports nothing of the papers.
- Work beyond the papers (``hacn_core/beyond``) builds on the papers' packages,
  the engine and the backbones; none of them imports it.
- A student who adapts the AWNN chapters copies ``hacn_core/awnn``,
  ``hacn_core/engine`` and the backbone files the AWNN studies train
  (:data:`AWNN_BACKBONES`) and nothing else: the copy imports on its own.
- No module imports another module's private (``_name``) names, and the
  modules' imports form no cycle.
"""

import ast
import functools
import shutil
import subprocess
import sys
import types
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hacn_core"
#: the files of ``hacn_core/models`` that the AWNN studies train (images, graphs, text) and that a
#: copy of the AWNN chapters takes along; they import nothing of the other papers
AWNN_BACKBONES: tuple[str, ...] = ("mlp", "conv", "resnet20", "gin", "seq2seq")


@functools.cache
def _modules() -> types.MappingProxyType[str, Path]:
    """Every module of the package -> its file (read once per session: the tests only read it)."""
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return types.MappingProxyType(out)


@functools.cache
def _imports(path: Path, module: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(imported module, names taken) of every import statement, at any depth of the file (each file is
    parsed once per session: parsing the package is most of these tests' time)."""
    found = []
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # imports for annotations only (``if TYPE_CHECKING:``) load nothing
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_pkg else 0)]
                base = ".".join(anchor + ([base] if base else []))
            if base == "hacn_core":  # ``from hacn_core import awnn`` loads the package hacn_core.awnn
                found += [(f"hacn_core.{a.name}", []) for a in node.names]
                continue
            found.append((base, [a.name for a in node.names]))
    return tuple((m, tuple(names)) for m, names in found if m.split(".")[0] == "hacn_core")


def _resolve(target: str, names: tuple[str, ...], modules: types.MappingProxyType[str, Path]) -> list[str]:
    """The modules an import statement loads: ``from pkg import mod`` loads ``pkg.mod``."""
    out = [target]
    out += [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
    return out


def test_the_engine_imports_nothing_of_the_papers():
    modules = _modules()
    for name, path in modules.items():
        if name.startswith("hacn_core.engine"):
            for target, _ in _imports(path, name):
                assert target.startswith("hacn_core.engine"), (name, target)


def test_work_beyond_the_papers_builds_on_them_and_none_of_them_imports_it():
    modules = _modules()
    papers = ("hacn_core.hacn", "hacn_core.awnn", "hacn_core.gates", "hacn_core.engine", "hacn_core.models")
    beyond_may_use = ("hacn_core.beyond", "hacn_core.hacn", "hacn_core.awnn", "hacn_core.engine", "hacn_core.models")
    assert any(name.startswith("hacn_core.beyond.") for name in modules)
    for name, path in modules.items():
        loaded = [m for target, names in _imports(path, name) for m in _resolve(target, names, modules)]
        if name.startswith(papers):
            assert not any(m.startswith("hacn_core.beyond") for m in loaded), name
        if name.startswith("hacn_core.beyond"):
            assert all(m.startswith(beyond_may_use) for m in loaded), (name, loaded)


def test_awnn_imports_only_itself_the_engine_and_its_backbones():
    modules = _modules()
    backbones = tuple(f"hacn_core.models.{b}" for b in AWNN_BACKBONES)
    allowed = ("hacn_core.awnn", "hacn_core.engine")
    for name, path in modules.items():
        if name.startswith("hacn_core.awnn"):
            for target, names in _imports(path, name):
                loaded = [m for m in _resolve(target, names, modules) if m != "hacn_core.models"]
                assert all(m.startswith(allowed) or m in backbones for m in loaded), (name, target)
    for b in AWNN_BACKBONES:  # the backbones themselves stay inside that copy (lazy imports included)
        name = f"hacn_core.models.{b}"
        for target, _ in _imports(modules[name], name):
            if target.startswith("hacn_core.gates"):
                continue  # only the gated MLP kind, imported where it is built (never by AWNN)
            assert target.startswith(allowed) or target in backbones, (name, target)


def test_a_copy_of_awnn_and_the_engine_imports_on_its_own(tmp_path):
    root = tmp_path / "student" / "hacn_core"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(PKG / "engine", root / "engine", ignore=ignore)
    shutil.copytree(PKG / "awnn", root / "awnn", ignore=ignore)
    (root / "models").mkdir()
    (root / "models" / "__init__.py").write_text("")
    for b in AWNN_BACKBONES:
        shutil.copy(PKG / "models" / f"{b}.py", root / "models" / f"{b}.py")
    studies = sorted(p.stem for p in (PKG / "awnn" / "studies").glob("*.py") if p.stem != "__init__")
    code = "import importlib\n" + "".join(
        f"importlib.import_module('hacn_core.awnn.studies.{s}')\n" for s in studies) + "print('ok')"
    done = subprocess.run([sys.executable, "-c", code], cwd=root.parent, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root.parent), "HOME": str(tmp_path)},
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_no_module_imports_a_private_name_of_another():
    modules = _modules()
    for name, path in modules.items():
        for target, names in _imports(path, name):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            assert not private or target == name, (name, target, private)


def test_the_modules_form_no_import_cycle():
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        for target, names in _imports(path, name):
            for dep in _resolve(target, names, modules):
                if dep in modules and dep != name:
                    graph[name].add(dep)
    # a package imports its own __init__ when a submodule is loaded: those edges are not cycles of the code
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in graph[node]:
            if node.startswith(dep + "."):
                continue  # a module reaching its own package's face
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(trail + [node, dep]))
            if dep not in state:
                visit(dep, trail + [node])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
