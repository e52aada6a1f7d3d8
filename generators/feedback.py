"""The feedback a model gets after each turn of ``refine``: what it needs to improve, bounded.

:func:`feedback_message` turns a :class:`~protos.records.Verdict` into one user message:

* the status and the agent's message;
* ``COMPILE_ERROR`` / ``RUNTIME_ERROR`` / ``TIMEOUT`` / ``REJECTED``: the message and the tail
  of the log (the end of a traceback is where the cause is);
* ``WRONG_ANSWER``: the first failing *public* cases with their mismatch summaries; hidden cases
  are never described beyond "a hidden case failed" and the kind of mismatch (values, shape,
  dtype, unwritten output, modified input ...) — their names, shapes and values stay secret (the
  agent's message, which quotes the first failing case, is left out for the same reason);
* ``CHEAT_DETECTED`` (and any verdict with findings): each finding's evidence verbatim — the
  agent writes it for a model to read;
* ``PASSED``: per-case speedup and % of speed-of-light, and the request to go faster (or, on a
  platform whose timings mean nothing, only that it passed);
* always last: the instruction to reply with one complete ``python`` code block.

:func:`extraction_feedback` says why no candidate could be taken from a reply (no code block, a
reply cut off by the token limit, code split over several blocks).

Every message is at most :data:`MAX_FEEDBACK_CHARS` characters: each part has its own cap, and
the body is cut (keeping the head and the final instruction) if the parts together exceed it.
"""

from __future__ import annotations

from generators.extract import Extraction, ExtractStatus
from generators.llm import Message, Role
from protos.records import CaseResult, Status, Verdict

MAX_FEEDBACK_CHARS = 6000
LOG_TAIL_CHARS = 2000
MESSAGE_CHARS = 1200
MISMATCH_CHARS = 600
EVIDENCE_CHARS = 800
MAX_CASES_SHOWN = 3
MAX_FINDINGS_SHOWN = 4
MAX_TIMINGS_SHOWN = 8

REPLY_INSTRUCTION = ("Reply with the complete corrected file in exactly one ```python code block: "
                     "all imports, every @triton.jit kernel and every entry point; no other code "
                     "blocks.")
FASTER_INSTRUCTION = ("It is correct. Make it faster while keeping it correct: reply with the "
                      "complete improved file in exactly one ```python code block: all imports, every "
                      "@triton.jit kernel and every entry point; no other code blocks.")

_WHAT: dict[Status, str] = {
    Status.REJECTED: "the static policy refused the source before it ran",
    Status.COMPILE_ERROR: "the file did not import or a kernel did not compile",
    Status.RUNTIME_ERROR: "a call raised an exception or crashed",
    Status.TIMEOUT: "a stage ran past its deadline",
    Status.WRONG_ANSWER: "outputs differ from the reference",
    Status.CHEAT_DETECTED: "the anti-cheat checks found evidence of gaming the benchmark",
    Status.PASSED: "every case is right and no check objected",
    Status.INFRA_ERROR: "the evaluation system failed (not your code's fault)",
    Status.TOOLCHAIN_ERROR: ("the platform's Triton compiler or runtime crashed or hung on this "
                             "code; write the kernel another way (other tl operations or tiling)"),
}


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 15].rstrip() + " ...[truncated]"


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "[...]" + text[-(limit - 5):]


def mismatch_kind(case: CaseResult) -> str:
    """The kind of a case's failure in a few words, revealing nothing about the case itself."""
    m = case.mismatch
    if "wrong number of outputs" in m:
        return "wrong number of outputs"
    if "expected a torch.Tensor" in m:
        return "an output is not a torch.Tensor"
    if "wrong dtype" in m:
        return "wrong output dtype"
    if "wrong shape" in m:
        return "wrong output shape"
    if "was modified" in m:
        return "an input that must stay intact was modified"
    if "NaN where the reference is finite" in m:
        return "output not fully written (NaN where a finite value is expected)"
    if "elements differ" in m:
        return "values differ from the reference beyond tolerance"
    return "output mismatch"


def _public_message(verdict: Verdict) -> str:
    """The verdict's message without hidden cases' details.

    For ``WRONG_ANSWER`` with case results the message only repeats the first failing case (which
    may be hidden), so it is left out: the cases section says it all. Elsewhere a hidden case's
    mismatch text quoted in the message is cut and replaced by its kind.
    """
    msg = verdict.message
    if verdict.status is Status.WRONG_ANSWER and any(not c.passed for c in verdict.cases):
        return ""
    for c in verdict.cases:
        probe = c.mismatch.strip()[:60]
        if c.hidden and probe and probe in msg:
            msg = msg[: msg.index(probe)].rstrip() + f" [a hidden case: {mismatch_kind(c)}]"
    return msg


