"""The demo's long session: a 5,000-entry migration of harbor-api from database/sql to pgx v5, generated turn by
turn (reads, edits, builds, tests, greps and questions over every package), so a transcript screen has a session
big enough to page through. Used by :mod:`store.demo.story`.
"""

from __future__ import annotations

from store.demo import text as T
from store.demo.builder import DemoBuilder
from store.demo.model import (
    DAY,
    HOUR,
    MIN,
    DemoSession,
    DemoTurn,
    at,
)

# -----------------------------------------------------------------------------------------------

_TABLES = {"Booking": "bookings", "Berth": "berths", "Vessel": "vessels", "Invoice": "invoices", "Delivery": "webhook_deliveries",
           "Token": "api_tokens", "Event": "audit_events", "Arrival": "arrivals", "Crane": "cranes", "TideWindow": "tide_windows",
           "Declaration": "declarations", "Partner": "partners"}

_EDITS: tuple[tuple[str, str], ...] = (
    ("\t\"database/sql\"\n", "\t\"github.com/jackc/pgx/v5\"\n\t\"github.com/jackc/pgx/v5/pgtype\"\n\t\"github.com/jackc/pgx/v5/pgxpool\"\n"),
    ("\tdb *sql.DB\n", "\tpool *pgxpool.Pool\n"),
    ("\trow := s.db.QueryRowContext(ctx, q, id)", "\trow := s.pool.QueryRow(ctx, q, id)"),
    ("\tvar notes sql.NullString", "\tvar notes pgtype.Text"),
    ("errors.Is(err, sql.ErrNoRows)", "errors.Is(err, pgx.ErrNoRows)"),
    ("\tfor rows.Next() {\n\t\tvar x {E}\n\t\tif err := rows.Scan(&x.ID, &x.Name, &x.UpdatedAt); err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t\tout = append(out, x)\n\t}",
     "\tout, err := pgx.CollectRows(rows, pgx.RowToStructByName[{E}])"),
    ("\t_, err := s.db.ExecContext(ctx, q, args...)", "\t_, err := s.pool.Exec(ctx, q, args...)"),
    ("\ttx, err := s.db.BeginTx(ctx, nil)\n\tif err != nil {\n\t\treturn err\n\t}\n\tdefer tx.Rollback()",
     "\treturn pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {"),
    ("func New{E}Store(db *sql.DB) *Store {\n\treturn &Store{db: db}\n}", "func New{E}Store(pool *pgxpool.Pool) *Store {\n\treturn &Store{pool: pool}\n}"),
    ("\tvar closedAt sql.NullTime", "\tvar closedAt pgtype.Timestamptz"),
)

_BUILD_ERRORS: tuple[tuple[str, str, str], ...] = (
    ("internal/{pkg}/{file}:{line}:{col}: cannot use notes (variable of type sql.NullString) as pgtype.Text value in assignment",
     "\tx.Notes = notes", "\tx.Notes = notes.String"),
    ("internal/{pkg}/{file}:{line}:{col}: undefined: sql", "\tif errors.Is(err, sql.ErrNoRows) {", "\tif errors.Is(err, pgx.ErrNoRows) {"),
    ("internal/{pkg}/{file}:{line}:{col}: s.db undefined (type *Store has no field or method db)", "\ts.db.", "\ts.pool."),
    ("internal/{pkg}/{file}:{line}:{col}: \"database/sql\" imported and not used", "\t\"database/sql\"\n", ""),
    ("internal/{pkg}/{file}:{line}:{col}: not enough return values\n\thave (error)\n\twant ([]{E}, error)",
     "\t\treturn err", "\t\treturn nil, err"),
    ("internal/{pkg}/{file}:{line}:{col}: cannot use s.pool (variable of type *pgxpool.Pool) as *sql.DB value in argument to audit.Record",
     "\taudit.Record(ctx, s.pool,", "\taudit.Record(ctx, s.audit,"),
)

