#!/usr/bin/env bash
# Installs whatever is missing on a fresh machine: a thin wrapper around tools/bootstrap.py (which does it all:
# system packages on Debian/Ubuntu as root, the virtual environment, the pinned llama.cpp wheel and llama-server
# built once into a cache, the project). Arguments go to it: `bash scripts/bootstrap.sh doctor`, `... run`, `... test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The first Python >= 3.11 found; on a fresh Debian/Ubuntu as root, apt installs one (CI runs unattended).
find_python() {
    local candidate
    for candidate in ${COREAI_PYTHON:-} python3 python3.13 python3.12 python3.11 python; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if ! python=$(find_python); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        echo "[bootstrap] installing Python (apt-get install python3 python3-venv)" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null
    fi
    python=$(find_python) || {
        echo "[bootstrap] error: no Python >= 3.11 found (set COREAI_PYTHON to one). Debian/Ubuntu: sudo apt-get" \
            "install python3 python3-venv; macOS: brew install python@3.12" >&2
        exit 2
    }
fi
exec "$python" tools/bootstrap.py "$@"
