# Sourced by the launchers in scripts/ (not run on its own): the repository root as the working folder, the
# Python to use, and key=value settings parsed the one way every launcher parses them (stage_a/key_values.py).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python

# usage: settings "<known keys>" "<required keys>" "$@"  (-h/--help prints the launcher's header comment)
settings() {
  local arg parsed
  for arg in "${@:3}"; do
    case "$arg" in -h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d'; exit 0 ;; esac
  done
  parsed=$("$PY" -m stage_a.key_values "$@") || exit 2
  eval "$parsed"
}
