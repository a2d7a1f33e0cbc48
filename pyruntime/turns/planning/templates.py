"""Does a model's chat template accept a system message after the first one? (contract §7)

Templates that reject one (Gemma, Mistral, ...) raise, or silently drop it; for those the tail
blocks travel as `System context update:` user messages. Detection renders the template with
jinja2 the way llama.cpp's Jinja formatter does.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("pyruntime.turns")

_PROBE = "probe-later-system-7f3a"


def template_accepts_later_system(template: str) -> bool:
    """True when rendering [system, user, assistant, system, user] keeps the later system message."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    messages = [
        {"role": "system", "content": "first system"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "system", "content": _PROBE},
        {"role": "user", "content": "again"},
    ]
    try:
        rendered = env.from_string(template).render(
            messages=messages, add_generation_prompt=True, bos_token="", eos_token=""
        )
    except Exception:  # noqa: BLE001 - any template error means: this template cannot take it
        return False
    return _PROBE in rendered


def gguf_chat_template(model_path: Path) -> str | None:
    """The `tokenizer.chat_template` of a GGUF file, None when it has none."""
    # The header reader lives with the other GGUF helpers; only this key is wanted here.
    from pyruntime.model.hosting.gguf_info import _read_header

    with Path(model_path).open("rb") as f:
        value = _read_header(f, wanted_prefixes=("tokenizer.chat_template",)).get("tokenizer.chat_template")
    return value if isinstance(value, str) else None


def model_accepts_later_system(model_path: Path, default: bool = True) -> bool:
    """For a llama.cpp-hosted GGUF: whether its template takes a later system message (`default` without one)."""
    template = gguf_chat_template(model_path)
    if template is None:
        return default
    accepted = template_accepts_later_system(template)
    log.info("chat template %s a later system message", "accepts" if accepted else "rejects")
    return accepted
