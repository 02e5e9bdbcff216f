"""Promises on live work: the monitor (its days, monitor.json, the command), one replay of a mission's days
(monitor_replay), the inspection states, the monitor page, simulated days, the audit planner (plan_audits), the shares a
day is judged at (day_shares)."""
