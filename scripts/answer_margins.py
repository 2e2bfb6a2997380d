"""How far a model prefers the right input over the placeholder `["a", "b", "c"]` on
CRUXEval-I, asked in the published direct format.

    .venv/bin/python scripts/answer_margins.py results/cruxeval-direct/base \
        results/cruxeval-direct/trained --model PATH

For every non-trivial problem the first folder (the baseline) answered right, the margin is
log p(`assert f(<its right answer>)`) - log p(`assert f(["a", "b", "c"])`) as the reply to the
problem's published prompt, under the model at PATH (a transformers folder; float32, CPU).
The problems are split by whether the second folder's answer is still right (kept) or not
(lost): if training flips the problems whose margin was small, the lost ones have the smaller
margins. Prints one JSON line per problem and a summary line (median margin of each group).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfplay import files  # noqa: E402

PLACEHOLDER = '["a", "b", "c"]'


def records(folder: Path) -> dict[str, dict]:
    rows = files.records(folder / "samples.jsonl")
    return {r["id"]: r for r in rows if r["subset"] == "cruxeval_i" and r.get("sample", 0) == 0}


def main(argv: list[str] | None = None) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from selfplay.config import ModelConfig
    from selfplay.engine.model import resolve
    from selfplay.engine.template import prompt_ids
    from selfplay.eval.cruxeval_formats import published_prompt

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument(
        "--model", required=True, help="a model folder, a checkpoint's model/, or a model's name"
    )
    args = parser.parse_args(argv)
    before, after = records(args.base), records(args.after)
    asked = [k for k, r in before.items() if r["correct"] and not r["trivial"] and k in after]
    source = resolve(ModelConfig(name=args.model))  # a LoRA checkpoint's adapter: merged
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, torch_dtype=torch.float32).eval()

    def logp(chat, reply: str) -> float:
        ids = prompt_ids(tokenizer, chat)
        reply_ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([ids + reply_ids])).logits[0, len(ids) - 1 : -1]
        scores = torch.log_softmax(logits.float(), -1)
        return float(scores[torch.arange(len(reply_ids)), torch.tensor(reply_ids)].sum())

    groups: dict[str, list[float]] = {"kept": [], "lost": []}
    for k in asked:
        item = before[k]
        chat = published_prompt("abduction", "direct", item["program"], "", item["output"])
        margin = logp(chat, f"assert f({item['answer']})") - logp(chat, f"assert f({PLACEHOLDER})")
        group = "kept" if after[k]["correct"] else "lost"
        groups[group].append(margin)
        print(json.dumps({"id": k, "group": group, "margin": round(margin, 3)}), flush=True)
    summary = {
        f"{g}_{stat}": (round(statistics.median(v), 3) if stat == "median" else len(v))
        for g, v in groups.items()
        if v
        for stat in ("items", "median")
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
