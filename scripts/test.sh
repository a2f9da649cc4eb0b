#!/usr/bin/env bash
# Installs what the tests need on Debian (where it may), then runs lint, types and tests.
#
# The tests use real servers: Prometheus (and its promtool), VictoriaMetrics, Chromium for the
# HTML report, openssl for test certificates, kubectl to apply `gpuaudit fix`'s patches
# offline (`kubectl patch --local`; Debian's kubernetes-client). As root, or with sudo that needs
# no password, the missing ones are installed with apt-get. Otherwise the script says what to install and runs
# what it can: each test that needs a missing server is skipped with its reason in the pytest
# summary (with CI set, those tests fail instead of skipping).
#
# pytest runs on one worker per CPU core (pytest-xdist; `-n 0` among the arguments runs it in one
# process), each test file on one worker.
#
#   scripts/test.sh [pytest arguments]   # everything
#   scripts/test.sh --deps-only          # only check (and install) the servers
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=0
if [ "${1:-}" = "--deps-only" ]; then
  deps_only=1
  shift
fi

# command -> Debian package
declare -A PACKAGE=(
  [prometheus]=prometheus
  [promtool]=prometheus
  [victoria-metrics]=victoria-metrics
  [vmalert]=victoria-metrics
  [chromium]=chromium
  [openssl]=openssl
  [tmux]=tmux
  [kubectl]=kubernetes-client
)
missing=()
packages=()
for cmd in prometheus promtool victoria-metrics vmalert chromium openssl tmux kubectl; do
  if ! command -v "$cmd" >/dev/null 2>&1; then
    missing+=("$cmd")
    pkg=${PACKAGE[$cmd]}
    case " ${packages[*]:-} " in *" $pkg "*) ;; *) packages+=("$pkg") ;; esac
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  how=""
  if [ "$(id -u)" -eq 0 ]; then
    how="root"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    how="sudo"
  fi
  install_line="apt-get install -y --no-install-recommends ${packages[*]}"
  installed=0
  if [ -n "$how" ] && command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$how" = "sudo" ] && SUDO="sudo"
    echo "scripts/test.sh: installing ${packages[*]} (real servers for the tests)"
    if $SUDO apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${packages[@]}" >/dev/null; then
      installed=1
    else
      echo "scripts/test.sh: apt-get could not install ${packages[*]}." >&2
    fi
  fi
  if [ "$installed" -eq 0 ]; then
    why="not root and no sudo without a password"
    [ -n "$how" ] && why="no apt-get, or it failed"
    echo "scripts/test.sh: missing: ${missing[*]} ($why)." >&2
    echo "  Install them as root: $install_line" >&2
    echo "  Running what can run: the tests that need them are skipped, each named with its" >&2
    echo "  reason in the pytest summary." >&2
  fi
fi
[ "$deps_only" -eq 1 ] && exit 0

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -m venv .venv; then
    echo "scripts/test.sh: '$PY -m venv' failed; install Debian's python3-venv (as root:" \
      "apt-get install -y python3-venv) or set PYTHON to a Python 3.10+ with venv." >&2
    exit 1
  fi
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"

.venv/bin/ruff check .
.venv/bin/mypy --strict gpuaudit

# The release build: the sdist and the wheel as `python -m build` makes them, and `twine check`
# on both (the metadata PyPI would read, README included). Built in a temporary folder so the
# tree stays as it was (the sdist's egg-info is ignored by git).
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT
if ! .venv/bin/python -m build --outdir "$dist/out" . >"$dist/build.log" 2>&1; then
  cat "$dist/build.log" >&2
  echo "scripts/test.sh: the release build (python -m build) failed; its log is above." >&2
  exit 1
fi
.venv/bin/twine check --strict "$dist"/out/*

.venv/bin/python -m pytest -q -n auto "$@"
