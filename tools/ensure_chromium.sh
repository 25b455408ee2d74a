#!/usr/bin/env bash
# `make test` step: tests/test_tensorboard_page.py drives Debian's headless
# chromium. Installs it with apt-get when it is missing and this user may
# (root, or sudo without a password); otherwise says what to install and goes
# on: that one test then fails with the same message (it never skips), every
# other test still runs. $TP_CHROMIUM names a chromium binary instead.
set -uo pipefail

log() { echo "ensure_chromium.sh: $*" >&2; }

if [[ -n "${TP_CHROMIUM:-}" ]] || command -v chromium >/dev/null 2>&1 ||
   command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [[ "$(id -u)" == 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  log "chromium is missing and this user cannot install packages (not root, no" \
      "passwordless sudo): tests/test_tensorboard_page.py will fail. Install it with" \
      "\`sudo apt-get install chromium\` (Debian) or set TP_CHROMIUM to a Chromium binary."
  exit 0
fi
log "installing Debian's chromium with apt-get (tests/test_tensorboard_page.py needs it)"
export DEBIAN_FRONTEND=noninteractive
if ! { "${as_root[@]}" apt-get update -qq &&
       "${as_root[@]}" apt-get install -y -qq -o Dpkg::Use-Pty=0 chromium >/dev/null; }; then
  log "apt-get install chromium failed: tests/test_tensorboard_page.py will fail." \
      "Install chromium by hand (\`apt-get install chromium\`) or set TP_CHROMIUM."
fi
exit 0
