"""The demo's extra delivery outbox rows: what the story's own outbox (``store.demo.story``) lacks.

The story already writes, for its channel sessions, a delivered reply, an ``uncertain`` upload with its
``dependency_uncertain`` send, a transport failure (``transport_error``) with its ``dependency_failed`` send, a
``delivery_retries_exhausted`` text, an ``unsupported`` card and an upload waiting in ``retry_wait``. This part
adds, next to them (two intents to other chat targets of runs that already delivered to their own chat):

* a **three-step chain** of one transient failure — an image upload out of retries, its send and the caption
  that follows it both ``dependency_failed`` — so a retry reopens two dependents;
* a **permanent** failure in the middle of a chain — the file was uploaded (``uploaded``), its send was
  rejected (``bot_not_in_chat``: the bot was removed from that group), the follow-up text ``dependency_failed`` —
  so the screen shows a retry refused with its reason.

Rows are deterministic (ids from fixed digests, times relative to ``DEMO_NOW``) and written with raw SQL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from store.demo.model import MIN, NOW_MS, SEC, aggregate_intent_status, dumps, rfc3339, sha256_hex

# (operation key, kind, status, failure code, attempts, depends on index, ms after the run finished)
Op = tuple[str, str, str, str, int, int | None, int]

PLANS: tuple[tuple[str, str, str, tuple[Op, ...]], ...] = (
    # platform, which run (earliest finished run of that platform's sessions), target, operations
    ("feishu", "first", "oc_" + sha256_hex("demo:ops-alerts")[:32], (
        ("reply:image:latency", "upload_image", "failed", "delivery_retries_exhausted", 9, None, 10 * MIN + 4 * SEC),
        ("reply:image:latency:send", "send_image", "failed", "dependency_failed", 0, 0, 10 * MIN + 4 * SEC + 20),
        ("reply:text:caption", "send_text", "failed", "dependency_failed", 0, 1, 10 * MIN + 4 * SEC + 40),
    )),
    ("feishu", "last", "oc_" + sha256_hex("demo:release-room")[:32], (
        ("reply:file:notes", "upload_file", "uploaded", "", 1, None, 2 * SEC),
        ("reply:file:notes:send", "send_file", "failed", "bot_not_in_chat", 1, 0, 3 * SEC),
        ("reply:text:summary", "send_text", "failed", "dependency_failed", 0, 1, 3 * SEC + 30),
    )),
)


def _ms(text: str) -> int:
    import calendar
    import time

    base = text.split(".")[0].rstrip("Z")
    ms = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) * 1000
    if "." in text:
        ms += int(text.split(".")[1].rstrip("Z").ljust(3, "0")[:3])
    return ms


def add_to_demo(root: Path) -> None:
    conn = sqlite3.connect(root / "sessions.db")
    try:
        with conn:
            for platform, which, target, ops in PLANS:
                order = "ASC" if which == "first" else "DESC"
                found = conn.execute(
                    "SELECT i.run_id, i.session_id, r.finished_at FROM delivery_intents i "
                    "JOIN session_runs r ON r.id = i.run_id WHERE i.platform = ? AND r.finished_at IS NOT NULL "
                    f"ORDER BY r.finished_at {order}, i.id LIMIT 1", (platform,)).fetchone()
                if found is None:
                    continue
                run_id, session_id, finished = found
                created = _ms(finished)
                intent = "dlv_" + sha256_hex(f"demo-part:{run_id}:{target}")[:16]
                ids = ["dop_" + sha256_hex(f"demo-part:{intent}:{op[0]}")[:16] for op in ops]
                updated = created
                for n, (key, kind, status, code, attempts, dep, delay) in enumerate(ops):
                    t = min(created + delay, NOW_MS - SEC)
                    updated = max(updated, t)
                    asset = ("file_v3_" + sha256_hex(f"asset:{ids[n]}")[:24]) if status == "uploaded" else ""
                    conn.execute(
                        "INSERT INTO delivery_operations (id,intent_id,operation_key,artifact_id,operation_kind,"
                        "sequence,depends_on,idempotency_key,payload_digest,status,provider_asset_id,"
                        "provider_message_id,provider_state,attempt_count,next_attempt_at,failure_code,lease_owner,"
                        "lease_epoch,lease_expires_at,created_at,updated_at,retry_window_started_at) "
                        "VALUES (?,?,?,NULL,?,?,?,?,?,?,?,'',?,?,NULL,?,'',?,NULL,?,?,NULL)",
                        (ids[n], intent, key, kind, n + 1, ids[dep] if dep is not None else None,
                         sha256_hex(f"{intent}:{key}"), sha256_hex(f"{kind}:{key}:{run_id}"), status, asset,
                         dumps({}), attempts, code, attempts, rfc3339(created), rfc3339(t)))
                status = aggregate_intent_status([op[2] for op in ops])
                context = {"chatType": "group", "replyTo": ""}
                conn.execute(
                    "INSERT INTO delivery_intents (id,session_id,run_id,platform,target_id,reply_message_id,"
                    "transport_context,status,created_at,updated_at) VALUES (?,?,?,?,?,'',?,?,?,?)",
                    (intent, session_id, run_id, platform, target, dumps(context), status, rfc3339(created),
                     rfc3339(updated)))
    finally:
        conn.close()
