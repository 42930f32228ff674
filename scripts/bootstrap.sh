#!/usr/bin/env bash
# Create .venv and install the project with its pinned stack; a no-op when nothing changed.
# torch goes in first from a local CPU wheel (or PyTorch's CPU index), never a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
PY=$VENV/bin/python
STAMP=$VENV/.accelopt-stamp
want=$(cat pyproject.toml constraints.txt scripts/bootstrap.sh | sha256sum | cut -d' ' -f1)
if [ -x "$PY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi
[ -x "$PY" ] || python3 -m venv "$VENV"
"$PY" -m pip install -q --disable-pip-version-check "uv==0.13.9"
links=${PIP_FIND_LINKS:-/opt/wheels}
torch_src=()
if ls "$links"/torch-2.13.0*cpu*.whl >/dev/null 2>&1; then
  torch_src=(--find-links "$links")
else
  torch_src=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
fi
UV=("$VENV/bin/uv" pip install --python "$PY" --compile-bytecode "${torch_src[@]}" -c constraints.txt)
"${UV[@]}" "torch==2.13.0"
"${UV[@]}" -e ".[dev]"
# FlashInfer-Bench for the interop tests, without its GPU stack (flashinfer-python, tvm-ffi, CUDA wheels)
"${UV[@]}" --no-deps "flashinfer-bench==0.1.2" "docstring-parser==0.18.0"
echo "$want" > "$STAMP"
