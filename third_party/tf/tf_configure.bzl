"""Repository rule exposing the installed TensorFlow to Bazel as @local_config_tf.

The values come from ./configure.sh, which asks the installed TensorFlow
(tf.sysconfig) and writes them to .tf_configure.bazelrc as --repo_env flags:

  TF_HEADER_DIR           the -I directory of tf.sysconfig.get_compile_flags()
  TF_SHARED_LIBRARY_DIR   the -L directory of tf.sysconfig.get_link_flags()
  TF_SHARED_LIBRARY_NAME  the -l:<name> library of get_link_flags()
  TF_VERSION              only used so that a TF upgrade re-runs this rule

The remaining compile/link flags (C++ standard, ABI, Eigen alignment) are
passed as --cxxopt/--copt/--linkopt by the same generated .bazelrc file.

Nothing is copied: the header directory and the framework library are
symlinked into the external repository, so a fetch costs nothing.
"""

_ENV_VARS = [
    "TF_HEADER_DIR",
    "TF_SHARED_LIBRARY_DIR",
    "TF_SHARED_LIBRARY_NAME",
    "TF_VERSION",
]

def _require_env(repository_ctx, name):
    value = repository_ctx.os.environ.get(name, "").strip()
    if not value:
        fail(("%s is not set. Run ./configure.sh (it writes .tf_configure.bazelrc " +
              "with --repo_env values from the installed TensorFlow) before bazel build.") % name)
    return value

def _tf_configure_impl(repository_ctx):
    header_dir = _require_env(repository_ctx, "TF_HEADER_DIR")
    lib_dir = _require_env(repository_ctx, "TF_SHARED_LIBRARY_DIR")
    lib_name = _require_env(repository_ctx, "TF_SHARED_LIBRARY_NAME")
    tf_version = repository_ctx.os.environ.get("TF_VERSION", "unknown")

    header_path = repository_ctx.path(header_dir)
    if not header_path.exists:
        fail("TF_HEADER_DIR %s does not exist; re-run ./configure.sh" % header_dir)
    if not header_path.get_child("tensorflow").get_child("core").get_child("framework").get_child("op.h").exists:
        fail("TF_HEADER_DIR %s has no tensorflow/core/framework/op.h" % header_dir)
    lib_path = repository_ctx.path(lib_dir + "/" + lib_name)
    if not lib_path.exists:
        fail("TensorFlow library %s does not exist; re-run ./configure.sh" % lib_path)

    repository_ctx.symlink(header_path, "include")
    repository_ctx.symlink(lib_path, lib_name)
    repository_ctx.template(
        "BUILD",
        Label("//third_party/tf:BUILD.tpl"),
        {
            "%{TF_SHARED_LIBRARY_NAME}": lib_name,
            "%{TF_VERSION}": tf_version,
        },
        executable = False,
    )

tf_configure = repository_rule(
    implementation = _tf_configure_impl,
    environ = _ENV_VARS,
    local = True,
)
