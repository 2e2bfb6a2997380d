#!/usr/bin/env bash
# Sets up selfplay in ./.venv on a fresh machine; safe to run again.
#   scripts/install.sh          what the main job needs
#   scripts/install.sh --dev    and what the tests and linters need
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
if [[ "${1:-}" == "--dev" ]]; then extras="[dev]"; fi

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "selfplay needs Python >= 3.11 (python3 is $(python3 --version))" >&2; exit 1; }
[[ -x .venv/bin/python ]] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
# The CPU build of torch; a looser requirement would pull gigabytes of CUDA packages.
"${pip[@]}" torch==2.13.0
"${pip[@]}" -e ".${extras}"

# The executor's namespace layer needs bubblewrap.
if ! command -v bwrap >/dev/null 2>&1; then
  apt=(apt-get install -y -q bubblewrap)
  if [[ "$(id -u)" != 0 ]] && command -v sudo >/dev/null 2>&1; then apt=(sudo "${apt[@]}"); fi
  if command -v apt-get >/dev/null 2>&1; then
    "${apt[@]}" >/dev/null 2>&1 || { "${apt[0]}" update -q >/dev/null 2>&1 || true; "${apt[@]}" >/dev/null 2>&1; } \
      || echo "warning: could not install bubblewrap; the executor refuses to start without it" \
              "unless you pass executor.accept_missing=[namespaces]" >&2
  else
    echo "warning: install bubblewrap (bwrap) for the executor's namespace isolation" >&2
  fi
fi
