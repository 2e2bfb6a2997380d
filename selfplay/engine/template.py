"""Turning a chat into the token ids a model is prompted with.

Chat models get their tokenizer's chat template. Base models (no chat template) get a plain
template: the system text, then each turn under a heading, ending with an open assistant
heading. Both backends tokenize through this module, so they see the same prompt tokens.

A chat that ends with an assistant message is a reply already begun (a prefill): the prompt
ends with that text, open, and the model continues it. A chat that is only such a message is a
text to complete: no template at all, the text as written (CRUXEval's harness asks open
models so), with what the tokenizer adds to any text.
"""

from __future__ import annotations

from selfplay.engine.base import Chat

__all__ = ["render", "prompt_ids", "has_chat_template", "begun"]

_HEADINGS = {"user": "### Request", "assistant": "### Response"}


def has_chat_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def begun(messages: Chat) -> str:
    """The text of the reply a chat has already begun ("" if it ends with no assistant turn)."""
    return messages[-1].content if messages and messages[-1].role == "assistant" else ""


def _plain(messages: Chat) -> str:
    opened = begun(messages)
    turns = messages[:-1] if opened else messages
    parts = []
    for message in turns:
        if message.role == "system":
            parts.append(message.content.strip())
        else:
            parts.append(f"{_HEADINGS[message.role]}\n{message.content.strip()}")
    parts.append(_HEADINGS["assistant"] + "\n" + opened)
    return "\n\n".join(parts)


def render(tokenizer, messages: Chat, template: str = "auto") -> str:
    """The prompt text of a chat; `template` is auto, chat or plain (see `ModelConfig`)."""
    if completes(messages):
        return messages[0].content
    if uses_chat_template(tokenizer, template):
        if not has_chat_template(tokenizer):
            raise ValueError("model.template=chat but the tokenizer has no chat template")
        turns = [{"role": m.role, "content": m.content} for m in messages]
        if begun(messages):
            return tokenizer.apply_chat_template(turns, tokenize=False, continue_final_message=True)
        return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
    return _plain(messages)


def completes(messages: Chat) -> bool:
    """Whether a chat is a text to complete: one assistant message, nothing before it."""
    return len(messages) == 1 and messages[0].role == "assistant"


def uses_chat_template(tokenizer, template: str) -> bool:
    return template == "chat" or (template == "auto" and has_chat_template(tokenizer))


def prompt_ids(tokenizer, messages: Chat, template: str = "auto") -> list[int]:
    """Token ids of the rendered prompt.

    A chat template writes its special tokens into the text; for the plain template the
    tokenizer adds what it adds to any text (a base model's BOS token, say).
    """
    text = render(tokenizer, messages, template)
    special = completes(messages) or not uses_chat_template(tokenizer, template)
    return tokenizer(text, add_special_tokens=special)["input_ids"]
