"""The per-session JSONL event store with SQLite event intents (format: EVENTSTORE.md in this folder)."""

from store.eventstore.intents import (
    ABORTED,
    APPENDED,
    COMMITTED,
    PREPARED,
    RECOVERY_REQUIRED,
    EventIntent,
    EventIntentFenced,
    EventIntentSpec,
    EventStoreNotHealthy,
    EventStoreUnreadable,
)
from store.eventstore.protocol import (
    BLOCKED,
    CORRUPT,
    HEALTHY,
    INCONSISTENT,
    RECONCILING,
    EventStoreInspection,
    append_event_batch,
    append_prepared_event_batch,
    commit_event_intent,
    event_store,
    inspect_event_store,
    next_sequence,
    read_committed_event_batches,
    scan_event_store,
    spec_for,
)
from store.eventstore.records import EventBatch, EventRecord, digest_event_batch
from store.eventstore.segments import EventStore, EventStoreStats, ScanResult, classify, forget_caches, write_stats

__all__ = [
    "ABORTED", "APPENDED", "BLOCKED", "COMMITTED", "CORRUPT", "HEALTHY", "INCONSISTENT", "PREPARED", "RECONCILING",
    "RECOVERY_REQUIRED", "EventBatch", "EventIntent", "EventIntentFenced", "EventIntentSpec", "EventRecord",
    "EventStore", "EventStoreInspection", "EventStoreNotHealthy", "EventStoreStats", "EventStoreUnreadable",
    "ScanResult", "append_event_batch", "append_prepared_event_batch", "classify", "commit_event_intent",
    "digest_event_batch", "event_store", "forget_caches", "inspect_event_store", "next_sequence",
    "read_committed_event_batches", "scan_event_store", "spec_for", "write_stats",
]
