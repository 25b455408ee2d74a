"""Macros that build tf_privpy's single TensorFlow op library.

Layout handled (see BUILD):
  ops/<family>/*_ops.cc      REGISTER_OP
  ops/<family>/*_kernels.cc  OpKernels
  ops/<family>/*.cc, *.h     TF-free math
  ops/<family>/*_test.cc, *_bench.cc   standalone programs: NOT in the library

Includes are relative to the repository root ("ops/common/parallel.h").
Families are discovered from the directories under ops/, and files by glob,
so new families (gc, paillier, ...) and files need no BUILD edit.

The C++ standard, the libstdc++ ABI and Eigen's alignment are NOT set here:
./configure.sh derives them from tf.sysconfig and passes them through
.tf_configure.bazelrc (--cxxopt/--copt), so they always match the installed TF.
"""

# Flags of the op library on top of the TF-derived ones; the same extra
# flags as setup.py's build (Bazel's toolchain already adds -Wall).
TF_PRIVPY_COPTS = [
    "-O3",
    "-fPIC",
    "-Wno-sign-compare",
    "-fvisibility-inlines-hidden",
]

# System libraries every op library links against.
TF_PRIVPY_LINKOPTS = [
    "-lcrypto",  # OpenSSL (libssl-dev)
    "-lgmp",  # GMP (libgmp-dev)
]

# Standalone test and benchmark programs living next to the sources.
NON_LIBRARY_SRCS = [
    "**/*_test.cc",
    "**/*_bench.cc",
]

HDR_PATTERNS = [
    "*.h",
    "*.hh",
    "*.hpp",
    "*.inc",
]

def op_families(root = "ops"):
    """Returns the sorted names of the sub-directories of `root` (the op families)."""
    entries = native.glob([root + "/*"], exclude_directories = 0)
    files = native.glob([root + "/*"])
    return sorted([e[len(root) + 1:] for e in entries if e not in files])

def tf_privpy_op_library(
        name,
        root = "ops",
        families = None,
        copts = [],
        linkopts = [],
        visibility = None):
    """Declares the op shared library `name` and one cc_library per family.

    Targets created (for family f):
      :<root>_hdrs   every header under root/ (any family may include any other's)
      :<root>_<f>    the family's library sources, alwayslink so that the static
                     REGISTER_OP / REGISTER_KERNEL_BUILDER initialisers survive
      :<root>_toplevel  .cc files directly under root/, only if there are any
      :<name>        cc_binary(linkshared = 1) linking all families against
                     libtensorflow_framework.so.2, libcrypto and libgmp
    """
    if families == None:
        families = op_families(root)

    hdrs_name = root + "_hdrs"
    native.cc_library(
        name = hdrs_name,
        hdrs = native.glob([root + "/**/" + p for p in HDR_PATTERNS]),
        deps = ["@local_config_tf//:tf_header_lib"],
        visibility = visibility,
    )

    family_libs = []
    for family in families:
        lib = "%s_%s" % (root, family)
        native.cc_library(
            name = lib,
            srcs = native.glob(
                ["%s/%s/**/*.cc" % (root, family)],
                exclude = ["%s/%s/%s" % (root, family, p) for p in NON_LIBRARY_SRCS],
            ),
            copts = TF_PRIVPY_COPTS + copts,
            deps = [
                ":" + hdrs_name,
                "@local_config_tf//:tf_header_lib",
            ],
            alwayslink = 1,
            visibility = visibility,
        )
        family_libs.append(":" + lib)

    # Sources placed directly under root/ (outside any family), if any.
    loose_srcs = native.glob(["%s/*.cc" % root], exclude = NON_LIBRARY_SRCS)
    if loose_srcs:
        native.cc_library(
            name = root + "_toplevel",
            srcs = loose_srcs,
            copts = TF_PRIVPY_COPTS + copts,
            deps = [
                ":" + hdrs_name,
                "@local_config_tf//:tf_header_lib",
            ],
            alwayslink = 1,
            visibility = visibility,
        )
        family_libs.append(":" + root + "_toplevel")

    native.cc_binary(
        name = name,
        linkshared = 1,
        copts = TF_PRIVPY_COPTS + copts,
        linkopts = TF_PRIVPY_LINKOPTS + linkopts,
        deps = family_libs + ["@local_config_tf//:tensorflow"],
        visibility = visibility,
    )
