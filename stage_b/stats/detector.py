"""The live guard's change detector: has the miss rate (or the escape rate) risen above the promise since some day?
Pure (math).

A confidence sequence on all days together is slow to see a rise after many good days, and a test of each day alone
at a level that shrinks with the day number has no power after a few weeks (shared notes, live-guard.md). The matching
question is change detection, and this module answers it with an **e-detector** (Shin, Ramdas & Rinaldo,
"E-detectors: a nonparametric framework for sequential change detection", arXiv 2203.03532, 2022), the
betting form of Page's CUSUM (Page, "Continuous inspection schemes", Biometrika 41, 1954):

- Each day d gives, for a bet size λ, an e-value E_d(λ) = Π_i (1 + λ c_i): a product over the day's labelled
  groups of a bet on a centred observation c_i in [-r, 1 - r] whose mean is <= 0 while the promise holds (for the
  escape rate, c = escape - r over the audited auto-passed groups; for the miss rate, c is the weighted miss
  observation of stage_b.monitoring.inspection). With λ in [0, 1 / r] every factor is >= 0, and E[E_d(λ) | the days
  before]
  <= 1 while the promise holds: each day's product is an e-value.
- The CUSUM e-detector restarts the bet whenever the evidence runs the other way:
  M_d(λ) = max(M_{d-1}(λ), 1) E_d(λ), with M_0 = 1; the statistic is the mean over a fixed grid of bet sizes
  (BET_FRACTIONS x 1/r), so no new rate has to be guessed.
- It alarms when the statistic reaches A. Its guarantee (Shin et al., Theorem 2.4 with Lorden's argument): while
  the promise holds, the expected number of days before a false alarm is at least A. With
  A = 365 x --false_alarm_years, a promise that holds is falsely alarmed at most once per that many years per
  mission on average, at any volume and audit share (the steps are days, whatever a day holds).

Its delay after a rise to rate R is about (log A + log |grid|) / KL per labelled group (Lorden 1971), which is why
the audit share decides how many days a rise takes to see (stage_b.monitoring.plan_audits).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from qc_core.errors import UserError
from stage_b.contract.bounds import in_range

# Bet sizes as fractions of the largest allowed, 1/r. The Kelly bet against a rise to R is (R - r) / (r (1 - r)) x r
# of it: 0.8 suits a rate near 0.8 + r (a defect the model no longer sees at all), 0.03 a rise to about twice r.
BET_FRACTIONS = (0.8, 0.5, 0.25, 0.12, 0.06, 0.03)
DEFAULT_FALSE_ALARM_YEARS = 10.0
DAYS_PER_YEAR = 365


class DetectorError(UserError):
    """A detector setting out of range (names the value and what to give instead)."""


def check_false_alarm_years(value) -> float:
    """--false_alarm_years: the average number of years between false alarms on one mission, from 0.1."""
    return in_range(value, "--false_alarm_years", 0.1, 1e6, f"the average years between false withdrawals of one "
                    f"mission you accept, from 0.1 to 1000000, e.g. {DEFAULT_FALSE_ALARM_YEARS:g}", DetectorError)


def alarm_level(false_alarm_years: float) -> float:
    """A: the detector alarms at a statistic >= A, and while the promise holds it waits >= A days on average."""
    return DAYS_PER_YEAR * false_alarm_years


def bets(rate: float) -> tuple[float, ...]:
    """The grid of bet sizes λ against a promised rate r (all within [0, 1/r])."""
    r = min(max(rate, 1e-9), 1 - 1e-9)
    return tuple(f / r for f in BET_FRACTIONS)


def log_factor(lam: float, c: float) -> float:
    """log(1 + λ c), -inf when the factor is 0 (a bet of everything lost)."""
    x = 1.0 + lam * c
    return math.log(x) if x > 0 else -math.inf


def day_log_evalues(rate: float, observations: list[tuple[float, int]]) -> tuple[float, ...]:
    """log E_d(λ) for each bet of the grid: `observations` are (centred value c, how many groups had it), every c in
    [-rate, 1 - rate]."""
    for c, _ in observations:
        if not -rate - 1e-12 <= c <= 1 - rate + 1e-12:
            raise DetectorError(f"an observation {c} lies outside [-{rate}, 1 - {rate}]: the bet would not be fair")
    return tuple(sum(count * log_factor(lam, c) for c, count in observations if count) for lam in bets(rate))


@dataclass(frozen=True)
class Detector:
    """The CUSUM e-detector's state: log M_d(λ) per bet of the grid (module doc)."""
    log_m: tuple[float, ...] = (0.0,) * len(BET_FRACTIONS)

    def after(self, day_log_e: tuple[float, ...]) -> Detector:
        """The state after one more day: M_d = max(M_{d-1}, 1) E_d for every bet."""
        return Detector(tuple(max(m, 0.0) + e for m, e in zip(self.log_m, day_log_e)))

    @property
    def value(self) -> float:
        """The statistic: the mean of M_d over the grid."""
        return sum(math.exp(min(m, 700.0)) for m in self.log_m) / len(self.log_m)

    def alarmed(self, level: float) -> bool:
        return self.value >= level


def day_evalue(day_log_e: tuple[float, ...]) -> float:
    """The day's own evidence, the mean of E_d over the grid: > 1 leans against the promise, <= 1 does not."""
    return sum(math.exp(min(e, 700.0)) for e in day_log_e) / len(day_log_e)


def escape_observations(escapes: int, audited: int, rate: float) -> list[tuple[float, int]]:
    """The escape rate's bets: each audited auto-passed group, 1 - r when a person failed it, -r otherwise."""
    return [(1.0 - rate, escapes), (-rate, audited - escapes)]
