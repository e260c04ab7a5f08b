"""A delivery worker as the runtime runs one (reference 13.4–13.7), against a fake chat provider.

Run as its own OS process so the outbox is exercised between real processes::

    python -m store.mothx.delivery_worker --dir D [--owner ID] [--outcome ok|transient|permanent|unknown]
        [--script KEY=OUTCOME[,OUTCOME…]]… [--call-seconds 0.05] [--poll 0.25] [--lease-ms 30000]
        [--max-retries N] [--exit-when-idle] [--max-seconds S]

Each pass reads the due list, claims every due operation (a new lease epoch, attempt + 1), records the
in-flight phase (``uploading`` for an ``upload_*`` kind, else ``sending``) under that lease, calls the fake
provider and writes the fenced result:

* ``ok`` — ``uploaded`` (an ``upload_*`` step, with a provider asset id) or ``delivered`` (with a message id);
* ``transient`` — a transport error: ``retry_wait`` with the backoff, or ``failed``
  (``delivery_retries_exhausted``) once the retry window or ``--max-retries`` is spent;
* ``permanent`` — ``failed`` with ``provider_rejected`` (never retried);
* ``unknown`` — the call timed out with no answer: ``uncertain`` (``provider_outcome_unknown``); never re-sent.

The outcome of an attempt is the ``--script`` entry for the operation's key (or id): its n-th outcome for the
n-th attempt, the last one after that; else ``--outcome``. Every step prints one JSON line on stdout (``claimed``,
``progress``, ``result``, ``lease_lost``, ``idle``, ``done``), flushed, so a test can follow it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from store.errors import StoreError
from store.mothx.delivery_model import (
    LEASE_MS,
    OUTCOME_UNKNOWN,
    RETRY_WINDOW_MS,
    DeliveryLeaseLost,
    DeliveryOperation,
    DeliveryOperationAbsent,
    DeliveryOperationBusy,
    now_ms,
)

if TYPE_CHECKING:
    from store.mothx.sessiondir import SessionDir

OUTCOMES = ("ok", "transient", "permanent", "unknown")
PERMANENT_CODE = "provider_rejected"

Emit = Callable[..., None]


def default_owner() -> str:
    """The reference's default worker id: ``delivery-worker-<16 hex>``."""
    return "delivery-worker-" + secrets.token_hex(8)


@dataclass
class FakeProvider:
    """A chat provider whose every answer is scripted: per operation key (or id) a list of outcomes by attempt."""

    default: str = "ok"
    script: dict[str, list[str]] = field(default_factory=dict)
    call_seconds: float = 0.0

    def outcome(self, op: DeliveryOperation) -> str:
        plan = self.script.get(op.operation_key) or self.script.get(op.id)
        if not plan:
            return self.default
        return plan[min(max(op.attempt_count, 1), len(plan)) - 1]

    def call(self, op: DeliveryOperation) -> str:
        if self.call_seconds > 0:
            time.sleep(self.call_seconds)
        return self.outcome(op)


def _provider_id(prefix: str, op: DeliveryOperation) -> str:
    return prefix + hashlib.sha256(f"{op.id}:{op.lease_epoch}".encode()).hexdigest()[:24]


class DeliveryWorker:
    """Claims due operations and executes them against a :class:`FakeProvider`."""

    def __init__(self, sd: SessionDir, provider: FakeProvider, *, owner: str | None = None,
                 lease_ms: int = LEASE_MS, max_retries: int = 0, window_ms: int = RETRY_WINDOW_MS,
                 emit: Emit | None = None) -> None:
        self.sd = sd
        self.provider = provider
        self.owner = owner or default_owner()
        self.lease_ms = lease_ms
        self.max_retries = max_retries
        self.window_ms = window_ms
        self.emit: Emit = emit or (lambda event, **fields: None)

    def run_once(self) -> int:
        """One pass over the due list; returns how many operations were claimed."""
        from store.mothx.delivery_store import claim, list_due

        claimed = 0
        for due in list_due(self.sd, now_ms()):
            try:
                op = claim(self.sd, due.id, self.owner, now=now_ms(), lease_ms=self.lease_ms)
            except (DeliveryOperationBusy, DeliveryOperationAbsent):
                continue  # another worker has it, or its dependency is not done yet
            claimed += 1
            self.emit("claimed", operation=op.id, kind=op.operation_kind, epoch=op.lease_epoch,
                      attempt=op.attempt_count)
            try:
                self.execute(op)
            except DeliveryLeaseLost as exc:
                self.emit("lease_lost", operation=op.id, epoch=op.lease_epoch, message=str(exc))
        return claimed

    def execute(self, op: DeliveryOperation) -> str:
        from store.mothx.delivery_store import record_transport_error, update_progress, update_result

        upload = op.operation_kind.startswith("upload")
        phase = "uploading" if upload else "sending"
        update_progress(self.sd, op.id, self.owner, op.lease_epoch, phase, now=now_ms())
        self.emit("progress", operation=op.id, status=phase, epoch=op.lease_epoch)
        outcome = self.provider.call(op)
        t = now_ms()
        if outcome == "ok":
            if upload:
                status = "uploaded"
                update_result(self.sd, op.id, self.owner, op.lease_epoch, status,
                              provider_asset_id=_provider_id("asset_", op), now=t)
            else:
                status = "delivered"
                update_result(self.sd, op.id, self.owner, op.lease_epoch, status,
                              provider_message_id=_provider_id("msg_", op), now=t)
        elif outcome == "transient":
            status = record_transport_error(self.sd, op, self.owner, op.lease_epoch, now=t,
                                            max_retries=self.max_retries, window_ms=self.window_ms)
        elif outcome == "permanent":
            status = "failed"
            update_result(self.sd, op.id, self.owner, op.lease_epoch, status, failure_code=PERMANENT_CODE, now=t)
        else:  # the call timed out: the provider may or may not have it
            status = "uncertain"
            update_result(self.sd, op.id, self.owner, op.lease_epoch, status, failure_code=OUTCOME_UNKNOWN, now=t)
        self.emit("result", operation=op.id, outcome=outcome, status=status, epoch=op.lease_epoch)
        return status


