"""The anti-cheat layers an agent runs (docs/anticheat.md). Each can be switched off with
``--disable-layer`` so tests prove every other layer on its own. Kept free of heavy imports:
``--help`` lists them."""

LAYERS: dict[str, str] = {
    "static": "AST policy on the source, before any code runs",
    "runtime": "ATen dispatch guard around the candidate's own code",
    "launches": "the candidate's own Triton kernels must run",
    "ghost": "outputs must be wrong with the candidate's launches skipped",
    "determinism": "a second run after refilling freed memory must agree",
    "replay": "the same buffers refilled with new values must give the new answer",
    "integrity": "harness primitives, flags and threads unchanged after every call",
    "timing": "re-check after timing, wall-clock cross-check, physical floor",
    "profile": "on a GPU, the candidate's own kernels carry most of the device time",
}
