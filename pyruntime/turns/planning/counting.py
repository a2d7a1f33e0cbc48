"""`RequestTokens`: the prompt tokens of a request as sent, shared by the planner (does it fit?) and the tool rounds
(how much room does the tool allowance take?).

A role's system prompt and tool schemas are byte-identical turn after turn (contract §7): with the length heuristic
their counts are kept per role and reused while the text is unchanged. A counter that renders the model's chat
template (`count_messages`) counts the whole request instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyruntime.history.tokens import GENERATION_PROMPT_TOKENS, MESSAGE_OVERHEAD_TOKENS, TokenCounter, count_chat_tokens

FIXED_COUNT_CACHE_SIZE = 256  # (role, part) entries of the system-prompt / tool-schema token counts


class RequestTokens:
    """Counts the prompt tokens of requests with one model's counter; see the module docstring."""

    def __init__(self, counter: TokenCounter) -> None:
        """`counter`: the model's tokenizer, or the length heuristic."""
        self.counter = counter
        self._fixed_counts: dict[tuple[str, str], tuple[str, int]] = {}

    def request(self, role_id: str, messages: Sequence[dict[str, Any]],
                tools: Sequence[Mapping[str, Any]] | None) -> int:
        """Prompt tokens of a request as sent: rendered by the model's template when the counter can."""
        counter = self.counter
        if callable(getattr(counter, "count_messages", None)):
            return count_chat_tokens(counter, messages, tools)
        # The estimate, with the role's byte-identical system prompt and schemas counted once (cached).
        total = GENERATION_PROMPT_TOKENS + MESSAGE_OVERHEAD_TOKENS * len(messages)
        for index, message in enumerate(messages):
            text = message["content"]
            total += self.fixed(role_id, "system", text) if index == 0 else counter.count(text)
        if tools:
            total += self.fixed(role_id, "tools", json.dumps(tools))
        return total

    def fixed(self, role_id: str, part: str, text: str) -> int:
        """Tokens of a role's system prompt or tool schemas, counted once while the text stays the same."""
        key = (role_id, part)
        cached = self._fixed_counts.get(key)
        if cached is not None and cached[0] == text:
            return cached[1]
        tokens = self.counter.count(text)
        if cached is None and len(self._fixed_counts) >= FIXED_COUNT_CACHE_SIZE:
            del self._fixed_counts[next(iter(self._fixed_counts))]  # the oldest role's entry
        self._fixed_counts[key] = (text, tokens)
        return tokens
