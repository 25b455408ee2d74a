"""Offline stand-in for @rules_cc//cc:defs.bzl: forwards to Bazel's native C++ rules.

Debian's bazel-bootstrap (4.2.3) does not ship the rules_cc archive that the
default WORKSPACE suffix would download, and Debian's bazel-rules-cc package
targets a newer Bazel. Bazel 4 still implements these rules natively, so a
thin forwarding layer is all @bazel_tools and @local_config_cc need.
"""

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_import(**attrs):
    native.cc_import(**attrs)

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def fdo_prefetch_hints(**attrs):
    native.fdo_prefetch_hints(**attrs)

def fdo_profile(**attrs):
    native.fdo_profile(**attrs)

def objc_import(**attrs):
    native.objc_import(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)
