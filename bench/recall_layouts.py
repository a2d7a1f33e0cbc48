"""Recall layouts: what of a saved history and memory the model sees when asked about something in memory.

A search tool for `bench/memory_eval.py`'s recall step, not a replacement for it. It takes the saves
of an eval run (`memory_eval.py --configs c --work-dir DIR`: each conversation's memory document and
its saved history), and for every layout asks the eval's recall questions again in a new
orchestrator, in this process, on a copy of those saves, with one transformation applied to each
request before it reaches the model (the runtime assembles the request as usual: persona, memory
head, the saved history, the question). The embedded SmolLM2-135M at temperature 0 answers the same
prompt the same way, so the counts are deterministic.

Layouts (`--layouts`): `runtime` sends the request unchanged, as the checked-out runtime assembles it
with the role's whole saved history (`send_earlier_sessions=True`, so that a layout can choose what of
it to keep). The others are written below in `LAYOUTS` and each says what it changes.

Run: `nice -n 10 .venv/bin/python bench/recall_layouts.py --saves DIR/c [--conversations N] [--layouts ...]`
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.memory_eval import (  # noqa: E402
    DATA,
    MAX_TOKENS,
    ROLE,
    TURN_TIMEOUT_S,
    has_key,
    load_conversations,
    role_config,
    scope_of,
    talks_of_memory,
)
from pyruntime.cli.chat import free_port  # noqa: E402
from pyruntime.model.client.http import OpenAICompatClient  # noqa: E402
from pyruntime.model.hosting.process import LlamaServerProcess, hosted_model_config  # noqa: E402
from pyruntime.policy import AgentMemoryPolicy  # noqa: E402
from pyruntime.turns.factory import build_orchestrator  # noqa: E402
from pyruntime.turns.request import AiTaskRequest  # noqa: E402

Messages = list[dict[str, Any]]
Transform = Callable[[Messages, int], Messages]

HEADINGS = {
    "memory": "## Memory",
    "know": "What you know about the player:",
    "remember": "What you remember about the player:",
    "notes": "## Notes about the player",
    "your-notes": "## Your notes about the player",
    "about": "## About the player",
    "hash-know": "## What you know about the player",
    "told": "What the player told you before:",
    "none": "",
}
PERSONAS = {
    "": "",
    "remember": "When the player asks about something they told you, answer with what you remember.",
    "know": "You know the player from earlier conversations. Answer their questions with what you know about them.",
    "facts": "Use the facts you know about the player in your answers.",
}


def _parts(messages: Messages) -> tuple[dict[str, Any], Messages, Messages, dict[str, Any]]:
    """(persona, the context messages after it, the history, the question) of a recall request."""
    persona, rest, question = messages[0], messages[1:-1], messages[-1]
    context = [m for m in rest if m["role"] == "system"]
    history = [m for m in rest if m["role"] != "system"]
    return persona, context, history, question


def _memory_lines(context: Sequence[dict[str, Any]]) -> list[str]:
    """The memory's labelled lines, as the runtime's blocks carry them (a replaced block overrides)."""
    lines: list[str] = []
    for message in context:
        body = [ln for ln in message["content"].splitlines() if ln.startswith("Player's ")]
        if "overrides" in message["content"] or "cleared" in message["content"]:
            lines = body
        else:
            lines += [ln for ln in body if ln not in lines]
    return lines


_WORDS = re.compile(r"[a-z]+")
_QUESTION_WORDS = frozenset("what which who how much many do did i my me you your is am are the a of to from".split())


def _relevant(lines: Sequence[str], question: str) -> list[str]:
    """The lines sharing a word (5-letter stem) with the question; all lines when none does."""
    asked = {w[:5] for w in _WORDS.findall(question.lower()) if w not in _QUESTION_WORDS}
    hits = [ln for ln in lines if asked & {w[:5] for w in _WORDS.findall(ln.lower()) if w != "player"}]
    return hits or list(lines)


def layout(spec: str) -> Transform:
    """A layout from `key=value,...`: block (runtime|one), heading, at (head|tail|session|both|question), history
    (all|none|session|lastN), persona, lines (all|relevant), prefix (how each line starts: keep|you|bare)."""
    options = dict(item.split("=", 1) for item in spec.split(",") if item)
    block = options.get("block", "runtime")
    heading = HEADINGS[options.get("heading", "memory")]
    at = options.get("at", "head")
    history = options.get("history", "all")
    persona_line = PERSONAS[options.get("persona", "")]
    which = options.get("lines", "all")
    prefix = options.get("prefix", "keep")

    def apply(messages: Messages, old_count: int) -> Messages:
        persona, context, hist, question = _parts(messages)
        old, new = hist[:old_count], hist[old_count:]
        if history == "none":
            hist = []
        elif history == "session":
            hist = new
        elif history.startswith("last"):
            keep = int(history[4:])
            hist = (old[-keep:] if keep else []) + new
        system = {"role": "system", "content": persona["content"] + (" " + persona_line if persona_line else "")}
        lines = _memory_lines(context)
        if which == "relevant":
            lines = _relevant(lines, question["content"])
        if prefix == "you":
            lines = ["Your " + ln[len("Player's "):] for ln in lines]  # the player's view: "Your name: Tobin"
        elif prefix == "bare":
            lines = [ln[len("Player's "):] for ln in lines]
        if block == "runtime" and which == "all" and prefix == "keep":
            blocks = context
        elif lines:
            body = "\n".join(lines)
            blocks = [{"role": "system", "content": f"{heading}\n{body}" if heading else body}]
        else:
            blocks = []
        if at == "head":
            return [system, *blocks, *hist, question]
        if at == "tail":
            return [system, *hist, *blocks, question]
        if at == "session":  # after the saved history, before this session's first line (and left there)
            kept = len(hist) - len(new)
            return [system, *hist[:kept], *blocks, *hist[kept:], question]
        if at == "both":
            return [system, *blocks, *hist, *blocks, question]
        if at == "question":  # the memory inside the player's message, after the question
            text = question["content"] + ("\n\n" + "\n".join(b["content"] for b in blocks) if blocks else "")
            return [system, *hist, {"role": "user", "content": text}]
        raise ValueError(at)

    return apply


LAYOUTS: dict[str, str] = {
    "runtime": "",
    "one-block/session": "block=one,at=session",
    "no-history": "history=none",
    "session-only": "history=session",
    "one-block": "block=one",
    "one-block/no-history": "block=one,history=none",
    "one-block/tail": "block=one,at=tail",
    "know/tail": "block=one,heading=know,at=tail",
    "know/session/tail": "block=one,heading=know,at=tail,history=session",
    "persona": "block=one,persona=remember",
}


def transform_of(name: str) -> Transform:
    """A named layout, or a spec given on the command line."""
    if name == "runtime":
        return lambda messages, old_count: messages
    return layout(LAYOUTS.get(name, name))


class TransformingClient(OpenAICompatClient):
    """The model client, with a layout applied to each request's messages."""

    transform: Transform = staticmethod(lambda m, o: m)
    old_count = 0
    sent: list[Messages] = []

    def stream_chat(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        changed = self.transform(list(messages), self.old_count)
        self.sent.append(changed)
        return super().stream_chat(changed, **kwargs)


async def run_layout(name: str, saves: Path, conversations: Sequence[Any], base_url: str, api_key: str | None,
                     model_path: Path, show: bool) -> tuple[int, int, int]:
    """(recalled, questions, replies that speak of the memory) of one layout, on a fresh copy of the saves."""
    work = Path(tempfile.mkdtemp(prefix="recall-layout-"))
    try:
        data = work / "data"
        shutil.copytree(saves, data)
        orchestrator = build_orchestrator(base_url=base_url, api_key=api_key, model_path=model_path, data_dir=data,
                                          tool_mode="structured", memory_design="writer", policy=AgentMemoryPolicy())
        assert isinstance(orchestrator.client, OpenAICompatClient)
        client = TransformingClient(base_url, api_key=api_key, model=orchestrator.client.model,
                                    timeout=TURN_TIMEOUT_S)
        await orchestrator.client.aclose()
        orchestrator.client = client
        client.transform = transform_of(name)
        recalled = questions = memory_talk = 0
        for conversation in conversations:
            view = orchestrator.stores.scoped(scope_of(conversation))
            # The eval's recall turns were recorded too: the saved conversation is its first lines.
            kept = view.get_chat_history(ROLE)[: 2 * len(conversation.lines)]
            view.clear_chat_history(ROLE)
            for message in kept:
                view.append_chat_message(ROLE, message.role, message.content, persist=True)
            client.old_count = len(kept)
            # Every layout starts from the whole saved history (a layout may leave the earlier sessions out).
            orchestrator.policy.set(role_config(conversation, memory=True).copy(send_earlier_sessions=True))
            for question, keys in conversation.recall:
                result = await orchestrator.run_task(AiTaskRequest(
                    hint=question, role_id=ROLE, scope=scope_of(conversation), max_output_tokens=MAX_TOKENS))
                ok = all(has_key(result.text, k) for k in keys)
                recalled += ok
                questions += 1
                memory_talk += talks_of_memory(result.text)
                if show:
                    print(f"    {conversation.id} {'+' if ok else '-'} {question!r} -> {result.text!r}",
                          file=sys.stderr)
            await orchestrator.memory_passes.drain()
        if show and client.sent:
            print("    last request: " + repr(client.sent[-1])[:1500], file=sys.stderr)
        await client.aclose()
        return recalled, questions, memory_talk
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the layouts; one line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--saves", type=Path, required=True, help="an eval's saves of one configuration (DIR/c)")
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS),
                        help="names in LAYOUTS or specs such as block=one,heading=know,at=tail,history=none")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--show", action="store_true", help="print every reply")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    conversations = load_conversations(args.data, args.conversations)
    server = LlamaServerProcess(hosted_model_config(None, port=free_port(), n_threads=args.threads))
    server.start()
    try:
        for name in args.layouts:
            began = time.perf_counter()
            recalled, questions, talk = asyncio.run(run_layout(name, args.saves, conversations, server.base_url,
                                                         server.api_key, server.config.model_path, args.show))
            print(f"| {name} | {recalled}/{questions} ({100 * recalled / max(questions, 1):.0f} %) "
                  f"| memory talk {talk}/{questions} | {time.perf_counter() - began:.0f} s |", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
