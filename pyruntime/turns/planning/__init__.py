"""Planning a turn's request: what it sends and where each part goes (contract §5, §7).

The planner (planner.py) prepares the history for the room the fixed parts leave and renders the request; the
pure parts are the prompt's layout (prompt.py, memory_last.py), the context arithmetic (context.py), the memory
blocks (memory_blocks.py), where the tail was last sent (tail_anchors.py), earlier sessions (sessions.py) and the
model's chat template (templates.py).
"""
