"""Hosting llama.cpp's llama-server: its configuration (llama_server.py), the child process and its ports
(process.py), its lifeline to the runtime (lifeline.py, keeper.py), its watchdog (supervisor.py), its log
(server_log.py), the slots saved across restarts (slot_store.py, warm_slots.py), the embedded model and GGUF
headers (embedded.py, gguf_info.py).

The runtime's turns reach the hosted engine through `pyruntime.model.client`, never through this package.
"""