def _printer() -> Emit:
    def emit(event: str, **fields: object) -> None:
        obj: dict[str, object] = {"event": event, "pid": os.getpid(), "t": round(time.time(), 3)}
        obj.update({k: v for k, v in fields.items() if v is not None})
        sys.stdout.write(json.dumps(obj) + "\n")  # ASCII only: every control character escaped
        sys.stdout.flush()

    return emit


def _script(items: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, plan = item.rpartition("=")
        outcomes = [p.strip() for p in plan.split(",") if p.strip()]
        if not sep or not key or not outcomes or any(o not in OUTCOMES for o in outcomes):
            raise argparse.ArgumentTypeError(f"--script wants KEY=OUTCOME[,OUTCOME…] with outcomes "
                                             f"{', '.join(OUTCOMES)}; got {item!r}")
        out[key] = outcomes
    return out


def build_parser(prog: str = "python -m store.mothx.delivery_worker") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="A delivery worker against a fake chat provider.")
    add_arguments(p)
    p.add_argument("--dir", required=True, help="session directory (holds sessions.db)")
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--owner", default="", help="the worker id (default delivery-worker-<16 hex>)")
    p.add_argument("--outcome", choices=OUTCOMES, default="ok", help="what the fake provider answers (default ok)")
    p.add_argument("--script", action="append", default=[], metavar="KEY=OUTCOME[,OUTCOME…]",
                   help="per operation key or id, the outcome of each attempt (the last one repeats)")
    p.add_argument("--call-seconds", type=float, default=0.05, help="how long a provider call takes")
    p.add_argument("--poll", type=float, default=0.25, help="seconds between passes over the due list")
    p.add_argument("--lease-ms", type=int, default=LEASE_MS, help="operation lease in ms (default 30000)")
    p.add_argument("--max-retries", type=int, default=0, help="retry cap besides the 10-min window (0: none)")
    p.add_argument("--exit-when-idle", action="store_true", help="stop after a pass with nothing due")
    p.add_argument("--max-seconds", type=float, default=0.0, help="stop after this long (0: run until killed)")


def run(sd: SessionDir, args: argparse.Namespace, emit: Emit | None = None) -> int:
    emit = emit or _printer()
    worker = DeliveryWorker(sd, FakeProvider(args.outcome, _script(args.script), args.call_seconds),
                            owner=args.owner or None, lease_ms=args.lease_ms, max_retries=args.max_retries,
                            emit=emit)
    emit("started", owner=worker.owner)
    deadline = time.monotonic() + args.max_seconds if args.max_seconds > 0 else None
    try:
        while True:
            claimed = worker.run_once()
            if claimed == 0:
                if args.exit_when_idle:
                    emit("idle")
                    break
            if deadline is not None and time.monotonic() >= deadline:
                break
            if claimed == 0:
                time.sleep(args.poll)
    except KeyboardInterrupt:
        pass
    except StoreError as exc:
        emit("error", message=str(exc))
        return 1
    emit("done", owner=worker.owner)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from store.mothx.sessiondir import open_session_dir

    args = build_parser().parse_args(argv)
    try:
        _script(args.script)
    except argparse.ArgumentTypeError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    with open_session_dir(args.dir) as sd:
        return run(sd, args)


if __name__ == "__main__":
    raise SystemExit(main())
