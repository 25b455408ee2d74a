"""`pip install .` (not editable) gives a working package: setup.py builds a
wheel that holds every package module, protocols/defaults.json, the op library
and its _build_info.json, declares the he / federated / all extras, and runs
`tp.share` / `tp.reveal` from an install directory, with the source tree
nowhere on the path.

The wheel is built once per session from a copy of the source files (git's
list), so the build writes nothing into the checkout; the C++ build takes a
few minutes on two cores, hence `slow`. Installing uses --no-deps --target:
the venv's TensorFlow is reused, nothing is downloaded.
"""
from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
BUILD_TIMEOUT_S = 3600   # the whole op library, one compiler process, shared cores
pytestmark = pytest.mark.slow


def _source_files() -> List[str]:
    """Tracked and untracked-but-not-ignored files (so new modules count),
    minus the venv link: what a checkout of this working tree would hold."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.fail(f"the packaging test copies the sources git lists; git failed: {e}")
    names = sorted({n for n in out.decode().split("\0") if n})
    return [n for n in names if not n.startswith((".venv", "build/", "dist/"))]


def _copy_tree(dest: Path) -> None:
    """Copies the listed files, symlinks as symlinks (tf_privpy/protocols
    links to ../protocols in the checkout)."""
    for name in _source_files():
        src = ROOT / name
        if not os.path.lexists(src):   # deleted in the working tree, not yet in git
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), target)
        else:
            shutil.copy2(src, target)


def _pip(*args: str, cwd: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args,
           "-c", str(CONSTRAINTS)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)
    assert proc.returncode == 0, (f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n"
                                  f"{proc.stderr[-4000:]}")


def _checkout_state() -> Dict[str, object]:
    """What a build in the checkout would leave behind: build dirs, egg-info,
    and the op library's info file (setup.py used to rewrite it always)."""
    info = ROOT / "tf_privpy" / "_build_info.json"
    return {
        "top": sorted(p.name for p in ROOT.iterdir()
                      if p.name in ("build", "dist") or p.name.endswith(".egg-info")),
        "info": (info.stat().st_mtime_ns, info.read_bytes()) if info.exists() else None,
    }


@pytest.fixture(scope="session")
def wheel_install(tmp_path_factory):
    """(wheel path, install dir): built and installed once per session."""
    tmp = tmp_path_factory.mktemp("packaging")
    src, dist, site = tmp / "src", tmp / "dist", tmp / "site"
    before = _checkout_state()
    _copy_tree(src)
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src), cwd=src)
    wheels = sorted(dist.glob("tf_privpy-*.whl"))
    assert len(wheels) == 1, f"expected one tf_privpy wheel in {dist}, found {wheels}"
    _pip("install", "--no-deps", "--target", str(site), str(wheels[0]), cwd=tmp)
    assert _checkout_state() == before, "building the wheel wrote into the source tree"
    return wheels[0], site


def test_wheel_contents(wheel_install):
    wheel, _ = wheel_install
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
        info = json.loads(z.read("tf_privpy/_build_info.json"))
    for required in ("tf_privpy/_tf_privpy_ops.so", "tf_privpy/_build_info.json",
                     "tf_privpy/protocols/defaults.json", "tf_privpy/protocols/loader.py",
                     "tf_privpy/he/paillier.py", "tf_privpy/converters/__init__.py"):
        assert required in names, f"{required} is not in {wheel.name}"
    assert "tf_privpy/config_defaults.json" not in names
    # Every module of the package directories ships (package names, not file
    # lists: modules added later are picked up).
    for pkg_dir, installed in (("protocols/mpc", "tf_privpy/protocols/mpc"),
                               ("protocols/he", "tf_privpy/protocols/he"),
                               ("tf_privpy/he", "tf_privpy/he")):
        for py in (ROOT / pkg_dir).glob("*.py"):
            assert f"{installed}/{py.name}" in names, f"{pkg_dir}/{py.name} is not in the wheel"
    import tensorflow as tf
    assert info["tf_version"] == tf.__version__ and info["library"] == "_tf_privpy_ops.so"
    # Extras.
    assert sorted(meta.get_all("Provides-Extra")) == ["all", "federated", "he"]
    requires = meta.get_all("Requires-Dist")
    for req, extra in (("tensorflow-federated==0.87.0", "federated"),
                       ("jax==0.4.13", "federated"), ("phe==1.5.0", "he"),
                       ("phe==1.5.0", "all"), ("tensorflow-federated==0.87.0", "all")):
        assert any(r.startswith(req) and f'extra == "{extra}"' in r for r in requires), \
            (req, extra, requires)
    assert any(r.startswith("tensorflow") and "<2.15.0" in r and "extra" not in r
               for r in requires), requires


_PROGRAM = """
import json, sys
import numpy as np
import tf_privpy as tp
from tf_privpy.protocols import loader
tp.init()
z = tp.reveal(tp.share([1.5, 2.0]) * tp.share([2.0, -1.0]))
print(z)
print("RESULT " + json.dumps({"file": tp.__file__, "values": np.asarray(z).tolist(),
                              "library": loader.library_path(), "path": sys.path}))
"""


def test_installed_package_runs_outside_the_source_tree(wheel_install, tmp_path):
    _, site = wheel_install
    # Only the install dir on the path: no PYTHONPATH of the test run (which
    # names the checkout), no override of the library's location.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TF_PRIVPY_OPS_LIBRARY", "PYTHONSTARTUP")}
    env.update(PYTHONPATH=str(site), TF_CPP_MIN_LOG_LEVEL="3")
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    proc = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    np.testing.assert_allclose(result["values"], [3.0, -2.0], atol=1e-4)
    assert "[ 3. -2.]" in proc.stdout          # what `print(tp.reveal(...))` shows
    site_r = site.resolve()
    assert Path(result["file"]).resolve().is_relative_to(site_r), result["file"]
    assert Path(result["library"]).resolve().is_relative_to(site_r), result["library"]
    # No source folder is importable: only the install dir and the
    # interpreter's own paths (its venv may live inside the checkout, as .venv)
    prefix = Path(sys.prefix).resolve()
    leaks = [p for p in result["path"] if p and Path(p).resolve().is_relative_to(ROOT)
             and not Path(p).resolve().is_relative_to(prefix)]
    assert not leaks, result["path"]
