"""Code extraction from model replies: fences, several blocks, none, truncation, odd formatting."""

from __future__ import annotations

import dataclasses
import random

import pytest

from generators.extract import Extraction, ExtractStatus, extract_code

CODE = "import torch\nimport triton\n\n\ndef add(x, y):\n    return _launch(x, y)\n"
DRAFT = "import torch\n\n\ndef add(x, y):\n    return None  # draft\n"
NAMES = ("add",)


def fenced(code: str, tag: str = "python", fence: str = "```") -> str:
    return f"{fence}{tag}\n{code}{fence}\n"


def test_status_set_is_closed_and_bare() -> None:
    assert {s.value for s in ExtractStatus} == {"OK", "NO_CODE", "TRUNCATED", "SPLIT"}
    assert all(s.value == s.name for s in ExtractStatus)


def test_result_is_frozen() -> None:
    r = extract_code(fenced(CODE), NAMES)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = ExtractStatus.NO_CODE  # type: ignore[misc]


def test_one_block_with_prose_around() -> None:
    reply = f"Here is my kernel.\n\n{fenced(CODE)}\nIt uses one launch per call."
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.OK and r.ok
    assert r.source == CODE and r.candidate == CODE
    assert (r.blocks, r.chosen, r.missing) == (1, 0, ())