_THINK: tuple[str, ...] = (
    "{file} still takes a *sql.DB and uses sql.Null* for optional columns. Swap to pgxpool, pgtype for the nullable "
    "columns, and pgx.CollectRows for the list queries. Exported signatures stay the same.",
    "Same pattern as the previous files. Check the callers of New{E}Store first so the constructor change doesn't break "
    "wiring in cmd/harbor-api.",
    "This file has the transaction helper. pgx.BeginTxFunc commits on nil and rolls back on error, so the manual "
    "Begin/defer Rollback/Commit dance goes away.",
    "Watch for sql.ErrNoRows comparisons: with pgx they must become pgx.ErrNoRows, wrapped into ErrNotFound so the "
    "handlers keep their 404 mapping.",
    "{file} scans timestamps into sql.NullTime. pgtype.Timestamptz has Valid too, so the conversion is mechanical.",
)

# second pass over converted files: (prompt, [(old, new)], answer)
_SECOND_PASS: tuple[tuple[str, tuple[tuple[str, str], ...], str], ...] = (
    ("Second pass on internal/{pkg}/{file}: drop the leftover sql.Null* helpers and use pgtype directly.",
     (("\tvar notes sql.NullString", "\tvar notes pgtype.Text"), ("\tvar closedAt sql.NullTime", "\tvar closedAt pgtype.Timestamptz"),
      ("sql.NullString{String: x.Notes, Valid: x.Notes != \"\"}", "pgtype.Text{String: x.Notes, Valid: x.Notes != \"\"}")),
     "No `sql.Null*` left in {pkg}/{file}; nullable columns are `pgtype.Text` and `pgtype.Timestamptz`, and `database/sql` is no longer imported there."),
    ("Now internal/{pkg}/{file} again: switch its transactions to pgx.BeginTxFunc.",
     (("\ttx, err := s.pool.Begin(ctx)\n\tif err != nil {\n\t\treturn err\n\t}\n\tdefer tx.Rollback(ctx)",
       "\treturn pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {"),
      ("\treturn tx.Commit(ctx)\n}", "\t\treturn nil\n\t})\n}")),
     "`Close` in {pkg}/{file} now runs inside `pgx.BeginTxFunc`: commit on nil, rollback on error, no manual `defer Rollback`."),
    ("Let's tighten internal/{pkg}/{file}: context timeouts on every query, like we did in booking.",
     (("func (s *Store) Get(ctx context.Context, id int64) ({E}, error) {\n",
       "func (s *Store) Get(ctx context.Context, id int64) ({E}, error) {\n\tctx, cancel := context.WithTimeout(ctx, s.queryTimeout)\n\tdefer cancel()\n"),
      ("func (s *Store) List(ctx context.Context, limit int) ([]{E}, error) {\n",
       "func (s *Store) List(ctx context.Context, limit int) ([]{E}, error) {\n\tctx, cancel := context.WithTimeout(ctx, s.queryTimeout)\n\tdefer cancel()\n")),
     "Every query in {pkg}/{file} now runs under `s.queryTimeout` (default 5 s, from `DB_QUERY_TIMEOUT`), same as booking."),
    ("Revisit {pkg}/{file}: use named args (pgx.NamedArgs) for the INSERT.",
     (("VALUES ($1, $2, $3) RETURNING id`", "VALUES (@name, @notes, @updated_at) RETURNING id`"),
      ("s.pool.QueryRow(ctx, q, x.Name,", "s.pool.QueryRow(ctx, q, pgx.NamedArgs{\"name\": x.Name, \"notes\":")),
     "The INSERT in {pkg}/{file} uses `pgx.NamedArgs` now, so the column list and the values can't drift apart."),
)

_KIND_THINK: dict[str, tuple[str, ...]] = {
    "tests": ("The store moved to pgx but the test helper still opens a *sql.DB; testdb.Pool gives a pgxpool.Pool on the same "
              "template database. The assertions on sql.ErrNoRows need to become ErrNotFound.",
              "Run the package tests first to see whether it's the fixture or the assertions."),
    "grep": ("A repo-wide search is cheaper than waiting for the compiler to find them one package at a time.",
             "Search for all three patterns at once: sql.ErrNoRows, the database/sql import, and sql.Null types."),
    "question": ("Answer from what we've already established in this migration; no need to touch code.",
                 "This is a design question about pgx behaviour; answer with the concrete setting we should use."),
    "lint": ("Run golangci-lint with the repo config over internal/ only; cmd/ hasn't been converted yet.",),
    "commit": ("Check what changed before committing; the message follows the pkg: summary convention.",),
    "second": ("This file is already on pgx; this pass only changes what the user asked for. Read it first to find the spots.",
               "Small focused change on an already converted file. Build and test after."),
}


