#!/usr/bin/env bash
# Installs what is missing, then runs every test (the fast ones and the slow real-model ones).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec "${COREAI_VENV:-.venv}/bin/python" -m pytest "$@"
