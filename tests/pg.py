"""A real, throwaway PostgreSQL server for the tests (nothing mocked).

``pg_cluster`` (one per test session) runs ``initdb`` into a fresh folder, starts ``postgres`` with ``pg_ctl -w
start`` on a free port with its unix socket in that folder, and stops it (and removes the folder) at the end.
``pg_url`` creates a new database on it for each test and yields its SQLAlchemy URL
(``postgresql+psycopg://…``). ``store_url`` is the parametrization the checkpoint and session-log suites run
over: ``"sqlite"`` (the default store, no URL) and ``"postgresql"`` (a fresh database).

The server binaries are found in ``$SESSIONSCOPE_PG_BIN``, on ``PATH`` or in ``/usr/lib/postgresql/*/bin``;
without them every PostgreSQL parametrization is skipped, naming what is missing. ``$SESSIONSCOPE_TEST_PG_URL``
names an already running server instead (a database is created on it per test).

PostgreSQL refuses to run as root: as root the server runs as the ``postgres`` OS user (``runuser``), so the
cluster folder is a private ``mkdtemp`` folder owned by that user (pytest's own temporary tree is readable by
its owner only).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def pg_bin_dir() -> Path | None:
    """The folder holding ``initdb``/``pg_ctl``/``postgres``, or None when the server is not installed."""
    env = os.environ.get("SESSIONSCOPE_PG_BIN")
    if env and (Path(env) / "initdb").exists():
        return Path(env)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class PgCluster:
    """A running server: its socket folder, port and superuser; :meth:`url` names one database on it."""

    host: str  # the unix socket folder, or a host name for $SESSIONSCOPE_TEST_PG_URL
    port: int
    user: str
    base_url: str = ""

    def url(self, database: str) -> str:
        if self.base_url:
            head, _, _ = self.base_url.rpartition("/")
            return f"{head}/{database}"
        return f"postgresql+psycopg://{self.user}@/{database}?host={self.host}&port={self.port}"

    def admin(self, sql: str) -> None:
        """Run one statement in autocommit on the ``postgres`` database (CREATE / DROP DATABASE)."""
        import psycopg

        if self.base_url:
            conninfo = self.url("postgres").replace("postgresql+psycopg://", "postgresql://")
        else:
            conninfo = f"host={self.host} port={self.port} user={self.user} dbname=postgres"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(sql)


def start_cluster() -> Generator[PgCluster, None, None]:
    """Start a throwaway server (skips the test when none can be started); stopped when the generator ends."""
    bindir = pg_bin_dir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed: the PostgreSQL engine is not "
                    "tested (apt-get install -y postgresql, or set SESSIONSCOPE_PG_BIN)")
    as_root = os.geteuid() == 0
    if as_root:
        try:
            pg_user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' OS user to run the PostgreSQL server as")
        prefix = ["runuser", "-u", "postgres", "--"]
        user = "postgres"
    else:
        prefix = []
        user = pwd.getpwuid(os.geteuid()).pw_name
    # As root the server runs as ``postgres``, which cannot enter a private TMPDIR (``mktemp -d`` makes it 0700):
    # its folder goes straight under /tmp (world-traversable, sticky), whatever TMPDIR is.
    root = Path(tempfile.mkdtemp(prefix="sessionscope-pg-", dir="/tmp" if as_root else None))
    data = root / "data"
    if as_root:
        os.chown(root, pg_user.pw_uid, pg_user.pw_gid)
    port = _free_port()
    env = dict(os.environ, LC_ALL="C", LANG="C")

    def run(*args: str) -> None:
        proc = subprocess.run([*prefix, *args], capture_output=True, text=True, env=env, timeout=120, cwd=root)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({proc.returncode}): {proc.stderr[-2000:]}")

    started = False
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", user, "-A", "trust", "-E", "UTF8", "--locale=C",
            "--no-sync")
        opts = (f"-k {root} -p {port} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c max_connections=60")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-o", opts, "-w", "-t", "60",
            "start")
        started = True
        yield PgCluster(host=str(root), port=port, user=user)
    finally:
        if started:
            try:
                run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL server for the test session (skips when none can be started)."""
    given = os.environ.get("SESSIONSCOPE_TEST_PG_URL")
    if given:
        yield PgCluster(host="", port=0, user="", base_url=given.replace("postgresql://", "postgresql+psycopg://", 1))
        return
    yield from start_cluster()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    """A new, empty database on the test server for one test; its URL. Dropped afterwards."""
    name = "t_" + uuid.uuid4().hex[:16]
    pg_cluster.admin(f'CREATE DATABASE "{name}" TEMPLATE template0 ENCODING \'UTF8\' LC_COLLATE \'C\' LC_CTYPE \'C\'')
    try:
        yield pg_cluster.url(name)
    finally:
        try:
            from store.agents.checkpoint_engine import dispose_engines

            dispose_engines()
            pg_cluster.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except Exception:  # noqa: BLE001 - a database left behind dies with the cluster
            pass


ENGINES = ("sqlite", "postgresql")


@pytest.fixture(params=ENGINES)
def store_url(request: pytest.FixtureRequest) -> str | None:
    """The store a test runs against: None (the default SQLite file in the session directory) or the URL of a
    fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    return str(request.getfixturevalue("pg_url"))


def libpq_url(url: str) -> str:
    """A store URL as psycopg/libpq takes it (no SQLAlchemy driver suffix)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def pg_execute(url: str, sql: str, params: tuple[object, ...] = (), *, no_constraints: bool = False) -> list[tuple[object, ...]]:
    """Run one statement on a test database outside the store (a test tampering with rows, or reading them
    back); ``no_constraints`` turns off foreign keys for it (``session_replication_role = replica``)."""
    import psycopg

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        if no_constraints:
            conn.execute("SET session_replication_role = replica")
        cur = conn.execute(sql.replace("?", "%s"), params or None)
        return list(cur.fetchall()) if cur.description else []


def pg_dump(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every table of a test database with its rows, sorted (what a test compares before and after)."""
    tables = [r[0] for r in pg_execute(
        url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")]
    return {str(t): sorted(pg_execute(url, f'SELECT * FROM "{t}"'), key=repr) for t in tables}
