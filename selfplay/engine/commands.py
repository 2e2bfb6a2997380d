"""`selfplay model prepare`: make the configured model available locally, once.

For an embedded model (`model.name=smollm2-135m-instruct`, the default, or
`qwen2.5-coder-0.5b-instruct`) this converts the GGUF file shipped in its installed packages
into a transformers folder in the model cache; later runs reuse it. For a local folder or a hub
id it loads the tokenizer and configuration (downloading a hub model into the hub cache).
Prints the folder or id that runs will load.
"""

from __future__ import annotations

import argparse
import time

from selfplay import config as config_module
from selfplay.console import Console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="the model that plays both roles")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("prepare", help="convert or fetch the configured model once")
    q.add_argument("--force", action="store_true", help="convert an embedded model again")
    q.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    q.set_defaults(handler=prepare_command)


def _overrides(items: list[str]) -> list[str]:
    return [o if "." in o.split("=")[0] else "model." + o for o in items]


def prepare_command(args: argparse.Namespace) -> int:
    from transformers import AutoConfig

    from selfplay.engine import model

    cfg = config_module.load(None, _overrides(args.overrides)).model
    started = time.perf_counter()
    with Console(None):  # shows the conversion's bar; every output stays where it is
        if cfg.name in model.EMBEDDED_MODELS:
            source = str(model.prepare_embedded(model.cache_dir(cfg), args.force, cfg.name))
        else:
            source = model.resolve(cfg)
    tokenizer = model.load_tokenizer(source)
    arch = AutoConfig.from_pretrained(source).architectures or ["?"]
    print(f"model {cfg.name}: {source}")
    print(
        f"  {arch[0]}, vocabulary {len(tokenizer)}, "
        f"{'chat template' if tokenizer.chat_template else 'no chat template (plain prompts)'}; "
        f"ready in {time.perf_counter() - started:.1f} s"
    )
    return 0