def _cases_section(verdict: Verdict) -> list[str]:
    failed = [c for c in verdict.cases if not c.passed]
    if not failed:
        return []
    public = [c for c in failed if not c.hidden]
    hidden = [c for c in failed if c.hidden]
    lines = [f"{len(failed)} of {len(verdict.cases)} correctness cases failed "
             f"({len(public)} public, {len(hidden)} hidden)."]
    for c in public[:MAX_CASES_SHOWN]:
        lines.append(f"- case {c.name}: {_clip(c.mismatch, MISMATCH_CHARS) or 'wrong'}")
    if len(public) > MAX_CASES_SHOWN:
        lines.append(f"- ... and {len(public) - MAX_CASES_SHOWN} more public cases failed")
    kinds: dict[str, int] = {}
    for c in hidden:
        k = mismatch_kind(c)
        kinds[k] = kinds.get(k, 0) + 1
    for k, n in kinds.items():
        lines.append(f"- a hidden case failed: {k}" if n == 1 else f"- {n} hidden cases failed: {k}")
    return lines


def _findings_section(verdict: Verdict) -> list[str]:
    if not verdict.findings:
        return []
    lines = ["Anti-cheat findings:"]
    for f in verdict.findings[:MAX_FINDINGS_SHOWN]:
        lines.append(f"- [{f.layer}/{f.rule}] {_clip(f.evidence, EVIDENCE_CHARS)}")
    if len(verdict.findings) > MAX_FINDINGS_SHOWN:
        lines.append(f"- ... and {len(verdict.findings) - MAX_FINDINGS_SHOWN} more findings")
    return lines


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def _timings_section(verdict: Verdict) -> list[str]:
    meaningful = [t for t in verdict.timings if t.meaningful]
    if not meaningful:
        return ["Timings on this platform are not meaningful (correctness only)."]
    lines = [f"Performance (geometric mean speedup over the baseline: "
             f"{_fmt(verdict.speedup, '.2f', 'x')}; % of speed-of-light: "
             f"{_fmt(verdict.sol_percent, '.1f', '%')}):"]
    for t in meaningful[:MAX_TIMINGS_SHOWN]:
        bound = " (launch-bound)" if t.launch_bound else ""
        lines.append(f"- case {t.name}: {_fmt(t.median_us, '.2f', ' us')} vs baseline "
                     f"{_fmt(t.baseline_median_us, '.2f', ' us')}: speedup {_fmt(t.speedup, '.2f', 'x')}, "
                     f"{_fmt(t.sol_percent, '.1f', '%')} of speed-of-light{bound}")
    if len(meaningful) > MAX_TIMINGS_SHOWN:
        lines.append(f"- ... and {len(meaningful) - MAX_TIMINGS_SHOWN} more timed cases")
    return lines


def _bounded(parts: list[str], instruction: str) -> Message:
    body = "\n\n".join(p for p in parts if p)
    room = MAX_FEEDBACK_CHARS - len(instruction) - 2
    if len(body) > room:
        body = body[: room - 15].rstrip() + " ...[truncated]"
    return Message(Role.USER, f"{body}\n\n{instruction}")


def feedback_message(verdict: Verdict) -> Message:
    """What a model needs to improve its last candidate, as one bounded user message."""
    return verdict_message(verdict, REPLY_INSTRUCTION, FASTER_INSTRUCTION)


def verdict_message(verdict: Verdict, fix: str, faster: str) -> Message:
    """:func:`feedback_message` with its own closing instruction: ``faster`` after a PASSED
    verdict, ``fix`` after any other (the agent's ``verify`` tool asks for tool calls, not a
    code block)."""
    status = verdict.status
    head = f"Your candidate for {verdict.operator_id} was evaluated: {status.value} ({_WHAT[status]})."
    parts = [head]
    message = _public_message(verdict)
    if message and status is not Status.PASSED:
        parts.append("Message: " + _clip(message, MESSAGE_CHARS))
    if status is Status.WRONG_ANSWER or (status is not Status.PASSED and
                                         any(not c.passed for c in verdict.cases)):
        parts.append("\n".join(_cases_section(verdict)))
    parts.append("\n".join(_findings_section(verdict)))
    if status in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.REJECTED) \
            and verdict.log.strip():
        parts.append("End of the log:\n" + _tail(verdict.log, LOG_TAIL_CHARS))
    if status is Status.PASSED:
        parts.append("\n".join(_timings_section(verdict)))
        return _bounded(parts, faster)
    return _bounded(parts, fix)


def extraction_feedback(extraction: Extraction) -> Message:
    """Why no candidate could be taken from the last reply, and what to send instead."""
    if extraction.status is ExtractStatus.TRUNCATED:
        why = ("Your reply was cut off (it reached the token limit) before the code was complete, "
               "so nothing was evaluated. Keep explanations short and send the code first.")
    elif extraction.status is ExtractStatus.SPLIT:
        why = ("Your code was split over several code blocks and none of them defines every entry "
               "point, so nothing was evaluated; blocks are never stitched together.")
    elif extraction.status is ExtractStatus.NO_CODE:
        why = "No python code block found in your reply, so nothing was evaluated."
    else:
        why = "Your reply could not be used as a candidate."
    if extraction.missing:
        why += " Missing entry points: " + ", ".join(extraction.missing) + "."
    return _bounded([why], REPLY_INSTRUCTION)
