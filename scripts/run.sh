#!/usr/bin/env bash
# The main job: installs what is missing, then runs the runtime with its embedded default model
# (SmolLM2-135M on 127.0.0.1:13333, gRPC on 13334, Connect on 13335) until Ctrl+C / SIGTERM.
# Extra arguments go to `coreai-runtime serve` (e.g. --model PATH.gguf, --session-only).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
data_dir="${COREAI_DATA_DIR:-$HOME/.local/share/coreai-runtime}"
mkdir -p "$data_dir"
exec "${COREAI_VENV:-.venv}/bin/coreai-runtime" serve --data-dir "$data_dir" "$@"
