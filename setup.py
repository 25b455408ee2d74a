"""Build and install tf_privpy.

The op library (ops/**) is compiled into one shared object,
tf_privpy/_tf_privpy_ops.so, against the TensorFlow found at build time with
that TensorFlow's own compile and link flags (tf.sysconfig), so build in the
environment you run in:

    pip install --no-build-isolation .          # or
    python setup.py build_ext --inplace          # what `make build` does

The same library is built by Bazel from BUILD/WORKSPACE (tools/bazel_build.sh).
"""
import glob
import json
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_NAME = "_tf_privpy_ops.so"
TF_RANGE = (">=2.14.0", "<2.15.0")


def op_sources():
    """All kernel/op sources; standalone test and bench programs excluded."""
    srcs = sorted(glob.glob(os.path.join("ops", "**", "*.cc"), recursive=True))
    return [s for s in srcs if not s.endswith(("_test.cc", "_bench.cc"))]


class BuildOps(build_ext):
    """Compiles ops/ with tf.sysconfig flags into tf_privpy/_tf_privpy_ops.so."""

    def build_extensions(self):
        import tensorflow as tf  # imported here: only needed to build

        # g++ only: drop Python's C flags that clash with C++ (-Wstrict-prototypes).
        for flag in ("-Wstrict-prototypes",):
            if flag in self.compiler.compiler_so:
                self.compiler.compiler_so.remove(flag)
        for ext in self.extensions:
            ext.extra_compile_args = (
                tf.sysconfig.get_compile_flags()
                + ["-O3", "-fPIC", "-Wall", "-Wno-sign-compare", "-fvisibility-inlines-hidden"]
            )
            ext.extra_link_args = tf.sysconfig.get_link_flags() + ["-lcrypto", "-lgmp"]
        super().build_extensions()
        info = {
            "tf_version": tf.__version__,
            "compile_flags": tf.sysconfig.get_compile_flags(),
            "library": LIB_NAME,
        }
        out_dirs = {os.path.dirname(self.get_ext_fullpath(e.name)) for e in self.extensions}
        # With --inplace, setuptools builds into build/ and copies the .so into
        # the source tree afterwards; the loader reads the info beside it.
        out_dirs.add(os.path.join(HERE, "tf_privpy"))
        for out_dir in out_dirs:
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, "_build_info.json"), "w") as f:
                json.dump(info, f, indent=1)

    def get_ext_filename(self, ext_name):
        # A TF op library, not a Python extension module: no ABI suffix.
        return os.path.join(*ext_name.split(".")[:-1], LIB_NAME)


setup(
    name="tf_privpy",
    version="0.1.0",
    description="Privacy-preserving machine learning in TensorFlow (PrivPy's "
    "four-server protocols as TF custom ops)",
    python_requires=">=3.11,<3.12",
    packages=["tf_privpy", "tf_privpy.he", "tf_privpy.protocols", "tf_privpy.protocols.mpc",
              "tf_privpy.protocols.he", "tf_privpy.converters"],
    package_dir={
        "tf_privpy": "tf_privpy",
        "tf_privpy.protocols": "protocols",
        "tf_privpy.protocols.mpc": "protocols/mpc",
        "tf_privpy.protocols.he": "protocols/he",
        "tf_privpy.converters": "converters",
    },
    package_data={"tf_privpy": ["_build_info.json", "config_defaults.json"]},
    ext_modules=[
        Extension(
            "tf_privpy._tf_privpy_ops",
            sources=op_sources(),
            include_dirs=[HERE],
            language="c++",
            depends=sorted(glob.glob(os.path.join("ops", "**", "*.h"), recursive=True)),
        )
    ],
    cmdclass={"build_ext": BuildOps},
    install_requires=["tensorflow" + ",".join(TF_RANGE), "numpy>=1.25,<2"],
    zip_safe=False,
)
