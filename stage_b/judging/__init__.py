"""New work orders judged at an operating point: the judge (its settings, the day, the verdict lines, the page, the
command)."""
