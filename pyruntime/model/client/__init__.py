"""How the turns reach a model: the `ModelClient` seam (seam.py) and its types and errors, the request queue
(queue.py), and the runtime's own client, `OpenAICompatClient` (http.py: OpenAI-compatible HTTP and SSE, and
llama-server's dialect with a slot per conversation: slots.py, parked_states.py, slot_moves.py).

Nothing here starts or supervises a model: that is `pyruntime.model.hosting`, which builds on this.
"""
