"""Run the goose migrations of the Harbor API database (docs/deploy.zh.md)."""

import subprocess

from .settings import database_url


def goose(command: str) -> list[str]:
    """The goose command line for one migration command."""
    return ["goose", "-dir", "migrations", "postgres", database_url(), command]


def migrate_prod() -> int:
    """Apply every pending migration (make migrate-prod)."""
    return subprocess.call(goose("up"))


def rollback(version: str) -> int:
    """Roll back to VERSION (make rollback VERSION=<previous>); every migration has a Down part."""
    return subprocess.call(goose(f"down-to {version}"))
