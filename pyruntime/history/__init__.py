"""The chat history pipeline: window, pruning, deterministic and LLM-assisted compaction, visible cuts (contract §5)."""

from __future__ import annotations

from pyruntime.history.budget import HistoryBudget, compute_history_budget, summary_token_budget
from pyruntime.history.compaction import Fold
from pyruntime.history.cut_report import ClippedBullet, CompactionKind, CutReport
from pyruntime.history.fold_marker import find_fold_point, strip_fold_marker
from pyruntime.history.llm_fold import (
    COMPACTION_ROLE_ID,
    ChatCompletionFn,
    CompactionRequestOptions,
    LlmCompactionOptions,
)
from pyruntime.history.messages import HistoryMessage, message_id
from pyruntime.history.pipeline import (
    CompactionTiming,
    Disposition,
    PreparedHistory,
    prepare_scoped_turn_history,
    prepare_turn_history,
)
from pyruntime.history.tokens import HeuristicTokenCounter, LlamaTokenCounter, TokenCounter, count_chat_tokens

__all__ = [
    "COMPACTION_ROLE_ID",
    "ChatCompletionFn",
    "ClippedBullet",
    "CompactionKind",
    "CompactionRequestOptions",
    "CompactionTiming",
    "CutReport",
    "Disposition",
    "Fold",
    "HeuristicTokenCounter",
    "HistoryBudget",
    "HistoryMessage",
    "LlamaTokenCounter",
    "LlmCompactionOptions",
    "PreparedHistory",
    "TokenCounter",
    "compute_history_budget",
    "count_chat_tokens",
    "find_fold_point",
    "message_id",
    "prepare_scoped_turn_history",
    "prepare_turn_history",
    "strip_fold_marker",
    "summary_token_budget",
]
