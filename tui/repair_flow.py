"""The one path every write of a screen takes: refuse in a read mode → preview in a worker → confirm → apply in
a worker → one line that reports the result or the refusal → the screen's own follow-up (it reads its list
again).

:class:`RepairFlow` is mixed into each screen that writes (Runs, Deliveries, Health, Forks, Knowledge, and
Sessions for :mod:`tui.screens.session_manage`). The screen names its worker group and its words once
(:attr:`RepairFlow.REPAIR_GROUP`, :attr:`RepairFlow.REPAIR_WORDS`); then one call starts a write::

    self.start_repair("recover_run", lambda sd: make_repair(sd, "recover-run", run_id=run_id),
                      ask(noun="row", opened_by=key), done=self._repaired)

- ``make(sd)`` (the Repair factory) and ``repair.preview()`` run in a thread worker; an exception there is one
  line (``words.preview_failed``); a preview with a ``refusal`` is one line ``Refused: …`` (``words.refused``).
- ``confirm(preview)`` builds the :class:`~tui.widgets.confirm.ConfirmDialog`'s request, or returns ``None``
  when the screen has said itself why there is nothing to apply (the flow then ends, nothing written).
- Cancel: ``Nothing was changed.`` (unless ``words.say_cancelled`` is off). Confirm: ``repair.apply(preview)``
  in a thread worker, then the result's message (``words.done``), or the refusal / failure in one line.
- ``done(outcome)``, when given, runs last on the app's thread, for every :class:`Outcome`.

While a write is being prepared or applied :attr:`RepairFlow.repair_busy` is true; the screen says
:meth:`RepairFlow.refuse_when_busy`'s line when another is asked for. :attr:`last_result` and :attr:`last_error`
keep what the last write ended with. A flow worker that fails outside its own error path (the app notifies
it, :class:`tui.lifecycle.ReportsWorkerFailures`) ends the busy state here.

Nothing here runs SQL or reads a widget from a worker: the workers call the repair and hand the answer back to
the app's thread (``call_from_thread``), where every widget and every notification is touched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar, cast

from tui import actions
from tui.context import store
from tui.formatting import describe_error, one_line
from tui.lifecycle import ReportsWorkerFailures
from tui.safe import notify

if TYPE_CHECKING:
    from textual.screen import Screen

    from store.mothx.repair_kit import RepairPreview, RepairResult
    from store.mothx.sessiondir import SessionDir
    from tui.messages import WorkerFailed
    from tui.widgets.confirm import ConfirmRequest

P = TypeVar("P", bound="RepairPreview")
R = TypeVar("R", bound="RepairResult")
P_co = TypeVar("P_co", bound="RepairPreview", covariant=True)
R_co = TypeVar("R_co", bound="RepairResult", covariant=True)

FENCE_REFUSALS = ("RepairRefused", "LeaseBusy", "LeaseLost", "ReadOnlyStore")
"""The exceptions of :mod:`store.errors` an ``apply()`` refuses with when the facts changed since the preview
(the fence, the fingerprint, a lease, a read mode): reported as ``Refused: …`` under ``words.refused``."""

EVERY_ERROR = ("*",)
"""As the refusals: every exception of ``apply()`` is reported as a refusal."""

NO_REFUSALS: tuple[str, ...] = ()
"""No exception is a refusal by its type: a one-line text that begins with ``Refused`` still counts as one."""


class Previewing(Protocol[P_co, R_co]):
    """What the flow needs of a repair (:class:`store.mothx.repair_kit.Repair`, with its own result types)."""

    def preview(self) -> P_co: ...

    def apply(self, expected: RepairPreview | None = None) -> R_co: ...


@dataclass(frozen=True)
class FlowWords:
    """The titles, timeouts and worker names of one screen's reports (each report is one notification)."""

    done: str = "Repaired"
    refused: str = "Not repaired"
    failed: str = "Repair failed"
    preview_failed: str = ""  # a preview that could not be made; "" is ``failed``
    busy: str = "A repair is already being prepared or applied."
    cannot_confirm: str = "Cannot confirm"  # the user mapped the action onto the confirm key
    done_timeout: float | None = 8
    refused_timeout: float | None = 12
    failed_timeout: float | None = 12
    confirm_timeout: float | None = None
    say_cancelled: bool = True  # "Nothing was changed." when the dialog is cancelled
    preview_work: str = "Preview a repair"  # worker descriptions: the app names them when a worker fails
    apply_work: str = "Apply a repair"


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """How a write ended. ``stage``: ``preview`` (refused or failed before the dialog), ``cancelled``, ``apply``;
    ``result`` when applied, else ``error`` (one line) and whether it was a refusal."""

    stage: Literal["preview", "cancelled", "apply"]
    result: R | None = None
    error: str = ""
    refused: bool = False


