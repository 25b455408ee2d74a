"""Rebuild TF-Encrypted's custom ops (secure random, aux bit ops, int128) against the TensorFlow
of the venv this runs in, with g++ and tf.sysconfig's flags, into the installed tf_encrypted
package, under the file names it loads (..._module_tf_<TF version>.so).

    .venv-tfe/bin/python benchmarks/peers/tfe_build_ops.py --src=DIR

DIR is a checkout of TF-Encrypted's source (its operations/ folder: the C++ is not in the PyPI
sdist nor wheel, which ship .so files for TF 2.9.1 only); `make bench-venv-tfe TFE_SRC=DIR`
passes it. Their C++ predates TF 2.14 in one call (Status::OK()): FIXES below is applied to a
temporary copy at build time; nothing of theirs is kept in this repository. Secure random links Debian's libsodium (apt-get install libsodium-dev). Without
--src this says so and exits 0: the venv is kept, and tfe_run.py reports TF-Encrypted as not
runnable (its ABY3 cannot share a value without the secure-random op: no fallback there).
"""
import argparse
import glob
import os
import subprocess
import sys


# op library -> (sources relative to --src, extra g++ flags). The int128 ops (ABY3's 128-bit
# fixed point) are not built: the peer runs in its 64-bit default.
OPS = {
    "secure_random": (["operations/secure_random/secure_random.cc"], ["-lsodium"]),
    "aux": (["operations/aux/*.cc"], []),
}
# Their sources predate TF 2.14 in one call: applied to a temporary copy at build time.
FIXES = [("Status::OK()", "::tensorflow::OkStatus()")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--src", default=os.environ.get("TFE_SRC", ""))
    a = p.parse_args()
    import importlib.util

    import tensorflow as tf
    pkg = importlib.util.find_spec("tf_encrypted").submodule_search_locations[0]
    if not a.src:
        print("tfe_build_ops: no TF-Encrypted source given (--src or TFE_SRC): its custom ops "
              f"stay built for TF 2.9.1 only, not for TF {tf.__version__}")
        return 0
    import shutil
    import tempfile
    if not os.path.exists("/usr/include/sodium.h"):
        print("tfe_build_ops: libsodium's headers are missing (apt-get install libsodium-dev)",
              file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="tfe-ops-")
    shutil.copytree(os.path.join(a.src, "operations"), os.path.join(tmp, "operations"))
    for f in glob.glob(os.path.join(tmp, "operations", "**", "*.*"), recursive=True):
        if f.endswith((".cc", ".h")):
            text = open(f).read()
            for old, new in FIXES:
                text = text.replace(old, new)
            open(f, "w").write(text)
    cflags = tf.sysconfig.get_compile_flags()
    lflags = tf.sysconfig.get_link_flags()
    failed = []
    for name, (srcs, extra) in OPS.items():
        files = sorted(f for s in srcs for f in glob.glob(os.path.join(tmp, s)))
        if not files:
            failed.append(f"{name}: no sources under {a.src}")
            continue
        out = os.path.join(pkg, "operations", name, f"{name}_module_tf_{tf.__version__}.so")
        # gnu++17 after TF's --std=c++17: their code uses __int128 in std type traits
        cmd = ["g++", "-shared", *files, "-o", out, "-fPIC", *cflags, "-std=gnu++17", *lflags,
               "-O2", *extra]
        print(f"tfe_build_ops: {name} -> {os.path.relpath(out, pkg)}", flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            errs = [ln for ln in r.stderr.splitlines() if "error" in ln]
            failed.append(f"{name}: g++ failed: {errs[:2]}")
    shutil.rmtree(tmp, ignore_errors=True)
    for f in failed:
        print("tfe_build_ops:", f, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
