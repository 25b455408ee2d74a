"""Builds the wheel that tests/test_packaging.py checks, and installs it.

`pip wheel` runs on a copy of the source files (git's list), so the build
writes nothing into the checkout (checked here: the checkout's build dirs,
egg-info and the op library's info file are the same before and after); the
wheel is then installed with --no-deps --target (the venv's TensorFlow is
reused, nothing is downloaded).

`make test` runs it as a step of its own before pytest, into build/wheel/
(`make wheel`: rebuilt only when a tracked file changed), and points the test
at it with TF_PRIVPY_TEST_WHEEL_DIR; pytest alone builds into a temporary
directory through `build()`. Usage: python tools/build_test_wheel.py OUT_DIR
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
BUILD_TIMEOUT_S = 3600   # the whole op library, one compiler process, shared cores
#: written last into OUT_DIR: the build and the install completed
STAMP = ".built"


class WheelBuildError(RuntimeError):
    """The wheel could not be built or installed, or the build wrote into the checkout."""


def source_files() -> List[str]:
    """Tracked and untracked-but-not-ignored files (so new modules count),
    minus the venv link: what a checkout of this working tree would hold."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise WheelBuildError(f"the packaging check copies the sources git lists; git failed: {e}")
    names = sorted({n for n in out.decode().split("\0") if n})
    return [n for n in names if not n.startswith((".venv", "build/", "dist/"))]


def copy_tree(dest: Path) -> None:
    """Copies the listed files, symlinks as symlinks (tf_privpy/protocols
    links to ../protocols in the checkout)."""
    for name in source_files():
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
    if proc.returncode != 0:
        raise WheelBuildError(f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n"
                              f"{proc.stderr[-4000:]}")


def checkout_state() -> Dict[str, object]:
    """What a build in the checkout would leave behind: build dirs, egg-info,
    and the op library's info file (setup.py used to rewrite it always)."""
    info = ROOT / "tf_privpy" / "_build_info.json"
    return {
        "top": sorted(p.name for p in ROOT.iterdir()
                      if p.name in ("build", "dist") or p.name.endswith(".egg-info")),
        "info": (info.stat().st_mtime_ns, info.read_bytes()) if info.exists() else None,
    }


def build(out: Path) -> Tuple[Path, Path]:
    """(wheel path, install dir), built and installed under `out` (emptied first)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    src, dist, site = out / "src", out / "dist", out / "site"
    before = checkout_state()
    copy_tree(src)
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src), cwd=src)
    wheels = sorted(dist.glob("tf_privpy-*.whl"))
    if len(wheels) != 1:
        raise WheelBuildError(f"expected one tf_privpy wheel in {dist}, found {wheels}")
    _pip("install", "--no-deps", "--target", str(site), str(wheels[0]), cwd=out)
    if checkout_state() != before:
        raise WheelBuildError("building the wheel wrote into the source tree")
    shutil.rmtree(src)   # the copy (and its compiled objects) is not needed any more
    (out / STAMP).write_text(wheels[0].name + "\n")
    return wheels[0], site


def built(out: Path) -> Tuple[Path, Path]:
    """(wheel path, install dir) of a completed `build(out)`."""
    stamp = out / STAMP
    if not stamp.is_file():
        raise WheelBuildError(f"{out} holds no completed wheel build: `make wheel` failed "
                              "(its output is above pytest's in `make test`) or did not run; "
                              "unset TF_PRIVPY_TEST_WHEEL_DIR to build one in the test")
    return out / "dist" / stamp.read_text().strip(), out / "site"


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        wheel, site = build(Path(argv[1]).resolve())
    except WheelBuildError as e:
        print(f"build_test_wheel.py: {e}", file=sys.stderr)
        return 1
    print(f"build_test_wheel.py: {wheel.name}, installed in {site}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
