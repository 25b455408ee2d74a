"""Build and install tf_privpy.

The op library (ops/**) is compiled into one shared object,
tf_privpy/_tf_privpy_ops.so, against the TensorFlow found at build time with
that TensorFlow's own compile and link flags (tf.sysconfig), so build in the
environment you run in:

    pip install --no-build-isolation .          # or
    python setup.py build_ext --inplace          # what `make build` does

The wheel holds the Python packages (tf_privpy, and protocols/ and converters/
installed as tf_privpy.protocols and tf_privpy.converters, with
protocols/defaults.json), the op library and its _build_info.json
(tests/test_packaging.py builds one and runs it outside the source tree).

Extras: `he` (python-paillier, for to_phe/from_phe), `federated`
(TensorFlow Federated and the exact pins of requirements/tff-deps.txt and
tff.txt), `all`. tensorflow-federated 0.87.0 declares jax==0.4.14, which the
registry does not serve, so pip's resolver cannot satisfy
`pip install .[federated]` on its own: install TFF the way the Makefile does
(`make setup`: tff-deps.txt, then tff.txt with --no-deps). The extra still
records exactly what the federated driver needs.

The op library's 47 sources compile in parallel, one g++ per core and GiB of
memory (TF_PRIVPY_BUILD_JOBS=N, or build_ext --parallel N, sets how many):
setuptools parallelises across extensions only, and this is one extension.

The same library is built by Bazel from BUILD/WORKSPACE (tools/bazel_build.sh).
"""
import glob
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIB_NAME = "_tf_privpy_ops.so"
INFO_NAME = "_build_info.json"
TF_RANGE = (">=2.14.0", "<2.15.0")


def requirement_lines(name):
    """The requirement specifiers of requirements/<name> (comments dropped):
    the extras read the pins the Makefile installs, so the two cannot drift."""
    path = os.path.join(HERE, "requirements", name)
    if not os.path.exists(path):
        raise SystemExit(f"setup.py: {path} is missing; build from a full source checkout "
                         "or an sdist made by `python setup.py sdist` (MANIFEST.in ships it)")
    with open(path) as f:
        lines = (line.split("#", 1)[0].strip() for line in f)
        return [line for line in lines if line]


def pinned(name, package):
    """The one line of requirements/<name> that pins `package`."""
    hits = [r for r in requirement_lines(name)
            if re.split(r"[=<>!~\[; ]", r, maxsplit=1)[0].lower() == package.lower()]
    if len(hits) != 1:
        raise SystemExit(f"setup.py: expected one pin of {package} in requirements/{name}, "
                         f"found {hits}")
    return hits[0]


EXTRAS = {
    "he": [pinned("base.txt", "phe")],
    "federated": requirement_lines("tff-deps.txt") + requirement_lines("tff.txt"),
}
EXTRAS["all"] = sorted(set(EXTRAS["he"]) | set(EXTRAS["federated"]))


def _packages():
    """Every Python package of the three source folders, under the names they
    are installed as (protocols/ and converters/ go inside tf_privpy), so a
    new subpackage can never be left out of the wheel."""
    roots = {"tf_privpy": "tf_privpy", "tf_privpy.protocols": "protocols",
             "tf_privpy.converters": "converters"}
    packages, dirs = [], {}
    for name, folder in roots.items():
        for dirpath, dirnames, files in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d != "__pycache__" and not os.path.islink(
                os.path.join(dirpath, d))]
            if "__init__.py" not in files:
                continue
            rel = os.path.relpath(dirpath, folder)
            pkg = name if rel == "." else name + "." + rel.replace(os.sep, ".")
            packages.append(pkg)
            dirs[pkg] = dirpath
    return sorted(packages), dirs


PACKAGES, PACKAGE_DIR = _packages()


def op_sources():
    """All kernel/op sources; standalone test and bench programs excluded."""
    srcs = sorted(glob.glob(os.path.join("ops", "**", "*.cc"), recursive=True))
    return [s for s in srcs if not s.endswith(("_test.cc", "_bench.cc"))]


#: peak memory of one g++ on a TF kernel file at -O3 (measured: about 0.6 GB)
GXX_PEAK_BYTES = 1 << 30


def build_jobs(requested) -> int:
    """Compiler processes at a time: build_ext's --parallel N, else
    $TF_PRIVPY_BUILD_JOBS, else one per core and GiB of memory."""
    env = os.environ.get("TF_PRIVPY_BUILD_JOBS")
    if requested not in (None, True, False):
        return max(1, int(requested))
    if env:
        if not env.isdigit() or int(env) < 1:
            raise SystemExit(f"TF_PRIVPY_BUILD_JOBS must be a positive integer, got {env!r}")
        return int(env)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 0
    by_memory = memory // GXX_PEAK_BYTES if memory else 1 << 16
    return max(1, min(os.cpu_count() or 1, by_memory))


