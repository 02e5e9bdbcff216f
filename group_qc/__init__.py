"""`group-qc <command>`: one entry to the commands of group-qc (group_qc.cli)."""