@pytest.mark.parametrize("tag", ["python", "py", "Python", "python3", "py3", "", "python title=k.py"])
def test_fence_info_strings(tag: str) -> None:
    r = extract_code(f"Sure:\n{fenced(CODE, tag)}", NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE


def test_tilde_and_long_fences() -> None:
    assert extract_code(fenced(CODE, fence="~~~"), NAMES).source == CODE
    # A four-backtick fence may contain a three-backtick line (e.g. in a docstring).
    inner = 'import torch\n\n\ndef add(x, y):\n    """Example:\n    ```\n    add(a, b)\n    ```\n    """\n'
    r = extract_code(fenced(inner, fence="````"), NAMES)
    assert r.status is ExtractStatus.OK and r.source == inner


def test_indented_fence_is_dedented() -> None:
    reply = "1. The file:\n\n   ```python\n" + "".join(
        f"   {line}\n" if line else "\n" for line in CODE.rstrip("\n").split("\n")) + "   ```\n"
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE


def test_windows_newlines() -> None:
    reply = f"Answer:\r\n{fenced(CODE)}".replace("\n", "\r\n")
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE and "\r" not in r.source


def test_bom_and_old_mac_newlines() -> None:
    r = extract_code("\ufeff" + fenced(CODE).replace("\n", "\r"), NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE


def test_reply_that_is_just_code() -> None:
    r = extract_code(CODE, NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE
    assert (r.blocks, r.chosen) == (0, None)


def test_unfenced_code_after_prose() -> None:
    r = extract_code(f"Here is the implementation:\n\n{CODE}", NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE and "prose" in r.note


@pytest.mark.parametrize("reply", ["", "   \n\n", "I cannot help with that.", "Sorry",
                                   "Use a Triton kernel with a mask: x = tl.load(p)."])
def test_no_code(reply: str) -> None:
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.NO_CODE and not r.ok and r.candidate is None and r.source == ""


def test_only_other_languages_is_no_code() -> None:
    r = extract_code(fenced("pip install triton\n", "bash") + fenced("__global__ void k() {}\n", "cuda"),
                     NAMES)
    assert r.status is ExtractStatus.NO_CODE and "bash" in r.note and "cuda" in r.note


def test_several_blocks_last_defining_block_wins() -> None:
    reply = f"Draft:\n{fenced(DRAFT)}\nBetter:\n{fenced(CODE)}"
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE and (r.blocks, r.chosen) == (2, 1)


def test_defining_block_beats_later_usage_block() -> None:
    usage = "x = torch.randn(8)\nprint(add(x, x))\n"
    reply = f"{fenced(CODE)}\nUsage:\n{fenced(usage)}\n{fenced('pip install triton', 'bash')}"
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE and r.chosen == 0


def test_without_entry_points_the_last_python_block_wins() -> None:
    usage = "print(add(1, 2))\n"
    r = extract_code(f"{fenced(CODE)}{fenced(usage)}{fenced('ls', 'bash')}")
    assert r.status is ExtractStatus.OK and r.source == usage and r.chosen == 1


def test_no_block_defines_the_entry_points_last_block_with_missing() -> None:
    r = extract_code(fenced("import torch\n") + fenced("def helper():\n    pass\n"), ("add", "add_out"))
    assert r.status is ExtractStatus.OK and r.source == "def helper():\n    pass\n"
    assert r.missing == ("add", "add_out")


def test_entry_points_split_across_blocks() -> None:
    a = "import torch\n\n\ndef add(x, y):\n    return x\n"
    b = "def add_out(x, y, *, out):\n    return out\n"
    r = extract_code(f"Part 1:\n{fenced(a)}\nPart 2:\n{fenced(b)}", ("add", "add_out"))
    assert r.status is ExtractStatus.SPLIT and r.candidate is None
    assert r.source == b and r.missing == ("add",)


def test_entry_point_bound_by_assignment_or_in_if() -> None:
    code = ("import functools\n\n\ndef _impl(x, y, out=None):\n    return out\n\n\n"
            "add = functools.partial(_impl)\nif True:\n    def add_out(x, y, *, out):\n        return out\n")
    r = extract_code(fenced(DRAFT) + fenced(code), ("add", "add_out"))
    assert r.status is ExtractStatus.OK and r.source == code


def test_unparsable_block_still_found_by_def() -> None:
    broken = "import torch\n\ndef add(x, y):\n    return (x\n"
    r = extract_code(fenced(broken), NAMES)
    assert r.status is ExtractStatus.OK and r.source == broken and r.missing == ()


def test_unclosed_fence_is_truncated() -> None:
    cut = "import torch\n\n\ndef add(x, y):\n    n = x.numel()\n    grid = (triton.cdiv(n,"
    r = extract_code(f"Here it is:\n```python\n{cut}", NAMES)
    assert r.status is ExtractStatus.TRUNCATED and r.candidate is None
    assert r.source == cut + "\n" and r.chosen == 0


def test_unclosed_fence_but_caller_says_complete() -> None:
    r = extract_code(f"```python\n{CODE}", NAMES, truncated=False)
    assert r.status is ExtractStatus.OK and r.source == CODE


def test_caller_truncated_flag() -> None:
    # Cut while still in prose, or in unfenced code: nothing complete to evaluate.
    assert extract_code("Let me think about the tiling. First,", NAMES,
                        truncated=True).status is ExtractStatus.TRUNCATED
    r = extract_code(CODE, NAMES, truncated=True)
    assert r.status is ExtractStatus.TRUNCATED and r.source == CODE
    # Cut after the code block closed: the code itself is complete.
    r = extract_code(f"{fenced(CODE)}\nThis kernel works by", NAMES, truncated=True)
    assert r.status is ExtractStatus.OK and r.source == CODE
    # Cut, and no block defines the entry points: the answer was still coming.
    imports = fenced("import torch\n")
    r = extract_code(f"{imports}\nNow the kernel", NAMES, truncated=True)
    assert r.status is ExtractStatus.TRUNCATED


def test_complete_block_then_cut_off_block() -> None:
    reply = f"{fenced(CODE)}\nAnd a test:\n```python\nx = torch.randn("
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE and "cut off" in r.note


def test_cut_off_block_before_any_python() -> None:
    r = extract_code("First install:\n```bash\npip install tri", NAMES)
    assert r.status is ExtractStatus.TRUNCATED and r.source == ""


def test_think_spans_are_ignored() -> None:
    idea = fenced(CODE.replace("_launch", "_idea"))
    reply = f"<think>\nMaybe:\n{idea}</think>\nFinal:\n{fenced(DRAFT)}"
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.OK and r.source == DRAFT and r.blocks == 1


def test_inline_triple_backticks_are_not_fences() -> None:
    reply = f"Use ```tl.dot``` with care.\n{fenced(CODE)}"
    r = extract_code(reply, NAMES)
    assert r.status is ExtractStatus.OK and r.source == CODE and r.blocks == 1


def test_never_raises_on_garbage() -> None:
    rng = random.Random(0)
    pieces = ["```", "```python\n", "~~~", "\n", "def add(", "):\n", "  x = 1\n", "\r\n", "\r",
              "<think>", "</think>", "\x00", "é", "import torch\n", "(" * 50, "````", " ", "py\n"]
    for _ in range(400):
        reply = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        r = extract_code(reply, NAMES, truncated=rng.choice([None, True, False]))
        assert isinstance(r, Extraction) and isinstance(r.status, ExtractStatus)
        assert (r.candidate is not None) == (r.status is ExtractStatus.OK)
