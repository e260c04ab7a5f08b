"""Health checks of a session directory, the long integrity check, and the full reset (ResetDatabase)."""

from store.health.checks import run_checks, summarize
from store.health.integrity import IntegrityCancelled, integrity_check
from store.health.model import ERROR, OK, WARN, HealthCheck, exit_code
from store.health.reset import ResetDatabase, active_runtime_leases

__all__ = ["ERROR", "OK", "WARN", "HealthCheck", "IntegrityCancelled", "ResetDatabase", "active_runtime_leases",
           "exit_code", "integrity_check", "run_checks", "summarize"]
