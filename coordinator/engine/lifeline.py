"""Nothing calls a model after its coordinator is gone: a lifeline from each trajectory runner to
the driver.

Ray kills a dead driver's actors only once it has noticed (seconds later: 21 replies were billed
after a ``kill -9`` of the coordinator in issue #21), and a process group kill does not reach
them (Ray's workers are not in the coordinator's group). So the driver holds a listening TCP
socket (:class:`Lifeline`, on the address Ray knows its node by) and every runner keeps one
connection to it from a thread of its own (:func:`watch`), which reads a heartbeat byte the
driver sends every :data:`HEARTBEAT_S`. When the driver's process dies, its kernel closes the
socket and the runner reads end-of-file at once (milliseconds, whatever the event loops are
doing); when its host is lost and nothing arrives for :data:`LOST_AFTER_S`, the runner takes it
as gone too. Either way the runner's ``on_lost`` ends the runner's process before it sends
another request (:class:`~coordinator.engine.runner.TrajectoryRunner`): its calls on the wire
stay as intents without replies, unconfirmed calls the reports show.

The connection carries nothing but heartbeats; a stranger connecting to the port learns nothing
and can make nothing happen.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

HEARTBEAT_S = 0.25   # the driver writes a byte this often
LOST_AFTER_S = 5.0   # silence that means the driver's host is gone (a dead process: EOF at once)
CONNECT_S = 10.0


class Lifeline:
    """The driver's end: accepts the runners' connections and beats on each of them from a
    daemon thread until :meth:`close` (or the process's death, which closes them all)."""

    def __init__(self, host: str) -> None:
        self._server = socket.create_server((host, 0))
        self._server.setblocking(False)
        port = self._server.getsockname()[1]
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kgb-lifeline", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        next_beat = time.monotonic()
        while not self._stop.is_set():
            ready, _, _ = select.select([self._server], [], [], HEARTBEAT_S / 2)
            if ready:
                with contextlib.suppress(BlockingIOError, OSError):
                    conn, _ = self._server.accept()
                    conn.setblocking(True)
                    conn.settimeout(1.0)
                    self._conns.append(conn)
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + HEARTBEAT_S
                self._beat()

    def _beat(self) -> None:
        for conn in list(self._conns):
            try:
                conn.sendall(b".")
            except OSError:  # that runner is gone (or its buffer is full: it is not reading)
                self._conns.remove(conn)
                conn.close()

    def close(self) -> None:
        """Stop beating and close every connection: the runners still attached end."""
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._conns:
            conn.close()
        self._server.close()


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def watch(address: str, on_lost: Callable[[str], None],
          lost_after_s: float = LOST_AFTER_S) -> threading.Thread:
    """The runner's end: connect to the driver's :class:`Lifeline` at ``address`` and call
    ``on_lost(why)`` (from the watching thread) when it closes, errs or falls silent for
    ``lost_after_s``. Raises :class:`OSError` when the first connection fails (the runner
    cannot start without a driver to answer to)."""
    sock = socket.create_connection(_split(address), timeout=CONNECT_S)
    sock.settimeout(lost_after_s)

    def read() -> None:
        why = "the coordinator closed its lifeline (it has exited)"
        try:
            while sock.recv(64):
                pass
        except TimeoutError:
            why = f"no heartbeat from the coordinator for {lost_after_s:.0f} s (its host is lost)"
        except OSError as exc:
            why = f"the coordinator's lifeline broke ({exc})"
        finally:
            sock.close()
        on_lost(why)

    thread = threading.Thread(target=read, name="kgb-lifeline-watch", daemon=True)
    thread.start()
    return thread
