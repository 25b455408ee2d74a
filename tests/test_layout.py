"""Architecture rules as tests: one-way dependencies
tf_privpy -> converters -> protocols -> ops, no module over ~800 lines."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 800


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
    assert not big, "modules over ~800 lines:\n" + "\n".join(big)


def test_top_level_layout():
    for name in ("tf_privpy", "ops", "protocols", "converters", "examples", "benchmarks",
                 "BUILD", "WORKSPACE", "setup.py", "README.md"):
        assert os.path.exists(os.path.join(ROOT, name)), name