def _converted(source: str) -> str:
    """The same Go file after the first pass (pgx, but sql.Null* and manual transactions still there)."""
    for old, new in (("\t\"database/sql\"\n", "\t\"database/sql\"\n\n\t\"github.com/jackc/pgx/v5\"\n\t\"github.com/jackc/pgx/v5/pgxpool\"\n"),
                     ("db *sql.DB", "pool *pgxpool.Pool"), ("&Store{db: db}", "&Store{pool: pool}"),
                     ("s.db.QueryRowContext", "s.pool.QueryRow"), ("s.db.QueryContext", "s.pool.Query"),
                     ("s.db.BeginTx(ctx, nil)", "s.pool.Begin(ctx)"), ("defer tx.Rollback()", "defer tx.Rollback(ctx)"),
                     ("tx.ExecContext", "tx.Exec"), ("tx.Commit()", "tx.Commit(ctx)"), ("sql.ErrNoRows", "pgx.ErrNoRows")):
        source = source.replace(old, new)
    return source


def _go_source(pkg: str, entity: str, file: str) -> str:
    """A plausible database/sql-era Go store file (what read_file returned before the conversion)."""
    table = _TABLES[entity]
    lower = entity[0].lower() + entity[1:]
    if file.endswith("_test.go"):
        return (f"package {pkg}\n\nimport (\n\t\"context\"\n\t\"database/sql\"\n\t\"errors\"\n\t\"testing\"\n\n"
                f"\t\"example.com/harbor-api/internal/testdb\"\n)\n\n"
                f"func Test{entity}Store_Get_NotFound(t *testing.T) {{\n\tdb := testdb.Open(t)\n"
                f"\tstore := New{entity}Store(db)\n\t_, err := store.Get(context.Background(), 42)\n"
                f"\tif !errors.Is(err, sql.ErrNoRows) {{\n\t\tt.Fatalf(\"expected sql.ErrNoRows, got: %v\", err)\n\t}}\n}}\n\n"
                f"func Test{entity}Store_CreateAndList(t *testing.T) {{\n\tdb := testdb.Open(t)\n\tstore := New{entity}Store(db)\n"
                f"\tctx := context.Background()\n\tfor i := 0; i < 3; i++ {{\n"
                f"\t\tif _, err := store.Create(ctx, {entity}{{Name: fmt.Sprintf(\"{lower}-%d\", i)}}); err != nil {{\n"
                f"\t\t\tt.Fatal(err)\n\t\t}}\n\t}}\n\tgot, err := store.List(ctx, 10)\n\tif err != nil {{\n\t\tt.Fatal(err)\n\t}}\n"
                f"\tif len(got) != 3 {{\n\t\tt.Fatalf(\"got %d {table}, want 3\", len(got))\n\t}}\n}}\n")
    return (
        f"package {pkg}\n\nimport (\n\t\"context\"\n\t\"database/sql\"\n\t\"errors\"\n\t\"fmt\"\n\t\"time\"\n)\n\n"
        f"// ErrNotFound is returned when no {lower} has the requested id.\nvar ErrNotFound = errors.New(\"{lower} not found\")\n\n"
        f"type Store struct {{\n\tdb *sql.DB\n}}\n\nfunc New{entity}Store(db *sql.DB) *Store {{\n\treturn &Store{{db: db}}\n}}\n\n"
        f"func (s *Store) Get(ctx context.Context, id int64) ({entity}, error) {{\n"
        f"\tconst q = `SELECT id, name, notes, closed_at, updated_at FROM {table} WHERE id = $1`\n"
        f"\trow := s.db.QueryRowContext(ctx, q, id)\n\tvar x {entity}\n\tvar notes sql.NullString\n\tvar closedAt sql.NullTime\n"
        f"\tif err := row.Scan(&x.ID, &x.Name, &notes, &closedAt, &x.UpdatedAt); err != nil {{\n"
        f"\t\tif errors.Is(err, sql.ErrNoRows) {{\n\t\t\treturn {entity}{{}}, ErrNotFound\n\t\t}}\n"
        f"\t\treturn {entity}{{}}, fmt.Errorf(\"get {lower} %d: %w\", id, err)\n\t}}\n"
        f"\tx.Notes = notes.String\n\tif closedAt.Valid {{\n\t\tx.ClosedAt = &closedAt.Time\n\t}}\n\treturn x, nil\n}}\n\n"
        f"func (s *Store) List(ctx context.Context, limit int) ([]{entity}, error) {{\n"
        f"\tconst q = `SELECT id, name, updated_at FROM {table} ORDER BY updated_at DESC LIMIT $1`\n"
        f"\trows, err := s.db.QueryContext(ctx, q, limit)\n\tif err != nil {{\n\t\treturn nil, fmt.Errorf(\"list {table}: %w\", err)\n\t}}\n"
        f"\tdefer rows.Close()\n\tvar out []{entity}\n"
        f"\tfor rows.Next() {{\n\t\tvar x {entity}\n\t\tif err := rows.Scan(&x.ID, &x.Name, &x.UpdatedAt); err != nil {{\n"
        f"\t\t\treturn nil, err\n\t\t}}\n\t\tout = append(out, x)\n\t}}\n\treturn out, rows.Err()\n}}\n\n"
        f"func (s *Store) Create(ctx context.Context, x {entity}) (int64, error) {{\n"
        f"\tconst q = `INSERT INTO {table} (name, notes, updated_at) VALUES ($1, $2, $3) RETURNING id`\n"
        f"\tvar id int64\n\terr := s.db.QueryRowContext(ctx, q, x.Name, sql.NullString{{String: x.Notes, Valid: x.Notes != \"\"}}, time.Now().UTC()).Scan(&id)\n"
        f"\tif err != nil {{\n\t\treturn 0, fmt.Errorf(\"create {lower}: %w\", err)\n\t}}\n\treturn id, nil\n}}\n\n"
        f"func (s *Store) Close(ctx context.Context, id int64, at time.Time) error {{\n"
        f"\ttx, err := s.db.BeginTx(ctx, nil)\n\tif err != nil {{\n\t\treturn err\n\t}}\n\tdefer tx.Rollback()\n"
        f"\tres, err := tx.ExecContext(ctx, `UPDATE {table} SET closed_at = $2, updated_at = $2 WHERE id = $1 AND closed_at IS NULL`, id, at)\n"
        f"\tif err != nil {{\n\t\treturn fmt.Errorf(\"close {lower} %d: %w\", id, err)\n\t}}\n"
        f"\tif n, _ := res.RowsAffected(); n == 0 {{\n\t\treturn ErrNotFound\n\t}}\n"
        f"\tif err := audit.Record(ctx, tx, \"{lower}.closed\", id); err != nil {{\n\t\treturn err\n\t}}\n\treturn tx.Commit()\n}}\n"
    )


