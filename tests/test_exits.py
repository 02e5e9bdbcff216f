"""qc_core.exits: an error the user can fix is one line and exit 2; a bug keeps its traceback and exits 1; every error
class a user can cause derives from qc_core.errors.UserError."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from qc_core.errors import UserError
from qc_core.exits import EXIT_ERROR, run_cli

REPO = Path(__file__).resolve().parent.parent


def _raise(exc):
    def body():
        raise exc
    return body


@pytest.mark.parametrize("exc, status", [
    (UserError("--x 3 is out of range: use 0 to 1"), EXIT_ERROR),
    (FileNotFoundError("photos/ does not exist"), EXIT_ERROR),
])
def test_a_users_error_is_one_line_and_exit_2(exc, status, capsys):
    assert run_cli(_raise(exc)) == status
    err = capsys.readouterr().err
    assert err == f"error: {exc}\n"


@pytest.mark.parametrize("bug", [KeyError("verdict"), TypeError("unsupported operand"), ValueError("math domain"),
                                 AttributeError("'NoneType' object has no attribute 'x'")])
def test_a_bug_is_not_dressed_as_a_users_error(bug):
    with pytest.raises(type(bug)):
        run_cli(_raise(bug))


def test_a_key_error_deep_in_a_command_shows_its_traceback_and_exits_1(tmp_path):
    """A KeyError planted in the monitor's reading of a day (a bug, not a user's file) reaches the terminal whole."""
    code = ("import sys; import stage_b.monitoring.monitor as m\n"
            "def broken(*a, **k):\n    return {}['planted']\n"
            "m.check_alpha = broken\n"
            "sys.exit(m.main(['--operating_point', 'x.json', '--verdicts', 'd', '--labels', 'l',\n"
            "                 '--output_dir', 'o']))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "KeyError: 'planted'" in result.stderr and "error: " not in result.stderr


def _product_modules():
    for package in ("qc_core", "stage_a", "stage_b", "swift_plugins"):
        pkg = importlib.import_module(package)
        yield pkg
        for info in pkgutil.walk_packages(pkg.__path__, f"{package}."):
            if not info.name.endswith("__main__") and info.name != "swift_plugins.qc_plugin":
                yield importlib.import_module(info.name)


def test_every_error_class_a_user_can_cause_derives_from_the_one_base():
    """An error class of ours that is a ValueError (a bad value, a bad file) must be a UserError, or run_cli would show
    a user's mistake as a traceback."""
    loose = sorted(f"{m.__name__}.{name}" for m in _product_modules() for name, cls in vars(m).items()
                   if inspect.isclass(cls) and cls.__module__ == m.__name__ and issubclass(cls, ValueError)
                   and not issubclass(cls, UserError))
    assert loose == []
