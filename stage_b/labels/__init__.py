"""The review loop: the decisions import (decisions) and its chained log (decisions_log), agreement, gold checks, the
review split among reviewers (assign), the reviewer table (reviewer_quality)."""
