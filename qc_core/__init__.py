"""The floor every stage stands on, knowing no stage: JSONL I/O with locks and atomic writes (`jsonl`), the mission
registry (`missions`), the Stage-A record contract (`records`), exit codes (`exits`), key=value settings for the
shell scripts (`key_values`), checkpoint fingerprints (`checkpoints`), photo loading (`images`), resized photo copies
and thumbnails (`thumbnails`), a stable hash (`stable_hash`). Pure: no torch, transformers or ms-swift.
Layers, each importing only from those before it (tests/test_core_is_light.py keeps it so): qc_core, review,
stage_a, stage_b, swift_plugins, group_qc_dev."""