def _numbered(source: str) -> str:
    """read_file output: the file with right-aligned line numbers."""
    return "\n".join(f"{n:>4}\t{line}" for n, line in enumerate(source.rstrip("\n").split("\n"), start=1))


def _long_script(demo: DemoBuilder, kind: str, pkg: str, entity: str, file: str, second_pass: bool) -> T.Script:
    rng = demo.rng
    path = f"internal/{pkg}/{file}"
    values = {"pkg": pkg, "file": file, "E": entity, "entity": entity}

    def fill(text: str) -> str:
        for k, v in values.items():
            text = text.replace("{" + k + "}", v)
        return text

    module = "example.com/harbor-api"
    calls: list[T.Call] = []
    if kind == "convert" and second_pass:
        prompt, edits, answer = rng.choice(_SECOND_PASS)
        user = fill(prompt)
        calls.append(T.read(path, _numbered(_converted(_go_source(pkg, entity, file)))))
        for old, new in edits:
            calls.append(T.edit(path, fill(old), fill(new)))
        calls.append(T.sh("go build ./... && go vet ./internal/" + pkg + "/...", "(no output)"))
        calls.append(T.sh(f"go test ./internal/{pkg}/...", f"ok  \t{module}/internal/{pkg}\t{rng.uniform(0.05, 1.4):.3f}s"))
        answer = fill(answer)
    elif kind == "convert":
        user = fill(rng.choice(T.LONG_USER_PROMPTS["convert"]))
        calls.append(T.read(path, _numbered(_go_source(pkg, entity, file)), say=fill(rng.choice(("Reading {file} first.", "Let me open {file}.", "")))))
        if rng.random() < 0.5:
            hits = "\n".join(f"{p}:{rng.randint(20, 240)}:\t{pkg}.New{entity}Store(db)" for p in
                             rng.sample(["cmd/harbor-api/main.go", "cmd/harbor-migrate/main.go", f"internal/{pkg}/handler_test.go",
                                         "internal/http/routes.go", "internal/worker/confirm.go"], 2))
            calls.append(T.grep(f"New{entity}Store", ".", hits, parallel=True))
        if rng.random() < 0.35:
            caller = rng.choice(["cmd/harbor-api/main.go", "internal/http/routes.go"])
            calls.append(T.read(caller, f"\tdb, err := sql.Open(\"postgres\", cfg.DatabaseURL)\n\t...\n\t{pkg}Store := {pkg}.New{entity}Store(db)\n"))
        for old, new in rng.sample(_EDITS, rng.randint(2, 6)):
            calls.append(T.edit(path, fill(old), fill(new)))
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            msg, old, new = rng.choice(_BUILD_ERRORS)
            err = fill(msg).replace("{line}", str(rng.randint(12, 210))).replace("{col}", str(rng.randint(2, 40)))
            calls.append(T.sh("go build ./... && go vet ./internal/" + pkg + "/...", f"# {module}/internal/{pkg}\n{err}\n[exit status 1]", error=True))
            calls.append(T.edit(path, fill(old), fill(new), say=rng.choice(("", "Fixing that.", "One more leftover from database/sql."))))
        calls.append(T.sh("go build ./... && go vet ./internal/" + pkg + "/...", "(no output)"))
        if rng.random() < 0.2:
            calls.append(T.sh(f"go test ./internal/{pkg}/...", (
                f"--- FAIL: Test{entity}Store_Get_NotFound (0.02s)\n    store_test.go:{rng.randint(30, 140)}: expected sql.ErrNoRows, got: "
                f"{entity[0].lower() + entity[1:]} not found\nFAIL\nFAIL\t{module}/internal/{pkg}\t{rng.uniform(0.1, 0.9):.3f}s\n[exit status 1]"),
                error=True))
            calls.append(T.edit(f"internal/{pkg}/store_test.go", "\tif !errors.Is(err, sql.ErrNoRows) {", "\tif !errors.Is(err, ErrNotFound) {"))
        calls.append(T.sh(f"go test ./internal/{pkg}/...", f"ok  \t{module}/internal/{pkg}\t{rng.uniform(0.05, 1.4):.3f}s"))
        answer = fill(rng.choice(T.LONG_ANSWERS["convert"]))
    elif kind == "tests":
        user = fill(rng.choice(T.LONG_USER_PROMPTS["tests"]))
        calls.append(T.sh(f"go test ./internal/{pkg}/...", (
            f"--- FAIL: Test{entity}Store_List (0.04s)\n    store_test.go:{rng.randint(30, 140)}: open test pool: "
            f"cannot use db (variable of type *sql.DB) as *pgxpool.Pool\nFAIL\t{module}/internal/{pkg} [build failed]\n[exit status 1]"), error=True))
        calls.append(T.read(f"internal/{pkg}/store_test.go", _go_source(pkg, entity, "store_test.go")))
        calls.append(T.edit(f"internal/{pkg}/store_test.go", "\tdb := testdb.Open(t)", "\tdb := testdb.Pool(t)"))
        calls.append(T.edit(f"internal/{pkg}/store_test.go", "\tif !errors.Is(err, sql.ErrNoRows) {", "\tif !errors.Is(err, ErrNotFound) {", parallel=True))
        calls.append(T.sh(f"go test ./internal/{pkg}/...", f"ok  \t{module}/internal/{pkg}\t{rng.uniform(0.05, 1.4):.3f}s"))
        answer = fill(rng.choice(T.LONG_ANSWERS["tests"]))
    elif kind == "grep":
        user = rng.choice(T.LONG_USER_PROMPTS["grep"])
        pattern = "sql\\.ErrNoRows|\"database/sql\"|sql\\.Null"
        leftovers = ("if errors.Is(err, sql.ErrNoRows) {", "\"database/sql\"", "var ts sql.NullTime")
        grep_hits = []
        for p, _, fs in rng.sample(T.LONG_PACKAGES, 3):
            grep_hits.append(f"internal/{p}/{fs[0]}:{rng.randint(40, 200)}:\t{rng.choice(leftovers)}")
        calls.append(T.grep(pattern, "internal/", "\n".join(grep_hits)))
        fixes = {"if errors.Is(err, sql.ErrNoRows) {": ("sql.ErrNoRows", "pgx.ErrNoRows"),
                 "\"database/sql\"": ("\t\"database/sql\"\n", ""), "var ts sql.NullTime": ("sql.NullTime", "pgtype.Timestamptz")}
        for hit in grep_hits:
            hpath, _, rest = hit.split(":", 2)
            old, new = fixes[rest.split("\t", 1)[1]]
            calls.append(T.edit(hpath, old, new, parallel=len(calls) > 1))
        calls.append(T.sh("go build ./...", "(no output)"))
        calls.append(T.grep(pattern, "internal/", "No matches found."))
        answer = rng.choice(T.LONG_ANSWERS["grep"])
    elif kind == "question":
        q = rng.randrange(len(T.LONG_USER_PROMPTS["question"]))
        user = T.LONG_USER_PROMPTS["question"][q]
        answer = T.LONG_ANSWERS["question"][q]
    elif kind == "lint":
        user = rng.choice(T.LONG_USER_PROMPTS["lint"])
        found = rng.randint(0, 2)
        if found:
            lines = [f"internal/{pkg}/{file}:{rng.randint(10, 200)}:{rng.randint(2, 30)}: Error return value of `rows.Close` is not checked (errcheck)",
                     f"internal/{pkg}/{file}:{rng.randint(10, 200)}:{rng.randint(2, 30)}: shadow: declaration of \"err\" shadows declaration (govet)"][:found]
            calls.append(T.sh("golangci-lint run ./internal/...", "\n".join(lines) + f"\n{found} issues.\n[exit status 1]", error=True))
            calls.append(T.edit(path, "\tdefer rows.Close()", "\tdefer rows.Close() // pgx: Close has no error; Err() is checked below"))
        calls.append(T.sh("golangci-lint run ./internal/...", "(no output)"))
        answer = rng.choice(T.LONG_ANSWERS["lint"])
    else:  # commit
        user = fill(rng.choice(T.LONG_USER_PROMPTS["commit"]))
        n_files = rng.randint(2, 5)
        calls.append(T.sh("git status --short", "\n".join(f" M internal/{pkg}/{f}" for f in
                                                          [f for p, _, fs in T.LONG_PACKAGES if p == pkg for f in fs][:n_files])))
        calls.append(T.sh(f"git commit -am \"{pkg}: move store to pgx v5\"",
                          f"[refactor/pgx-v5 {demo.hex(7)}] {pkg}: move store to pgx v5\n {n_files} files changed, "
                          f"{rng.randint(40, 220)} insertions(+), {rng.randint(30, 180)} deletions(-)"))
        answer = fill(rng.choice(T.LONG_ANSWERS["commit"]))
    if kind == "convert":
        think = fill(rng.choice(_KIND_THINK["second"] if second_pass else _THINK))
    else:
        think = fill(rng.choice(_KIND_THINK[kind]))
    return T.Script("", user, think, tuple(calls), answer)


