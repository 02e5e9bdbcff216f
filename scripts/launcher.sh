# Sourced by the launchers in scripts/ (not run on its own): -h/--help prints the launcher's header comment and
# exits, before anything runs; then the repository root as the working folder ($REPO; the caller's folder is
# $CALLER_DIR), the Python to use, and key=value settings parsed the one way every launcher parses them
# (qc_core/key_values.py).
for arg in "$@"; do
  case "$arg" in -h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d'; exit 0 ;; esac
done
CALLER_DIR=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=$REPO/.venv/bin/python
case "$PY" in /*) ;; */*) PY=$CALLER_DIR/$PY ;; esac   # PYTHON=relative/path is the caller's

# usage: settings "<known keys, typed as key:words|key:count|key:flag>" "<required keys>" "$@"
settings() {
  local parsed
  parsed=$("$PY" -m qc_core.key_values "$@") || exit 2
  eval "$parsed"
}

# Back to the caller's folder once the settings are parsed, so that every relative path (a setting, a path inside
# extra=, an exported GROUP_QC_* variable) means the folder the user typed it in; the package stays importable
# from there ($REPO on PYTHONPATH; PYTHONSAFEPATH keeps the caller's own files from shadowing a module).
from_caller_dir() {
  cd "$CALLER_DIR" || { echo "error: cannot return to $CALLER_DIR" >&2; exit 2; }
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1
}

# usage: shell_words "$@": the arguments as one string that qc_core.key_values' words type splits back into them
shell_words() {
  "$PY" -m qc_core.key_values --join "$@"
}

# usage: library_log_in <dir>: ms-swift's and transformers' own lines (INFO, WARNING, deprecations, loading bars) go to
# <dir>/libraries.log instead of the terminal (qc_core.library_logs), unless verbose=1; the file is named at the end.
# A launcher started by another (judge.sh runs stage_a_infer.sh) keeps the file its caller chose.
library_log_in() {
  if [ "${verbose:-0}" = 1 ]; then unset GROUP_QC_LIBRARY_LOG; return; fi
  [ -n "${GROUP_QC_LIBRARY_LOG:-}" ] && return
  GROUP_QC_LIBRARY_LOG=$(realpath -m "$1/libraries.log")   # made when a library first writes (a stopped day: no folder)
  export GROUP_QC_LIBRARY_LOG HF_HUB_DISABLE_PROGRESS_BARS=1
  trap 'rc=$?; [ -s "$GROUP_QC_LIBRARY_LOG" ] && echo "== ms-swift and transformers lines: $GROUP_QC_LIBRARY_LOG (verbose=1 prints them here)"; exit $rc' EXIT
}
