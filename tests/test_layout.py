"""Architecture rules as tests: one-way dependencies
tf_privpy -> converters -> protocols -> ops, no module over 600 lines."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 600


def py_files(folder):
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def imports(path):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


@pytest.mark.parametrize("layer,allowed", [
    ("protocols", ()),                            # only relative imports of itself
    ("converters", ("tf_privpy.protocols",)),     # may use protocols, nothing above
])
def test_no_upward_imports(layer, allowed):
    bad = []
    for path in py_files(layer):
        for mod in imports(path):
            if mod == "tf_privpy" or mod.startswith("tf_privpy."):
                if not any(mod == a or mod.startswith(a + ".") for a in allowed):
                    bad.append(f"{os.path.relpath(path, ROOT)} imports {mod}")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_examples_and_benchmarks_use_the_public_api_only():
    bad = []
    for folder in ("examples", "benchmarks"):
        for path in py_files(folder):
            for mod in imports(path):
                if mod.startswith(("protocols", "converters", "tf_privpy.protocols",
                                   "tf_privpy.converters")):
                    bad.append(f"{os.path.relpath(path, ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_ops_has_no_python():
    assert not list(py_files("ops"))


def test_module_size():
    big = []
    for folder in ("tf_privpy", "protocols", "converters", "ops", "examples", "benchmarks"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if f.endswith((".py", ".cc", ".h")):
                    p = os.path.join(dirpath, f)
                    n = sum(1 for _ in open(p))
                    if n > MAX_LINES:
                        big.append(f"{os.path.relpath(p, ROOT)}: {n} lines")
    assert not big, "modules over 600 lines:\n" + "\n".join(big)


def test_top_level_layout():
    for name in ("tf_privpy", "ops", "protocols", "converters", "examples", "benchmarks",
                 "BUILD", "WORKSPACE", "setup.py", "README.md"):
        assert os.path.exists(os.path.join(ROOT, name)), name


# ------------------------------------------------------------- import circles
SOURCE_ROOTS = {"tf_privpy": "tf_privpy", "protocols": "tf_privpy.protocols",
                "converters": "tf_privpy.converters"}


def _modules():
    """{dotted module name: (path, is_package)} of tf_privpy's three source
    folders, under the names they are imported as."""
    mods = {}
    for folder, dotted in SOURCE_ROOTS.items():
        for path in py_files(folder):
            rel = os.path.relpath(path, os.path.join(ROOT, folder))[:-3].split(os.sep)
            pkg = rel[-1] == "__init__"
            name = ".".join([dotted] + (rel[:-1] if pkg else rel))
            mods[name] = (path, pkg)
    return mods


def _import_graph():
    """Every import, at module level or inside a function (a function-level
    import only hides a circle), as edges between our modules."""
    mods = _modules()
    graph = {m: set() for m in mods}
    for name, (path, pkg) in mods.items():
        base = name.split(".") if pkg else name.split(".")[:-1]
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parent = ".".join(base[:len(base) - node.level + 1] +
                                      ([node.module] if node.module else []))
                else:
                    parent = node.module or ""
                targets = [f"{parent}.{a.name}" if f"{parent}.{a.name}" in mods else parent
                           for a in node.names]
            else:
                continue
            # the facade (tf_privpy/__init__.py imports every API module) is
            # what entry points (cluster.py, convert.py) load whole
            graph[name].update(t for t in targets if t in mods and t not in (name, "tf_privpy"))
    return graph


def _circles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    """No two modules import each other, directly or through others, even from
    inside a function. A package's __init__ re-exporting its modules is not a
    circle of theirs: edges into a package count only for names that are not
    submodules. (Fails on a deliberately added `from .registry import OpDef`
    inside protocols/mpc/api/value.py: value <- registry.)"""
    circles = _circles(_import_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


#: protocols/mpc's rooms (DESIGN §2), lowest first: a room imports only rooms
#: below it (and protocols' own loader and config)
MPC_ROOMS = ("runtime", "privpy", "bitwise", "fixedpoint", "api")


def test_mpc_rooms_point_down():
    """runtime <- privpy <- fixedpoint <- api, never the other way. (Fails on a
    deliberately added `from ..api import value` in runtime/placement.py.)"""
    bad = []
    prefix = "tf_privpy.protocols.mpc."
    for name, targets in _import_graph().items():
        if not name.startswith(prefix) or name.count(".") < 4:
            continue
        room = name.split(".")[3]
        for t in targets:
            if t.startswith(prefix) and t.count(".") >= 4:
                other = t.split(".")[3]
                if other in MPC_ROOMS and room in MPC_ROOMS and \
                        MPC_ROOMS.index(other) > MPC_ROOMS.index(room):
                    bad.append(f"{name} imports {t}")
    assert not bad, "upward imports between protocols/mpc's rooms:\n" + "\n".join(bad)