def _parallel_compile(compiler, jobs):
    """compiler.compile with its per-object g++ calls `jobs` at a time (the
    distutils loop, run by a thread pool: each call is a subprocess)."""
    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                extra_preargs=None, extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj):
            if obj in build:   # absent: up to date
                src, ext = build[obj]
                compiler._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, objects))   # list(): re-raises the first failure
        return objects
    return compile


class BuildOps(build_ext):
    """Compiles ops/ with tf.sysconfig flags into tf_privpy/_tf_privpy_ops.so,
    and writes _build_info.json (the TF version the loader checks) beside it."""

    def run(self):
        # setuptools' run() clears self.inplace while it builds (into build/)
        # and copies the library into the source tree afterwards: remember
        # whether the source tree is a destination at all.
        self._to_source = bool(self.inplace or getattr(self, "editable_mode", False))
        super().run()

    def _info_dirs(self):
        dirs = {os.path.dirname(self.get_ext_fullpath(e.name)) for e in self.extensions}
        if getattr(self, "_to_source", False):
            # The loader reads the info beside the library it loads. Only an
            # in-place or editable build writes into the source tree; a wheel
            # build must leave it untouched.
            dirs.add(os.path.join(HERE, "tf_privpy"))
        return dirs

    def get_outputs(self):
        # The info file is a build output like the library: listed here, it is
        # part of the wheel's RECORD and of `install --record`.
        return super().get_outputs() + [os.path.join(d, INFO_NAME) for d in sorted(
            {os.path.dirname(self.get_ext_fullpath(e.name)) for e in self.extensions})]

    def build_extensions(self):
        import tensorflow as tf  # imported here: only needed to build

        # g++ only: drop Python's C flags that clash with C++ (-Wstrict-prototypes).
        for flag in ("-Wstrict-prototypes",):
            if flag in self.compiler.compiler_so:
                self.compiler.compiler_so.remove(flag)
        jobs = build_jobs(self.parallel)
        if jobs > 1:
            self.compiler.compile = _parallel_compile(self.compiler, jobs)
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
        for out_dir in self._info_dirs():
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, INFO_NAME), "w") as f:
                json.dump(info, f, indent=1)

    def get_ext_filename(self, ext_name):
        # A TF op library, not a Python extension module: no ABI suffix.
        return os.path.join(*ext_name.split(".")[:-1], LIB_NAME)


class BuildPy(build_py):
    """Generates the share service's gRPC stubs (tf_privpy/deploy/service/protogen.py,
    loaded by path: no TensorFlow import) before the Python files are copied,
    so a wheel or sdist build from a fresh clone ships them."""

    def run(self):
        import importlib.util

        path = os.path.join(HERE, "tf_privpy", "deploy", "service", "protogen.py")
        spec = importlib.util.spec_from_file_location("_tf_privpy_protogen", path)
        protogen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(protogen)
        if protogen.stale():
            protogen.generate()
        super().run()


setup(
    name="tf_privpy",
    version="0.1.0",
    description="Privacy-preserving machine learning in TensorFlow (PrivPy's "
    "four-server protocols as TF custom ops)",
    python_requires=">=3.11,<3.12",
    # Package names, not module lists: every .py of these directories ships.
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    # The op library and _build_info.json are build_ext outputs (BuildOps) and
    # reach the wheel from there, freshly built. They are deliberately NOT
    # package data: build_py would copy whatever library sits in the source
    # tree (possibly built for another TensorFlow) into the wheel.
    package_data={"tf_privpy.protocols": ["defaults.json"]},
    ext_modules=[
        Extension(
            "tf_privpy._tf_privpy_ops",
            sources=op_sources(),
            include_dirs=[HERE],
            language="c++",
            depends=sorted(glob.glob(os.path.join("ops", "**", "*.h"), recursive=True)),
        )
    ],
    cmdclass={"build_ext": BuildOps, "build_py": BuildPy},
    # grpcio, protobuf and cryptography: the share service (tf_privpy/deploy/service).
    install_requires=["tensorflow" + ",".join(TF_RANGE), "numpy>=1.25,<2", "grpcio>=1.62",
                      "protobuf>=4.21,<5", "cryptography>=41"],
    extras_require=EXTRAS,
    zip_safe=False,
)