def long_session(demo: DemoBuilder) -> DemoSession:
    rng = demo.rng
    s = demo.session(T.HARBOR, at(11, 16, 8, 31, 12), thinking="high")
    files = [(p, e, f) for p, e, fs in T.LONG_PACKAGES for f in fs if not f.endswith("_test.go")]
    cursor = 0
    t = s.created + demo.ms(20, 60)
    day_end = at(11, 16, 18, 30)
    done: list[str] = []
    since_commit = 0
    n = 0
    failed_done = False
    since_compaction = 0
    while len(s.entries) < 5200:
        if t > day_end:
            next_day = (t // DAY + 1) * DAY
            t = next_day + 8 * HOUR + demo.ms(15 * 60, 50 * 60)
            day_end = next_day + 18 * HOUR + 30 * MIN
        pkg, entity, file = files[cursor % len(files)]
        r = rng.random()
        if since_commit >= 3 and r < 0.22:
            kind = "commit"
        elif r < 0.72:
            kind = "convert"
        elif r < 0.82:
            kind = "tests"
        elif r < 0.88:
            kind = "grep"
        elif r < 0.94:
            kind = "question"
        else:
            kind = "lint"
        script = _long_script(demo, kind, pkg, entity, file, cursor >= len(files))
        if n == 0:
            script = T.Script("", "We're moving harbor-api from database/sql + lib/pq to pgx v5 (see docs/adr/0007). "
                              "Start with internal/booking/store.go; keep every exported signature the same so handlers don't change.",
                              script.think, script.calls, script.answer)
        if n == 131 and not failed_done:
            # the provider was overloaded: the run fails, then the same intent is retried as attempt 2
            failed_done = True
            intent = demo.pid("intent_")
            run = demo.start_run(s, t, intent, 1, "", script.user)
            turn_id = demo.pid("turn_")
            start = demo.append(s, "turn_start", t, {"turnId": turn_id, "intentId": intent, "runId": run.id, "attempt": 1})
            tr = DemoTurn(turn_id, s, intent, run.id, start, t)
            s.turns.append(tr)
            demo.event(run, t, "run_started", "running", {"turnId": turn_id, "intentId": intent, "attempt": 1})
            demo.user(s, t + 120, script.user)
            t += demo.ms(20, 40)
            error = "provider error: 529 overloaded_error: Overloaded"
            demo.event(run, t, "model_request", "running", {"provider": "anthropic", "error": error, "attempts": 3})
            demo.end_turn(tr, t + 50, "failed", "error")
            demo.finish_run(run, t + 60, "failed", error=error, error_info={"code": "overloaded_error", "status": 529, "retryable": True})
            t += demo.ms(40, 90)
            t, _, _, _ = demo.turn(s, t, script, intent_id=intent, attempt=2, retry_of=run.id)
        else:
            t, _, _, _ = demo.turn(s, t, script)
        if n == 0:
            demo.set_title(s, t + demo.ms(0.5, 2), T.LONG_TITLE)
        if n == 64:
            demo.set_title(s, t + demo.ms(10, 40), T.LONG_RETITLE, "manual")
        if n == 96:
            demo.append(s, "thinking_level_change", t + demo.ms(5, 15), {"thinkingLevel": "medium"})
        if kind == "convert":
            cursor += 1
            done.append(f"internal/{pkg}/{file}")
            since_commit += 1
        elif kind == "commit":
            since_commit = 0
        n += 1
        t += demo.ms(40, 420)
        since_compaction += 1
        if s.ctx > 140_000 or since_compaction >= 55:  # automatic near the window, or the user's /compact
            since_compaction = 0
            user_msgs = [tr.start for tr in s.turns[-3:]]
            first_kept = s.entries[s.entries.index(user_msgs[0]) + 1]
            if first_kept.type != "message":
                first_kept = next(e for e in s.entries[s.entries.index(user_msgs[0]):] if e.type == "message")
            packages_done = sorted({d.split("/")[1] for d in done})
            summary = (
                "## Goal\nMigrate harbor-api's store layer from database/sql + lib/pq to pgx v5 and pgxpool (ADR 0007), "
                "keeping every exported signature unchanged.\n\n"
                f"## Progress\n- {len(done)} file conversions so far; packages touched: {', '.join(packages_done)}\n"
                f"- last file: {done[-1] if done else 'none'}\n\n"
                "## Decisions\n- nullable columns use pgtype (Text, Timestamptz, Int8)\n"
                "- pgx.ErrNoRows is wrapped into each package's ErrNotFound\n"
                "- default_query_exec_mode=exec because PgBouncer runs in transaction mode; pool_max_conns=20\n"
                "- transactions use pgx.BeginTxFunc; serializable retries check SQLSTATE 40001\n\n"
                "## Next\n- continue with the remaining store files, then the test helpers (testdb.Pool)"
            )
            demo.compaction(s, t, summary, first_kept)
            t += demo.ms(2, 6)
    return s


