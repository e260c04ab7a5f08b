"""Inspect the webhook outbox when confirmations stall (docs/runbook.md)."""

from .settings import database_url

RETRY_WAIT = "retry_wait"


class OutboxReport:
    """Rows of the webhook outbox, counted by state."""

    def __init__(self, rows: list[tuple[str, int]]) -> None:
        self.rows = dict(rows)

    def stuck(self) -> int:
        """Rows waiting for a retry: the first thing to check when bookings stay requested."""
        return self.rows.get(RETRY_WAIT, 0)

    def summary(self) -> str:
        return f"{self.stuck()} rows in {RETRY_WAIT}"


def report_query() -> str:
    """The SQL that counts the outbox rows by state."""
    return "SELECT state, count(*) FROM webhook_outbox GROUP BY state"


def connect_args() -> dict[str, str]:
    return {"dsn": database_url()}
