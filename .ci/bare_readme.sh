#!/usr/bin/env bash
# The README's quick-start commands on a bare machine: a fresh venv holding nothing but what
# pip installs for the project, and a PATH without Graphviz (dot), MPI (mpirun, mpiexec) or a
# browser (chromium, chromedriver), even when this machine has them (.ci/run installs them).
#
# The two command lines are read from the README's "## Quick start" sh block and run as
# written, from the repository root:
#   pip install ".[plot]" && python samples/quick_start.py
#   pip install ".[test]" && python -m pytest -q
# then the files the README says the first line writes are checked.
#
# Usage: .ci/bare_readme.sh
#   BARE_PYTEST_ARGS="tests/test_readme.py tests/test_viz.py"  replaces the second line's
#       pytest arguments (default: the README's, i.e. the whole suite, ~1 min);
#   KEEP_BARE_VENV=1  keeps the venv (its path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
START=$(date +%s)
stamp() { echo "[bare_readme $(( $(date +%s) - START ))s] $*"; }

PY=$(command -v python3)
WORK=$(mktemp -d /tmp/fluidlite-bare.XXXXXX)
cleanup() {
  if [ "${KEEP_BARE_VENV:-0}" = 1 ]; then echo "venv kept: $WORK/venv"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# -- a PATH without the optional engines (a directory holding one of them is replaced by a
# directory of links to everything else in it) and without other venvs' bin directories
HIDE="dot mpirun mpiexec orterun chromium chromium-browser chromedriver google-chrome"
BARE_PATH=""
n=0
IFS=: read -r -a DIRS <<< "$PATH"
for d in "${DIRS[@]}"; do
  [ -d "$d" ] || continue
  [ -e "$d/../pyvenv.cfg" ] && continue          # another venv (.ci/run's): not bare
  hit=0
  for t in $HIDE; do [ -e "$d/$t" ] && hit=1; done
  if [ "$hit" = 1 ]; then
    n=$((n + 1))
    shim="$WORK/path$n"
    mkdir -p "$shim"
    for f in "$d"/*; do
      b=${f##*/}
      case " $HIDE " in *" $b "*) continue ;; esac
      ln -s "$f" "$shim/$b"
    done
    d="$shim"
  fi
  BARE_PATH="${BARE_PATH:+$BARE_PATH:}$d"
done

# -- the fresh venv and an environment without this machine's fluidlite settings
"$PY" -m venv "$WORK/venv"
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV FLUIDLITE_PADDLE_PYTHON
for v in $(compgen -e | grep '^FLUIDLITE_' | grep -v '^FLUIDLITE_SEEDS$' || true); do unset "$v"; done
export PATH="$WORK/venv/bin:$BARE_PATH"
for t in $HIDE; do
  if command -v "$t" >/dev/null 2>&1; then echo "bare_readme: $t is still on PATH" >&2; exit 1; fi
done
stamp "fresh venv $WORK/venv; hidden from PATH: $HIDE"

# -- the README's two lines, as written
mapfile -t LINES < <(awk '/^## Quick start/{q=1} q&&/^```sh/{b=1; next} b&&/^```/{exit} b' README.md)
if [ "${#LINES[@]}" -ne 2 ]; then
  echo "bare_readme: expected 2 command lines in README.md's Quick start block, found" \
       "${#LINES[@]}" >&2
  exit 1
fi
case "${LINES[0]}" in *samples/quick_start.py*) ;; *)
  echo "bare_readme: the first README line no longer runs samples/quick_start.py" >&2; exit 1 ;;
esac
case "${LINES[1]}" in *"python -m pytest -q"*) ;; *)
  echo "bare_readme: the second README line no longer runs python -m pytest -q" >&2; exit 1 ;;
esac
touch "$WORK/before-line-1"
sleep 1                                  # a file written now is newer, even on coarse clocks
stamp "README line 1: ${LINES[0]}"
bash -c "${LINES[0]/pip install/pip install --quiet}"
# what the README says it writes, into the samples' default output folder (docs/guides/samples.md)
for f in samples_out/quick_start_program.html samples_out/quick_start_curves.png; do
  if [ ! -s "$f" ] || [ ! "$f" -nt "$WORK/before-line-1" ]; then
    echo "bare_readme: line 1 did not write $f" >&2; exit 1
  fi
done
stamp "line 1 passed: wrote samples_out/quick_start_program.html and quick_start_curves.png"
line2="${LINES[1]/pip install/pip install --quiet}"
if [ -n "${BARE_PYTEST_ARGS:-}" ]; then
  line2="${line2/python -m pytest -q/python -m pytest -q $BARE_PYTEST_ARGS}"
fi
stamp "README line 2: $line2"
bash -c "$line2"
stamp "line 2 passed"