@dataclass(frozen=True)
class _Job(Generic[P, R]):
    action: str
    make: Callable[[SessionDir], Previewing[P, R]]
    confirm: Callable[[P], ConfirmRequest | None]
    done: Callable[[Outcome[R]], None] | None
    refused_title: str


def key_for(node: Screen[Any], action_id: str) -> str:
    """The key that opens ``action_id`` now (after the user's keymap), so the dialog refuses it as confirm."""
    for key, active in node.active_bindings.items():
        if active.binding.id == action_id:
            return key
    return actions.get(action_id).key.split(",")[0]


def ask(*, noun: str = "row", confirm_label: str = "Apply", opened_by: str = "", phrase: str = ""
        ) -> Callable[[RepairPreview], ConfirmRequest]:
    """The usual ``confirm`` of :meth:`RepairFlow.start_repair`: the preview's title, lines and changes."""

    def request(preview: RepairPreview) -> ConfirmRequest:
        from tui.widgets.confirm import ConfirmRequest

        return ConfirmRequest.of_preview(preview, noun=noun, confirm_label=confirm_label, opened_by=opened_by,
                                         phrase=phrase)

    return request


def refusal_text(exc: BaseException, refusals: Collection[str]) -> tuple[str, bool]:
    """One line for an exception of ``apply()``, and whether it is a refusal (see :data:`FENCE_REFUSALS`)."""
    from store import errors

    text = describe_error(exc)
    kinds = tuple(getattr(errors, name) for name in refusals if name != "*")
    if "*" in refusals or isinstance(exc, kinds):
        return (text if text.startswith("Refused") else f"Refused: {text}"), True
    return text, text.startswith("Refused")


