#!/usr/bin/env bash
# Builds the op library _tf_privpy_ops.so with Bazel, offline, and copies it
# to OUTPUT (default: build/bazel/_tf_privpy_ops.so under the repository).
#
# Usage: tools/bazel_build.sh [OUTPUT] [extra bazel build args...]
#
# Steps:
#   1. installs Debian's bazel-bootstrap (4.2.3) with apt-get if `bazel` is
#      missing (plus libssl-dev / libgmp-dev if their headers are missing);
#   2. ./configure.sh: TensorFlow-derived flags -> .tf_configure.bazelrc;
#   3. bazel build //:_tf_privpy_ops.so (no network access needed);
#   4. copies the result to OUTPUT.
#
# Environment:
#   PYTHON          interpreter with TensorFlow (default ./.venv/bin/python, else python3)
#   BAZEL           bazel binary (default: bazel)
#   BAZEL_JOBS      parallel actions (default 2)
#   BAZEL_RAM_MB    RAM budget Bazel schedules against (default 4096)
#   BAZEL_SHUTDOWN  1: stop the Bazel server afterwards (default 1 when CI=true,
#                   else 0, so repeated local runs reuse the warm server).
# Bazel's output base stays in its default place (~/.cache/bazel), so a second
# run only recompiles what changed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
output="${1:-$root/build/bazel/_tf_privpy_ops.so}"
shift || true
case "$output" in /*) ;; *) output="$PWD/$output" ;; esac

log() { echo "bazel_build.sh: $*" >&2; }

as_root() {
  if [[ "$(id -u)" == 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@"
  else
    log "need root (or sudo) to run: $*"
    return 1
  fi
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local apt_opts=(-y -qq -o Dpkg::Use-Pty=0)
  if ! as_root apt-get install "${apt_opts[@]}" "$@" >/dev/null; then
    log "apt-get install $* failed; running apt-get update and retrying"
    as_root apt-get update -qq >/dev/null
    as_root apt-get install "${apt_opts[@]}" "$@" >/dev/null
  fi
}

BAZEL="${BAZEL:-bazel}"
if ! command -v "$BAZEL" >/dev/null 2>&1; then
  log "'$BAZEL' not found: installing Debian's bazel-bootstrap"
  apt_install bazel-bootstrap
  BAZEL=bazel
fi
missing_dev=()
[[ -f /usr/include/openssl/evp.h ]] || missing_dev+=(libssl-dev)
[[ -f /usr/include/gmp.h || -f /usr/include/x86_64-linux-gnu/gmp.h ]] || missing_dev+=(libgmp-dev)
if ((${#missing_dev[@]})); then
  log "installing ${missing_dev[*]}"
  apt_install "${missing_dev[@]}"
fi

if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then PYTHON="$root/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHON
"$root/configure.sh" "$PYTHON" >&2

shutdown_default=0
[[ "${CI:-}" == "true" ]] && shutdown_default=1
if [[ "${BAZEL_SHUTDOWN:-$shutdown_default}" == 1 ]]; then
  # Also after a failed build: no idle Bazel server left behind in CI.
  trap 'cd "$root" && "$BAZEL" shutdown' EXIT
fi

cd "$root"
jobs="${BAZEL_JOBS:-2}"
ram="${BAZEL_RAM_MB:-4096}"
start=$(date +%s)
"$BAZEL" build \
  --jobs="$jobs" \
  --local_cpu_resources="$jobs" \
  --local_ram_resources="$ram" \
  "$@" \
  //:_tf_privpy_ops.so
bazel_bin="$("$BAZEL" info "$@" bazel-bin 2>/dev/null)"
end=$(date +%s)

mkdir -p "$(dirname "$output")"
# Copy (not hard-link): Bazel's outputs are read-only and may be replaced.
rm -f "$output"
cp "$bazel_bin/_tf_privpy_ops.so" "$output"
chmod 0755 "$output"
log "built $output in $((end - start)) s"

