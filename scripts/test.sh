#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian machine, then runs lint, types and tests.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1 || ! command -v victoria-metrics >/dev/null 2>&1; then
  echo "installing Debian's prometheus and victoria-metrics (real servers for the tests)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus victoria-metrics >/dev/null
fi
if ! command -v tmux >/dev/null 2>&1; then
  echo "installing Debian's tmux (the terminal tests capture the report from a real terminal)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends tmux >/dev/null
fi
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium (the browser tests open the HTML report)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"

.venv/bin/ruff check .
.venv/bin/mypy --strict gpuaudit
.venv/bin/python -m pytest -q "$@"
