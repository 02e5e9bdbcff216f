"""monitor.json's records: the file (MonitorFile), a mission in it (MonitorMission) and a mission's judged day
(MonitorDay), declared once. stage_b.monitoring.monitor builds them, stage_b.monitoring.monitor_file reads them back
and checks them, the page and the judge read them; tests/test_monitor.py holds a built file to exactly these keys, so
a field added on one side only fails there instead of being read as missing. Pure: no imports but typing."""
from __future__ import annotations

from typing import TypedDict


class DayDrift(TypedDict):
    """The day's two label-free drift tests against the reference (validation, or the day the reference moved to)."""
    ks_p: float | None            # p_fail values against the reference's (Kolmogorov-Smirnov)
    defect_p: float | None        # the share of summaries showing a defect against the reference's (Fisher's exact)
    defect_share: float | None
    validation_defect_share: float | None
    fired: bool
    why: str | None
    tests: int
    against: str


class MonitorDay(TypedDict):
    """One mission's judged day: its counts (stage_b.monitoring.days.day_counts), the live bounds and detectors after
    it, and the inspection state and status they give (stage_b.monitoring.monitor_replay)."""
    day: str
    judged: int
    auto_decided: int
    automation_share: float | None
    audited: int
    auto_passed: int
    audits_labelled: int
    audited_auto_passed: int
    escapes: int                  # confirmed escapes (a second person, or a reviewer who meets the bar)
    escapes_unconfirmed: int      # escapes one reviewer alone found: waiting, counted nowhere
    unconfirmed: list[dict]       # those escapes: group and reviewer
    audits_disputed: int          # audited auto-passed groups in conflict or unsure: open, the promise unverified
    unresolved: list[dict]        # every audited auto-passed group without a label: group and why (disputed, undecided)
    audited_auto_failed: int
    audited_auto_failed_defects: int
    reviewed_labelled: int
    reviewed_defects: int
    agreed: int
    agreement: float | None
    audit_share: float | None
    drift: DayDrift
    share_asked: float | None
    share_note: str | None
    cum_escapes: int
    cum_audited: int
    escape_lower: float
    escape_upper: float
    escape_null: float | None
    state: str                    # normal, tightened, withdrawn (stage_b.monitoring.inspection)
    state_why: str
    clean_days: int
    escape_detector: float | None
    miss_detector: float | None
    miss_day_evalue: float | None
    miss_rate_estimate: float | None
    status: str                   # holds, unverified, withdrawn, not certified
    why: str
    next_audit_share: float | None
    withdrawn_here: bool
    rebased: bool
    drift_reference: str | None


class MissionFields(TypedDict):
    """What every mission of the file holds (MonitorMission adds what a withdrawn one holds)."""
    certified: bool
    promise: dict
    days: list[MonitorDay]
    drift_against: dict | None    # what today's summaries are tested against: the pooled days (groups, defect_groups,
                                  # days), None: the validation profile
    state: str
    state_why: str
    status: str
    why: str
    next_audit_share: float | None
    withdrawn_day: str | None


class MonitorMission(MissionFields, total=False):
    withdrawn_at: str             # a withdrawn mission's: when the evidence that withdrew it was decided


class MonitorFile(TypedDict):
    format: int
    operating_point: dict         # {"file", "sha256"}: the point the days were judged at
    confidence: float
    drift_alpha: float
    false_alarm_years: float
    tightened_clean_days: int
    days: list[str]
    day_folders: list[str]
    labels: str | None
    labels_head: dict | None      # the decisions log's head it was built from (stage_b.labels.decisions_log.head)
    created_at: str
    restore: str                  # the command that re-certifies this point (a withdrawn mission's status line)
    missions: dict[str, MonitorMission]
    family: dict
    workload: dict
    replaced: dict | None         # the point this one replaced: file, identity, archive (stage_b.monitoring.timeline)
    timeline: list[dict]          # the archived earlier points, oldest first (stage_b.monitoring.timeline.summary)
