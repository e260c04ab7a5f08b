"""The builder that generates every row of the demo into the in-memory model of :mod:`store.demo.model`.

It follows the reference's rules as it goes: entries chain their ``parentId`` to the session's leaf, a turn opens
a run and closes both together, every lease acquisition is recorded so the final lease row carries the right
epoch, forks copy and remap entries as reference section 14 describes, and delivery intents get the status
their operations aggregate to (reference 13.3).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from store.demo import text as T
from store.demo.model import (
    DAY,
    DEMO_SEED,
    MODELS,
    PROTOCOLS,
    SEC,
    DeliveryOp,
    DemoEntry,
    DemoLease,
    DemoRun,
    DemoSession,
    DemoTurn,
    Subst,
    aggregate_intent_status,
    at,
    dumps,
    rfc3339,
    sha256_hex,
    tokens,
)


class DemoBuilder:
    """Generates every row of the demo in memory; :mod:`store.demo.build` writes them into the databases."""

    def __init__(self) -> None:
        self.rng = random.Random(DEMO_SEED)
        self.used: set[str] = set()
        self.order = 0
        self.sessions: list[DemoSession] = []
        self.entries: list[DemoEntry] = []
        self.events: list[tuple[int, int, tuple[object, ...]]] = []  # (ts, order, row without seq)
        self.stats: list[tuple[object, ...]] = []
        self.exec_intents: list[tuple[object, ...]] = []
        self.recoveries: list[tuple[object, ...]] = []
        self.attachments: list[tuple[object, ...]] = []
        self.intents: list[tuple[object, ...]] = []
        self.operations: list[tuple[object, ...]] = []
        self.fork_requests: list[tuple[int, str, str, DemoSession, DemoSession, DemoEntry | None]] = []
        self.projects: list[tuple[str, str, int]] = []
        self.cron: list[tuple[object, ...]] = []
        self.channel_tools: list[tuple[object, ...]] = []
        self.owners: dict[str, tuple[str, int]] = {}

    # ids ---------------------------------------------------------------------------------------------------------
    def hex(self, n: int = 16) -> str:
        while True:
            value = f"{self.rng.getrandbits(n * 4):0{n}x}"
            if value not in self.used:
                self.used.add(value)
                return value

    def pid(self, prefix: str) -> str:
        return prefix + self.hex()

    def owner(self, name: str, pid: int) -> tuple[str, int]:
        if name not in self.owners:
            self.owners[name] = (f"pid-{pid}-{self.hex(32)}", pid)
        return self.owners[name]

    def ms(self, lo: float, hi: float) -> int:
        """A random duration between ``lo`` and ``hi`` seconds, in milliseconds."""
        return int(self.rng.uniform(lo, hi) * 1000)

    # sessions and entries ----------------------------------------------------------------------------------------
    def session(self, cwd: str, created: int, model_key: str = "sonnet", *, channel: tuple[str, str] | None = None,
                thinking: str | None = "medium") -> DemoSession:
        s = DemoSession(id=self.hex(), cwd=cwd, created=created, model_key=model_key)
        if channel:
            s.channel_type, s.channel_id = channel
            s.source = channel[0]
        self.sessions.append(s)
        header: dict[str, object] = {"version": 3, "cwd": cwd}
        if channel:
            header["channelType"], header["channelId"] = channel
        self._add(s, s.id, "session", None, created, header, created)
        provider, model, _, _ = MODELS[model_key]
        self.append(s, "model_change", created + 40, {"provider": provider, "modelId": model})
        if thinking:
            self.append(s, "thinking_level_change", created + 41, {"thinkingLevel": thinking})
        return s

    def _add(self, s: DemoSession, entry_id: str, etype: str, parent: str | None, ts: int, fields: dict[str, object],
             wtime: int) -> DemoEntry:
        self.order += 1
        e = DemoEntry(s, entry_id, etype, parent, ts, fields, wtime, self.order)
        s.entries.append(e)
        self.entries.append(e)
        if etype != "session":
            s.leaf = entry_id
        return e

    def append(self, s: DemoSession, etype: str, ts: int, fields: dict[str, object]) -> DemoEntry:
        return self._add(s, self.hex(), etype, s.leaf, ts, fields, ts)

    def set_title(self, s: DemoSession, ts: int, name: str, source: str = "auto") -> None:
        self.append(s, "session_info", ts, {"name": name, "source": source})
        s.title = name

    def message(self, s: DemoSession, ts: int, msg: dict[str, object]) -> DemoEntry:
        body = {"role": msg.pop("role"), **msg, "timestamp": rfc3339(ts)}
        return self.append(s, "message", ts, {"message": body})

    def user(self, s: DemoSession, ts: int, text: str) -> DemoEntry:
        s.ctx += tokens(text)
        s.new_tokens += tokens(text)
        return self.message(s, ts, {"role": "user", "content": text})

    def assistant(self, s: DemoSession, ts: int, blocks: list[dict[str, object]], run: DemoRun | None, latency: int,
                  attachments: list[dict[str, object]] | None = None) -> DemoEntry:
        provider, model, window, price = MODELS[s.model_key]
        out_text = 0
        reasoning = 0
        for b in blocks:
            if b["type"] == "text":
                out_text += tokens(str(b["text"]))
            elif b["type"] == "thinking":
                reasoning += tokens(str(b["thinking"]))
            elif b["type"] == "toolCall":
                out_text += tokens(str(b["toolCall"]["arguments"])) + 12  # type: ignore[index]
        prompt = s.ctx + 2400  # system prompt and tool definitions
        cache_write = min(s.new_tokens, prompt) if provider == "anthropic" else 0
        uncached = self.rng.randint(3, 60)
        cache_read = max(0, prompt - cache_write - uncached)
        if provider != "anthropic":
            uncached += cache_write
        output = out_text + reasoning
        total = uncached + output + cache_read + cache_write
        cost = (uncached * price[0] + output * price[1] + cache_read * price[2] + cache_write * price[3]) / 1e6
        usage = {"input": uncached, "output": output, "reasoning": reasoning, "cacheRead": cache_read,
                 "cacheWrite": cache_write, "totalTokens": total, "cost": round(cost, 6)}
        msg: dict[str, object] = {"role": "assistant", "contents": blocks}
        if attachments:
            msg["attachments"] = attachments
        msg["usage"] = usage
        entry = self.message(s, ts, msg)
        s.ctx += output
        s.new_tokens = output
        self.stats.append((rfc3339(ts), s.id, provider, model, uncached + cache_read + cache_write, output,
                           total, latency, PROTOCOLS[provider]))
        if run is not None:
            for key in ("input", "output", "reasoning", "cacheRead", "cacheWrite", "totalTokens"):
                run.usage[key] = run.usage.get(key, 0) + usage[key]
            run.usage["cost"] = round(run.usage.get("cost", 0) + usage["cost"], 6)
            run.context = {"tokens": prompt + output, "contextWindow": window,
                           "percent": round((prompt + output) * 100 / window, 1)}
            self.event(run, ts, "model_request", "running",
                       {"provider": provider, "inputTokens": uncached + cache_read + cache_write,
                        "outputTokens": output, "durationMs": latency})
        return entry

    def tool_result(self, s: DemoSession, ts: int, call_id: str, name: str, text: str, error: bool) -> DemoEntry:
        size = len(text) * 2 // 5 + 8  # tool output (code, logs) is token-dense
        s.ctx += size
        s.new_tokens += size
        msg: dict[str, object] = {"role": "toolResult", "toolCallId": call_id, "toolName": name,
                                  "toolKind": "function", "content": text}
        if error:
            msg["isError"] = True
        return self.message(s, ts, msg)

    def thinking(self, text: str) -> dict[str, object]:
        sig = "".join(self.rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(88))
        return {"type": "thinking", "thinking": text, "signature": sig}

    # runs, events, leases ----------------------------------------------------------------------------------------
    def event(self, run: DemoRun, ts: int, etype: str, status: str, data: dict[str, object], *, event_id: str | None = None,
              source: str = "agentruntime") -> None:
        self.order += 1
        model = MODELS[run.session.model_key][1]
        row = (event_id or self.pid("evt_"), run.session.id, run.id, etype, source, status, model, "yolo", rfc3339(ts), dumps(data))
        self.events.append((ts, self.order, row))
        run.updated = max(run.updated, ts)

    def lease(self, s: DemoSession, owner: tuple[str, int], purpose: str, run_id: str, acquired: int, released: int | None,
              *, heartbeat: int | None = None, expires: int | None = None) -> None:
        if released is not None:
            s.leases.append(DemoLease(owner, purpose, run_id, acquired, released, released, "released"))
        else:
            hb = heartbeat if heartbeat is not None else acquired
            s.leases.append(DemoLease(owner, purpose, run_id, acquired, hb, expires if expires is not None else hb + 15 * SEC, "active"))

    def owner_for(self, s: DemoSession, ts: int) -> tuple[str, int]:
        if s.channel_type != "local":
            return self.owner("serve", 1377)
        if ts < at(11, 1, 0, 0):
            return self.owner("tui-oct", 48213)
        if ts < at(11, 16, 0, 0):
            return self.owner("tui-nov", 51877)
        if ts < at(11, 20, 0, 0):
            return self.owner("tui-w47", 60422)
        if ts < at(11, 20, 10, 0):
            return self.owner("tui-crashed", 71209)
        return self.owner("tui-now", 73310)

    def start_run(self, s: DemoSession, ts: int, intent_id: str, attempt: int, retry_of: str, prompt: str) -> DemoRun:
        run = DemoRun(self.pid("run_"), s, intent_id, attempt, retry_of, ts, MODELS[s.model_key][1], s.source, updated=ts)
        s.runs.append(run)
        if attempt == 1:
            request = {"prompt": prompt[:240], "source": s.source, "workDir": s.cwd}
            self.exec_intents.append((intent_id, s.id, s.source, run.model, "yolo", s.cwd, sha256_hex(dumps(request)),
                                      dumps(request), dumps({"mode": "yolo", "approvals": "dangerous_only"}), rfc3339(ts)))
        return run

    def finish_run(self, run: DemoRun, ts: int, status: str, *, error: str = "", error_info: dict[str, object] | None = None,
                   release: bool = True) -> None:
        run.status = status
        run.finished = ts
        run.updated = ts
        run.error = error
        run.error_info = error_info or {}
        data: dict[str, object] = {"status": status}
        if error:
            data["error"] = error
        self.event(run, ts, status, status, data, event_id=f"terminal_{run.id}_{status}")
        if release:
            s = run.session
            self.lease(s, self.owner_for(s, run.started), "execution", run.id, run.started, ts + 40)

    # turns -------------------------------------------------------------------------------------------------------
    def turn(self, s: DemoSession, t: int, script: T.Script, *, subs: dict[str, str] | None = None, user_text: str | None = None,
             intent_id: str | None = None, attempt: int = 1, retry_of: str = "", stop_after_call: bool = False,
             cancel: bool = False, hooks: dict[int, Callable[[DemoEntry, int, DemoRun | None], int]] | None = None,
             attachments: list[dict[str, object]] | None = None) -> tuple[int, DemoTurn | None, DemoRun | None, list[DemoEntry]]:
        """Append one conversation turn at time ``t``; return (end time, turn, run, assistant tool-call entries)."""
        sub = Subst(subs or {})
        prompt = user_text if user_text is not None else sub(script.user)
        run: DemoRun | None = None
        turn: DemoTurn | None = None
        intent_id = intent_id or self.pid("intent_")
        if not s.legacy:
            run = self.start_run(s, t, intent_id, attempt, retry_of, prompt)
            turn_id = self.pid("turn_")
            start = self.append(s, "turn_start", t, {"turnId": turn_id, "intentId": intent_id, "runId": run.id, "attempt": attempt})
            turn = DemoTurn(turn_id, s, intent_id, run.id, start, t)
            s.turns.append(turn)
            self.event(run, t, "run_started", "running", {"turnId": turn_id, "intentId": intent_id, "attempt": attempt})
            t += self.ms(0.05, 0.3)
        self.user(s, t, prompt)
        first = True
        calls = script.calls
        tool_msgs: list[DemoEntry] = []
        i = 0
        while i < len(calls):
            group = [calls[i]]
            j = i + 1
            while j < len(calls) and calls[j].parallel:
                group.append(calls[j])
                j += 1
            blocks: list[dict[str, object]] = []
            if first and script.think:
                blocks.append(self.thinking(sub(script.think)))
            if group[0].say:
                blocks.append({"type": "text", "text": sub(group[0].say)})
            ids: list[str] = []
            for c in group:
                call_id = "call_" + self.hex(24)
                ids.append(call_id)
                args = {k: sub(v) if isinstance(v, str) else v for k, v in c.args.items()}
                blocks.append({"type": "toolCall", "toolCall": {"id": call_id, "name": c.tool, "kind": "function",
                                                               "arguments": dumps(args)}})
            latency = self.ms(1.5, 9.0) + (self.ms(3, 12) if first else 0)
            t += latency
            msg = self.assistant(s, t, blocks, run, latency)
            tool_msgs.append(msg)
            first = False
            if stop_after_call:
                return t, turn, run, tool_msgs
            for c, call_id in zip(group, ids, strict=False):
                dur = {"read_file": (0.02, 0.2), "grep": (0.05, 0.6), "edit": (0.02, 0.15),
                       "write_file": (0.02, 0.1)}.get(c.tool, (0.4, 14.0))
                t += self.ms(*dur)
                result = self.tool_result(s, t, call_id, c.tool, sub(c.result), c.error)
                if run is not None:
                    self.event(run, t, "tool_call", "running", {"toolCallId": call_id, "toolName": c.tool, "isError": c.error})
                if hooks and i in hooks:
                    t = hooks[i](result, t, run)
            i = j
        if cancel:
            t += self.ms(0.3, 1.5)
            assert turn is not None and run is not None
            self.end_turn(turn, t, "cancelled", "aborted")
            self.finish_run(run, t, "cancelled", error="cancelled by user")
            return t, turn, run, tool_msgs
        if script.answer:
            blocks = []
            if first and script.think:
                blocks.append(self.thinking(sub(script.think)))
            blocks.append({"type": "text", "text": sub(script.answer)})
            latency = self.ms(3, 16)
            t += latency
            self.assistant(s, t, blocks, run, latency, attachments)
        if turn is not None and run is not None:
            t += self.ms(0.05, 0.4)
            self.end_turn(turn, t, "completed", "stop")
            self.finish_run(run, t, "completed")
        return t, turn, run, tool_msgs

    def end_turn(self, turn: DemoTurn, ts: int, status: str, stop_reason: str) -> None:
        run_id = turn.run_id
        turn.end = self.append(turn.session, "turn_end", ts, {"turnId": turn.id, "intentId": turn.intent_id, "runId": run_id,
                                                              "status": status, "stopReason": stop_reason})
        turn.status = status
        turn.ended = ts

    def conversation(self, s: DemoSession, t: int, scripts: list[tuple[T.Script, dict[str, str]]], *,
                     title: str = "", retitle: str = "") -> int:
        """Several turns with human pauses; titles the session after the first turn."""
        for n, (script, subs) in enumerate(scripts):
            t, _, _, _ = self.turn(s, t, script, subs=subs)
            if n == 0 and title:
                t += self.ms(0.5, 2.5)
                self.set_title(s, t, title)
            if n == 1 and retitle:
                t += self.ms(20, 90)
                self.set_title(s, t, retitle, "manual")
            t += self.ms(25, 420)
        return t

    def compaction(self, s: DemoSession, ts: int, summary: str, first_kept: DemoEntry | None, *, missing_id: str = "",
                   last_summarized: DemoEntry | None = None) -> DemoEntry:
        previous = [e for e in s.entries if e.type == "compaction"]
        fields: dict[str, object] = {"summary": summary,
                                     "firstKeptEntryId": missing_id or (first_kept.id if first_kept else ""),
                                     "tokensBefore": s.ctx + 2400}
        fields["summaryVersion"] = len(previous) + 1
        if previous:
            fields["previousCompactionId"] = previous[-1].id
        if last_summarized is None and first_kept is not None:
            last_summarized = s.entries[s.entries.index(first_kept) - 1]
        if last_summarized is not None:
            fields["lastSummarizedEntryId"] = last_summarized.id
        entry = self.append(s, "compaction", ts, fields)
        kept = 0
        if first_kept is not None and not missing_id:
            idx = s.entries.index(first_kept)
            kept = sum(tokens(dumps(e.fields)) // 2 for e in s.entries[idx:] if e.type == "message")
        if not missing_id:
            s.ctx = tokens(summary) + kept
            s.new_tokens = s.ctx
        return entry

    # forks -------------------------------------------------------------------------------------------------------
    def fork(self, source: DemoSession, at: int, kind: str, at_message: DemoEntry | None = None) -> DemoSession:
        """Fork ``source`` at time ``at`` the way reference section 14 describes."""
        existing = [e for e in source.entries if e.wtime <= at]
        closed = [tr for tr in source.turns if tr.end is not None and tr.end.wtime <= at]
        if kind == "session":
            boundary_turn = closed[-1]
        else:
            assert at_message is not None
            boundary_turn = next(tr for tr in closed if tr.start.order < at_message.order < tr.end.order)  # type: ignore[union-attr]
        assert boundary_turn.end is not None
        idx = existing.index(boundary_turn.end)
        while idx + 1 < len(existing) and existing[idx + 1].type != "turn_start":
            idx += 1
        copied = existing[: idx + 1]
        child = DemoSession(id=self.hex(), cwd=source.cwd, created=source.created, model_key=source.model_key,
                         parent=source, fork_kind=kind, boundary=copied[-1], seed_length=len(copied))
        child.project = source.project
        self.sessions.append(child)
        ids = {e.id: (child.id if e.type == "session" else self.hex()) for e in copied}
        turn_ids = {tr.id: self.pid("turn_") for tr in closed if tr.end is not None and tr.end.order <= copied[-1].order}
        refs = {"compaction": ("firstKeptEntryId", "previousCompactionId", "lastSummarizedEntryId"),
                "content_override": ("targetEntryId",), "branch_summary": ("fromId",), "label": ("targetId",)}
        wt = at
        for e in copied:
            fields = dict(e.fields)
            if e.type == "session":
                fields = {"version": 3, "cwd": source.cwd, "parentSession": source.id, "channelType": "local"}
            for key in refs.get(e.type, ()):
                if fields.get(key):
                    fields[key] = ids.get(str(fields[key]), fields[key])
            if e.type in ("turn_start", "turn_end"):
                fields["turnId"] = turn_ids[str(fields["turnId"])]
            parent = ids.get(e.parent_id) if e.parent_id else None
            wt += 1
            self._add(child, ids[e.id], e.type, parent, e.ts, fields, wt)
            if e.type == "session_info":
                child.title = str(fields["name"])
        by_id = {e.id: e for e in child.entries}
        for tr in closed:
            if tr.id in turn_ids:
                assert tr.end is not None
                copy = DemoTurn(turn_ids[tr.id], child, tr.intent_id, tr.run_id, by_id[ids[tr.start.id]], tr.started,
                             tr.status, by_id[ids[tr.end.id]], tr.ended)
                child.turns.append(copy)
        child.ctx = source.ctx
        titles = {x.title for x in self.sessions}
        n = 1
        while f"{source.title} ({n})" in titles:
            n += 1
        self.set_title(child, wt + 25, f"{source.title} ({n})")
        self.lease(source, self.owner_for(source, at), "fork", "", at - 20, at + 60)
        request_id = f"fork-{self.hex(8)}-{self.hex(4)}"
        self.fork_requests.append((at, sha256_hex(request_id), "auto", source, child, at_message))
        return child

    # delivery ----------------------------------------------------------------------------------------------------
    def attachment(self, s: DemoSession, run: DemoRun, ts: int, kind: str, filename: str, media_type: str, size: int,
                   att: str | None = None) -> str:
        att = att or self.pid("att_")
        digest = sha256_hex(f"{filename}:{size}")
        self.attachments.append((att, s.id, run.id, "tool", kind, filename, media_type, size, digest,
                                 f"attachments/{s.id}/{att}", "stored", rfc3339(ts), rfc3339(ts + 7 * DAY), dumps({})))
        return att

    def deliver(self, s: DemoSession, run: DemoRun, reply_to: str, ops: list[DeliveryOp]) -> None:
        assert run.finished is not None
        created = run.finished
        intent = self.pid("dlv_")
        op_ids = [self.pid("dop_") for _ in ops]
        statuses = [op.status for op in ops]
        updated = created
        for n, op in enumerate(ops):
            t_upd = created + op.delay_ms
            updated = max(updated, t_upd)
            provider_msg = ""
            provider_asset = ""
            if op.status == "delivered":
                provider_msg = ("om_" + self.hex(32)) if s.channel_type == "feishu" else str(self.rng.randint(10**18, 10**19 - 1))
            if op.status in ("uploaded", "delivered") and op.kind.startswith("upload"):
                provider_asset = ("file_v3_" + self.hex(24)) if s.channel_type == "feishu" else "media_" + self.hex(24)
            self.operations.append((
                op_ids[n], intent, op.key, op.artifact, op.kind, n + 1, op_ids[op.depends] if op.depends is not None else None,
                sha256_hex(f"{intent}:{op.key}"), sha256_hex(f"{op.kind}:{op.key}:{run.id}"), op.status, provider_asset, provider_msg,
                dumps({}), op.attempts, op.next_attempt_ms, op.failure, "", op.attempts, None, rfc3339(created), rfc3339(t_upd),
                rfc3339(op.retry_window_ms) if op.retry_window_ms is not None else None,
            ))
        status = aggregate_intent_status(statuses)
        context = {"chatType": "p2p" if s.channel_type == "wechat" else "group", "replyTo": reply_to}
        self.intents.append((intent, s.id, run.id, s.channel_type, s.channel_id, reply_to, dumps(context), status,
                             rfc3339(created), rfc3339(updated)))
