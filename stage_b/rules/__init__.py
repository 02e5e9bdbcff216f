"""The decision rule and what travels with it: the operating point (threshold, review band, promises, the file), a
re-certified point beside the one it replaces (replacement), routes and blind audits, withdrawals beside the operating
point, the day's workload and its price. Pure."""
