"""The runners' lifeline to their driver (coordinator/engine/lifeline.py): the runner's end learns
at once when the driver's end closes (a dead process's kernel closes its sockets), after
``lost_after_s`` when the driver falls silent (a lost host), and never while it beats."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from coordinator.engine.lifeline import HEARTBEAT_S, Lifeline, watch


class Lost:
    def __init__(self) -> None:
        self.why = ""
        self.at = 0.0
        self.event = threading.Event()

    def __call__(self, why: str) -> None:
        self.why, self.at = why, time.monotonic()
        self.event.set()


def test_a_closed_lifeline_is_noticed_at_once_and_a_beating_one_never() -> None:
    line = Lifeline("127.0.0.1")
    lost = Lost()
    watch(line.address, lost, lost_after_s=1.0)
    # it beats every HEARTBEAT_S: three silences' worth passes without a loss
    assert not lost.event.wait(3.0), lost.why
    closed = time.monotonic()
    line.close()
    assert lost.event.wait(2.0)
    assert lost.at - closed < 0.5 and "closed" in lost.why


def test_a_silent_driver_is_taken_as_gone_after_lost_after_s() -> None:
    """A peer that accepts and never beats (a host that vanished keeps its sockets open)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        lost = Lost()
        started = time.monotonic()
        watch(f"127.0.0.1:{server.getsockname()[1]}", lost, lost_after_s=0.6)
        conn, _ = server.accept()
        with conn:
            assert lost.event.wait(3.0)
    assert 0.5 < lost.at - started < 2.0 and "no heartbeat" in lost.why
    assert HEARTBEAT_S < 0.6  # a live driver beats well within that


def test_no_driver_to_answer_to_is_an_error_at_start() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connecting is refused
        with pytest.raises(OSError):
            watch(f"127.0.0.1:{port}", Lost())
