#!/usr/bin/env bash
# The main job: installs what is missing, then runs the runtime with its embedded default model
# (SmolLM2-135M on 127.0.0.1:13333, gRPC on 13334, Connect on 13335) until Ctrl+C / SIGTERM.
# Saves go to $COREAI_DATA_DIR (default ~/.local/share/coreai-runtime). Extra arguments go to
# `coreai-runtime serve` (e.g. --model PATH.gguf, --session-only).
exec bash "$(dirname "$0")/bootstrap.sh" run "$@"