class RepairFlow(ReportsWorkerFailures):
    """Mixed into a screen that writes (before ``Screen`` in its bases); the screen has ``sd``. Its workers'
    failures are reported like every other worker's (:class:`~tui.lifecycle.ReportsWorkerFailures`)."""

    REPAIR_GROUP: ClassVar[str] = "repair"
    REPAIR_WORDS: ClassVar[FlowWords] = FlowWords()
    REPAIR_REFUSALS: ClassVar[tuple[str, ...]] = FENCE_REFUSALS

    sd: SessionDir | None
    repair_busy: bool = False
    last_result: RepairResult | None = None
    last_error: str = ""

    @property
    def _flow_node(self) -> Screen[Any]:
        return cast("Screen[Any]", self)

    def _flow_store(self) -> SessionDir | None:
        return self.sd or store(self._flow_node)

    def check_write_action(self, action: str, writes: Collection[str] | None = None) -> bool | None:
        """For ``check_action``: a write (of ``writes``, else of the registry) is dimmed and blocked (``None``)
        where the store takes no writes; every other action is allowed."""
        if writes is not None and action not in writes:
            return True
        sd = self._flow_store()
        return actions.check_write(action, sd is not None and sd.writable)

    def refuse_when_busy(self) -> bool:
        """True (and the one line that says so) while a write is being prepared or applied."""
        if self.repair_busy:
            notify(self._flow_node, self.REPAIR_WORDS.busy, severity="warning")
        return self.repair_busy

    def start_repair(self, action: str, make: Callable[[SessionDir], Previewing[P, R]],
                     confirm: Callable[[P], ConfirmRequest | None], *,
                     done: Callable[[Outcome[R]], None] | None = None, refused_title: str = "") -> bool:
        """Start the write of ``action`` (the registry's action name): False, and one line, when it cannot start
        (no store, a read mode, a write under way). ``make(sd)`` builds the repair in the worker, on the store
        checked here; ``refused_title`` names the target in a refusal's title."""
        node = self._flow_node
        sd = self._flow_store()
        if sd is None:
            notify(node, "No session directory is open.", severity="warning")
            return False
        if not sd.writable:  # the key is dimmed there already; this is the same line, for any other caller
            notify(node, actions.write_refusal(action, sd.mode.value, sd.read_only_reason), severity="warning",
                   timeout=4)
            return False
        if self.refuse_when_busy():
            return False
        self.repair_busy = True
        job = _Job(action, make, confirm, done, refused_title)
        app = node.app

        def preview() -> None:
            try:
                repair = job.make(sd)
                planned = repair.preview()
            except Exception as exc:  # noqa: BLE001 - one sentence, never a traceback
                app.call_from_thread(self._flow_end, job, Outcome("preview", error=describe_error(exc)))
                return
            app.call_from_thread(self._flow_previewed, job, repair, planned)

        node.run_worker(preview, thread=True, exclusive=True, group=self.REPAIR_GROUP, exit_on_error=False,
                        description=self.REPAIR_WORDS.preview_work)
        return True

    def _flow_previewed(self, job: _Job[P, R], repair: Previewing[P, R], preview: P) -> None:
        node = self._flow_node
        words = self.REPAIR_WORDS
        if not node.is_attached:
            return  # the screen was closed meanwhile
        if preview.refusal:
            self._flow_end(job, Outcome("preview", error=f"Refused: {one_line(preview.refusal)}", refused=True))
            return
        request = job.confirm(preview)
        if request is None:  # the screen said why there is nothing to apply
            self.repair_busy = False
            return
        from tui.widgets.confirm import ConfirmDialog

        try:
            dialog = ConfirmDialog(request)
        except ValueError as exc:  # the user mapped the action onto the confirm key
            self.repair_busy = False
            notify(node, str(exc), title=words.cannot_confirm, severity="error", timeout=words.confirm_timeout)
            return

        def decided(confirmed: bool | None) -> None:
            if not confirmed:
                self._flow_end(job, Outcome("cancelled"))
                if words.say_cancelled:
                    notify(node, "Nothing was changed.", title=preview.title, timeout=3)
                return
            self._flow_apply(job, repair, preview)

        node.app.push_screen(dialog, decided)

    def _flow_apply(self, job: _Job[P, R], repair: Previewing[P, R], preview: P) -> None:
        node = self._flow_node
        app = node.app
        refusals = self.REPAIR_REFUSALS

        def apply() -> None:
            try:
                result = repair.apply(preview)
            except Exception as exc:  # noqa: BLE001 - a refusal or a failure: one sentence
                text, refused = refusal_text(exc, refusals)
                app.call_from_thread(self._flow_end, job, Outcome("apply", error=text, refused=refused))
                return
            app.call_from_thread(self._flow_end, job, Outcome("apply", result=result))

        node.run_worker(apply, thread=True, exclusive=True, group=self.REPAIR_GROUP, exit_on_error=False,
                        description=self.REPAIR_WORDS.apply_work)

    def _flow_end(self, job: _Job[P, R], outcome: Outcome[R]) -> None:
        """The one report of a write, then the screen's follow-up."""
        node = self._flow_node
        words = self.REPAIR_WORDS
        self.repair_busy = False
        if not node.is_attached:
            return
        if outcome.result is not None:
            self.last_result = outcome.result
            self.last_error = ""
            notify(node, outcome.result.message, title=words.done, timeout=words.done_timeout)
        elif outcome.error:
            self.last_result = None
            self.last_error = outcome.error
            if outcome.refused:
                title, timeout = job.refused_title or words.refused, words.refused_timeout
            else:
                title = (words.preview_failed if outcome.stage == "preview" else "") or words.failed
                timeout = words.failed_timeout
            notify(node, outcome.error, title=title, severity="error", timeout=timeout)
        if job.done is not None:
            job.done(outcome)

    def on_worker_failed(self, message: WorkerFailed) -> None:
        """A flow worker failed outside its own error path (the app notifies it): the next write may start."""
        if message.group == self.REPAIR_GROUP:
            self.repair_busy = False
            self.last_result = None
            self.last_error = message.reason


__all__ = ["EVERY_ERROR", "FENCE_REFUSALS", "NO_REFUSALS", "FlowWords", "Outcome", "Previewing", "RepairFlow",
           "ask", "key_for", "refusal_text"]
