"""The one repair path of the screens (:mod:`tui.repair_flow`), on a bare screen with fake repairs: a read mode
refuses in one line naming the mode and starts nothing; a refusal at apply, a failed worker and a refused
preview are each one line (the data in them shown safe); the busy state always ends; the screen's follow-up
sees every outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from store.errors import LeaseBusy, RepairRefused
from store.mothx.repair_kit import PlannedChange, RepairPreview, RepairResult
from tests.tui.rendered import assert_clean, notification_texts
from tests.tui.runswait import wait_for
from tui import actions
from tui.lifecycle import ReportsWorkerFailures
from tui.repair_flow import EVERY_ERROR, NO_REFUSALS, FlowWords, Outcome, RepairFlow, ask, refusal_text
from tui.widgets.confirm import ConfirmDialog, ConfirmRequest

pytestmark = pytest.mark.anyio

HOSTILE = "lease of pid-4242-[/] \x1b]52;c;aGFja2Vk\x07 \u202etxt"


@dataclass
class Mode:
    value: str


@dataclass
class FakeDir:
    """The parts of a SessionDir the flow reads."""

    writable: bool = True
    mode: Mode = field(default_factory=lambda: Mode("read-write"))
    read_only_reason: str = ""


@dataclass
class FakeRepair:
    """A repair whose preview and apply do what the test says."""

    refusal: str = ""
    apply_error: Exception | None = None
    applied: list[RepairPreview] = field(default_factory=list)

    def preview(self) -> RepairPreview:
        return RepairPreview(repair_id="fake", title="Fake repair", session_id="s1", target="run r1",
                             changes=(PlannedChange("row", "runs", "r1", "update", "status → failed"),),
                             notes=(), refusal=self.refusal, fingerprint="f")

    def apply(self, expected: RepairPreview | None = None) -> RepairResult:
        if self.apply_error is not None:
            raise self.apply_error
        assert expected is not None
        self.applied.append(expected)
        return RepairResult(repair_id="fake", session_id="s1", target="run r1", changes=expected.changes,
                            message="Run r1 recovered.")


class FlowScreen(RepairFlow, ReportsWorkerFailures, Screen[None]):
    REPAIR_GROUP: ClassVar[str] = "test-repair"
    REPAIR_WORDS: ClassVar[FlowWords] = FlowWords(failed_timeout=10)

    def __init__(self, sd: FakeDir) -> None:
        super().__init__()
        self.sd = sd  # type: ignore[assignment]
        self.outcomes: list[Outcome[Any]] = []

    def compose(self) -> ComposeResult:
        yield Static("flow")

    def go(self, repair: FakeRepair | Exception, action: str = "recover_run") -> bool:
        def make(sd: object) -> FakeRepair:
            if isinstance(repair, Exception):
                raise repair
            return repair

        return self.start_repair(action, make, ask(opened_by="X"), done=self.outcomes.append,
                                 refused_title="Not repaired: run r1")


class Host(App[None]):
    def __init__(self, sd: FakeDir) -> None:
        super().__init__()
        self.flow = FlowScreen(sd)

    def on_mount(self) -> None:
        self.push_screen(self.flow)


async def _confirm(pilot: Any, app: Host) -> None:
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
    await pilot.press("y")


async def test_a_read_mode_refuses_in_one_line_naming_the_mode_and_starts_nothing() -> None:
    app = Host(FakeDir(writable=False, mode=Mode("snapshot")))
    async with app.run_test() as pilot:
        await pilot.pause()
        repair = FakeRepair()
        assert app.flow.go(repair) is False
        await pilot.pause()
        texts = notification_texts(app)
        assert texts == ["\n" + actions.write_refusal("recover_run", "snapshot")], texts
        assert "Snapshot (--snapshot)" in texts[0]
        assert not app.flow.repair_busy and len(list(app.workers)) == 0 and repair.applied == []
        assert app.flow.check_write_action("recover_run") is None and app.flow.check_write_action("refresh") is True


async def test_applied_then_reported_in_one_line() -> None:
    app = Host(FakeDir())
    async with app.run_test() as pilot:
        await pilot.pause()
        repair = FakeRepair()
        assert app.flow.go(repair) is True
        assert app.flow.refuse_when_busy(), "a second write is refused while the first is under way"
        await _confirm(pilot, app)
        await wait_for(pilot, lambda: bool(app.flow.outcomes), "the outcome")
        assert len(repair.applied) == 1 and not app.flow.repair_busy
        assert app.flow.last_result is not None and app.flow.last_error == ""
        assert "Repaired\nRun r1 recovered." in notification_texts(app)
        assert app.flow.outcomes[0].stage == "apply" and app.flow.outcomes[0].result is not None


async def test_refused_at_apply_is_one_safe_line() -> None:
    app = Host(FakeDir())
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.flow.go(FakeRepair(apply_error=RepairRefused(f"the {HOSTILE} moved\nsince the preview")))
        await _confirm(pilot, app)
        await wait_for(pilot, lambda: bool(app.flow.outcomes), "the outcome")
        outcome = app.flow.outcomes[0]
        assert outcome.stage == "apply" and outcome.refused and outcome.result is None
        error = app.flow.last_error
        assert error.startswith("Refused: the lease of pid-4242-[/]") and "\n" not in error, error
        assert not app.flow.repair_busy and app.flow.last_result is None
        assert [t for t in notification_texts(app) if t.startswith("Not repaired: run r1\n")] == [
            f"Not repaired: run r1\n{error}"]
        assert_clean(app, "the refusal")


async def test_a_refused_preview_is_one_line_and_opens_no_dialog() -> None:
    app = Host(FakeDir())
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.flow.go(FakeRepair(refusal="a live lease is held by pid 7"))
        await wait_for(pilot, lambda: bool(app.flow.outcomes), "the outcome")
        assert not isinstance(app.screen, ConfirmDialog)
        assert app.flow.outcomes[0].stage == "preview" and app.flow.outcomes[0].refused
        assert notification_texts(app) == ["Not repaired: run r1\nRefused: a live lease is held by pid 7"]


async def test_a_failing_worker_is_one_line_and_the_next_write_may_start() -> None:
    app = Host(FakeDir())
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.flow.go(RuntimeError(f"the disk is on fire {HOSTILE}"))
        await wait_for(pilot, lambda: bool(app.flow.outcomes), "the preview's failure")
        assert app.flow.outcomes[0].stage == "preview" and not app.flow.outcomes[0].refused
        text = notification_texts(app)
        assert len(text) == 1 and text[0].startswith("Repair failed\nUnexpected RuntimeError: the disk is on fire")
        assert "\n" not in app.flow.last_error and not app.flow.repair_busy
        # a failure of apply() that is no refusal: "Repair failed", and the flow is free again
        assert app.flow.go(FakeRepair(apply_error=OSError("no space left on device")))
        await _confirm(pilot, app)
        await wait_for(pilot, lambda: len(app.flow.outcomes) == 2, "the apply's failure")
        assert app.flow.last_error == "Unexpected OSError: no space left on device"
        assert notification_texts(app)[-1] == "Repair failed\nUnexpected OSError: no space left on device"
        assert_clean(app, "the failures")


async def test_cancel_changes_nothing_and_says_so() -> None:
    app = Host(FakeDir())
    async with app.run_test() as pilot:
        await pilot.pause()
        repair = FakeRepair()
        assert app.flow.go(repair)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirm dialog")
        await pilot.press("escape")
        await wait_for(pilot, lambda: bool(app.flow.outcomes), "the outcome")
        assert app.flow.outcomes[0].stage == "cancelled" and repair.applied == [] and not app.flow.repair_busy
        assert notification_texts(app) == ["Fake repair\nNothing was changed."]


async def test_an_uncaught_worker_failure_ends_the_busy_state() -> None:
    """The follow-up itself raises: the worker ends in ERROR, the flow is free again (the app says why)."""
    app = Host(FakeDir())
    async with app.run_test() as pilot:
        await pilot.pause()

        def broken(outcome: Outcome[Any]) -> None:
            raise RuntimeError("the follow-up broke")

        assert app.flow.start_repair("recover_run", lambda sd: FakeRepair(refusal="no"),
                                     ask(), done=broken)
        await wait_for(pilot, lambda: not app.flow.repair_busy and app.flow.last_error == "Unexpected RuntimeError: "
                       "the follow-up broke", "the busy state to end")


def test_refusal_text_follows_the_screens_rule() -> None:
    assert refusal_text(LeaseBusy("the lease is held by pid 7"), ("LeaseBusy",)) == (
        "Refused: the lease is held by pid 7", True)
    assert refusal_text(RepairRefused("Refused: changed since the preview"), ("RepairRefused",)) == (
        "Refused: changed since the preview", True)
    assert refusal_text(LeaseBusy("held"), NO_REFUSALS) == ("held", False)
    assert refusal_text(RepairRefused("Refused: moved"), NO_REFUSALS) == ("Refused: moved", True)
    assert refusal_text(ValueError("bad"), EVERY_ERROR) == ("Refused: Unexpected ValueError: bad", True)


def test_the_request_of_a_preview() -> None:
    preview = FakeRepair().preview()
    request = ConfirmRequest.of_preview(preview, noun="item", opened_by="X", lines=("first",))
    assert request.title == "Fake repair" and request.affected == 1 and request.noun == "item"
    assert request.preview.splitlines()[0] == "first" and request.preview.endswith("\n".join(preview.lines()))
    assert ask(confirm_label="Retry")(preview).confirm_label == "Retry"
