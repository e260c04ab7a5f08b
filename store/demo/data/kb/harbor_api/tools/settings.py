"""Settings of the Harbor API tools, read from the environment."""

import os

POOL_MAX_CONNS = 20


def database_url() -> str:
    """The PostgreSQL URL with the pgxpool settings PgBouncer needs (transaction mode: no statement cache)."""
    base = os.environ.get("HARBOR_DATABASE_URL", "postgres://harbor@localhost/harbor")
    return f"{base}?pool_max_conns={POOL_MAX_CONNS}&default_query_exec_mode=exec"
