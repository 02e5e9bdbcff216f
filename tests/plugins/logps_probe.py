"""An ms-swift external plugin for tests (load it after swift_plugins/qc_plugin.py). It appends one JSON line to the
file named by QC_TEST_LOGPS_OUT for every call of GRPOTrainer's per-token log-probabilities (the reference model's,
the policy's in the loss forward): the sha256 of the values and their sum; and one per decode step that our host
stop test (stage_a.stopping.HostStopWords) judged. Two runs that should compute the same thing must write the same
log-prob lines; the losses a tiny model logs are 0 (no reward varies) and cannot tell."""
import hashlib
import json
import os

from swift.rlhf_trainers.grpo_trainer import GRPOTrainer

from stage_a.stopping import HostStopWords


def _write(line: dict) -> None:
    with open(os.environ["QC_TEST_LOGPS_OUT"], "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _wrap(owner, name, after):
    original = getattr(owner, name)

    def probed(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        after(result)
        return result
    setattr(owner, name, probed)


def _logps(result):
    values = result[0].detach().float().cpu().contiguous()
    _write({"kind": "logps", "sha256": hashlib.sha256(values.numpy().tobytes()).hexdigest(),
            "sum": float(values.double().sum()), "shape": list(values.shape)})


_wrap(GRPOTrainer, "_get_per_token_logps_and_entropies", _logps)
_wrap(HostStopWords, "__call__", lambda result: _write({"kind": "host_stop_test"}))
