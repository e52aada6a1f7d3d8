"""Telling a fault of the platform's toolchain from the candidate's (``TOOLCHAIN_ERROR``).

A platform names where its compiler runs (:class:`ToolchainFrames`: source files of the
compiler's stages). A failure whose innermost Python frame is in one of them, on code the
frontend accepted, is the toolchain's: an exception raised there (MLIR's ``PassManager::run
failed`` out of a backend stage), a crash (the worker killed by a signal while a stage ran: the
stack ``faulthandler`` writes to the worker's log), or a hang (the stack the worker dumps on
``SIGUSR1`` when its stage deadline passes). Each becomes a :class:`~protos.records.ToolchainFault`
whose signature (stage, hash of the normalised message) groups repeats across candidates.
Imports nothing heavy: the agent reads stacks from logs, the worker classifies exceptions.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from dataclasses import dataclass

from protos.records import ToolchainFault

MESSAGE_LIMIT = 500
DUMP_SIGNAL_NAME = "SIGUSR1"  # the worker dumps every thread's stack on it (faulthandler)


@dataclass(frozen=True)
class ToolchainFrames:
    """Where a platform's compiler runs: path suffixes of its stage modules (``/`` separated),
    and exception type names that stay the candidate's fault even when raised there (a kernel
    that asks for more shared memory than the chip has is the candidate's)."""

    files: tuple[str, ...] = ()
    candidate_errors: tuple[str, ...] = ()

    def holds(self, filename: str) -> bool:
        path = filename.replace("\\", "/")
        return any(path.endswith(f) or f"{f}/" in path for f in self.files)


NO_TOOLCHAIN = ToolchainFrames()


def normalise(message: str) -> str:
    """The message without what changes from one occurrence to the next: addresses, numbers,
    candidate module names and temporary paths."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x?", message)
    text = re.sub(r"kgb_candidate_[0-9a-f]+", "kgb_candidate", text)
    text = re.sub(r"/tmp/\S+", "/tmp/?", text)
    text = re.sub(r"\d+", "N", text)
    return " ".join(text.split())


def fault(kind: str, pass_name: str, message: str) -> ToolchainFault:
    digest = hashlib.sha256(normalise(message).encode("utf-8", "replace")).hexdigest()[:16]
    return ToolchainFault(kind=kind, pass_name=pass_name, message_hash=digest,
                          message=message.strip()[:MESSAGE_LIMIT])


def stage_of_exception(exc: BaseException, frames: ToolchainFrames) -> str | None:
    """The toolchain stage (function name) in which ``exc`` or an exception it chains from was
    raised, or None when none was raised inside the toolchain (or one is a candidate error)."""
    if not frames.files:
        return None
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__name__ in frames.candidate_errors:
            return None
        tb = traceback.extract_tb(e.__traceback__)
        if tb and frames.holds(tb[-1].filename):
            return tb[-1].name
        e = e.__cause__ or e.__context__
    return None


_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+ .*most recent call first")
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line \d+ in (?P<name>\S+)')
_FATAL = re.compile(r"^Fatal Python error: (?P<what>.+)$")


def innermost_frames(dump: str) -> list[tuple[str, str]]:
    """Each thread's innermost frame ``(file, function)`` in a ``faulthandler`` dump (most
    recent call first: the first frame after each thread's heading)."""
    out: list[tuple[str, str]] = []
    expecting = False
    for line in dump.splitlines():
        if _THREAD.match(line.strip()):
            expecting = True
            continue
        m = _FRAME.match(line)
        if m and expecting:
            out.append((m["file"], m["name"]))
        expecting = False if m or line.strip() else expecting
    return out


def _dump_start(lines: list[str]) -> int | None:
    """Where the stack dump of a log begins: its first ``Fatal Python error`` line (a crash; a
    process that cannot die of its first signal, PID 1 of a namespace ignoring SIGABRT, dumps
    again on the next), or the first of the run of thread stacks that ends the log (a dump
    asked for by signal)."""
    fatal = [i for i, line in enumerate(lines) if _FATAL.match(line.strip())]
    if fatal:
        return fatal[0]
    start = None
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if _THREAD.match(line.strip()):
            start = i
        elif not (_FRAME.match(line) or not line.strip() or line.strip() in _DUMP_FILLER
                  or line.startswith("Extension modules:")):
            break
    return start


_DUMP_FILLER = ("<no Python frame>", "...", "<truncated rest of calls>")


def fault_from_dump(log_tail: str, frames: ToolchainFrames, kind: str) -> ToolchainFault | None:
    """A crash or hang of the toolchain, from the stack dump at the end of a worker's log: a
    thread whose innermost frame is in the toolchain. The message is the fatal error line and
    the last error line printed before the dump (``LLVM ERROR: …``); the stage is that frame's
    function."""
    if not frames.files:
        return None
    lines = log_tail.splitlines()
    start = _dump_start(lines)
    if start is None:
        return None
    inside = [(f, n) for f, n in innermost_frames("\n".join(lines[start:])) if frames.holds(f)]
    if not inside:
        return None
    before = [x.strip() for x in lines[max(0, start - 20):start]
              if re.search(r"error|assert", x, re.IGNORECASE)]
    fatal = _FATAL.match(lines[start].strip())
    message = " | ".join(([before[-1]] if before else []) + [fatal["what"] if fatal else kind])
    return fault(kind, inside[-1][1], message)
