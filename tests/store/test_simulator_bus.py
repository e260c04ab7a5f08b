"""The runtime simulator announces on the lease bus what a runtime would: acquired, state_changed, released."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from store.mothx.bus import BusHint, BusListener
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from store.mothx.simulator import create_session

ROOT = Path(__file__).resolve().parents[2]


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_simulator_announces_its_lease_and_run_transitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_udp_port()
    monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", str(port))
    with open_session_dir(tmp_path, OpenMode.READ_WRITE, create=True) as sd:
        session = create_session(sd)
    hints: list[BusHint] = []
    got = threading.Event()

    def on_hint(hint: BusHint) -> None:
        hints.append(hint)
        if hint.type == "released":
            got.set()

    listener = BusListener(on_hint, port=port)
    assert listener.start(), listener.status
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "store.mothx.simulator", "--dir", str(tmp_path), "--session", session,
             "--steps", "6", "--append-interval", "0.01"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert got.wait(5), f"no 'released' on the bus; saw {[h.type for h in hints]}"
        time.sleep(0.1)
    finally:
        listener.close()
    types = [h.type for h in hints if h.session_id == session]
    assert "acquired" in types
    assert "state_changed" in types
    last_released = max(i for i, t in enumerate(types) if t == "released")
    assert types.index("acquired") < types.index("state_changed") < last_released
