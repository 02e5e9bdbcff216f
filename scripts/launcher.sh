# Sourced by the launchers in scripts/ (not run on its own): -h/--help prints the launcher's header comment and
# exits, before anything runs; then the repository root as the working folder, the Python to use, and key=value
# settings parsed the one way every launcher parses them (stage_a/key_values.py).
for arg in "$@"; do
  case "$arg" in -h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d'; exit 0 ;; esac
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python

# usage: settings "<known keys>" "<required keys>" "$@"
settings() {
  local parsed
  parsed=$("$PY" -m stage_a.key_values "$@") || exit 2
  eval "$parsed"
}
