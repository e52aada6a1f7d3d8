"""Text the Marlin problems share: the prompt's description of Marlin's weight layout, and the
pure-Python fragment of their reference solutions that builds the layout's permutation tables
(a candidate file must be self-contained, so the solutions carry it as source)."""

from __future__ import annotations

WEIGHT_LAYOUT = (
    "Marlin weight layout (vLLM 0.13 `marlin_weights`), for `[K, N]` codes Q (K % 16 == 0, "
    "N % 64 == 0): cut Q into tiles of R x 16 (R = 16; R = 32 when `is_a_8bit`) and lay the "
    "tiles of each R-row band side by side, each tile flattened row-major: `T = Q.reshape(K//R, "
    "R, N//16, 16).permute(0, 2, 1, 3).reshape(K//16, 16*N)`. In every row of T, each run of "
    "1024 consecutive values is permuted, `run_new[j] = run_old[perm[j]]`, with\n"
    "```\n"
    "perm = []\n"
    "for i in range(32):\n"
    "    col, q = i // 4, i % 4\n"
    "    if not is_a_8bit:\n"
    "        rows = [2*q, 2*q + 1, 2*q + 8, 2*q + 9]\n"
    "        block = [16*r + col + 8*b for b in (0, 1) for r in rows]\n"
    "        perm += [p + 256*j for j in range(4) for p in block]\n"
    "    else:\n"
    "        rows = [4*q + d for d in range(4)] + [4*q + 16 + d for d in range(4)]\n"
    "        block = [16*r + col + 8*b for b in (0, 1) for r in rows]\n"
    "        perm += [p + 512*j for j in range(2) for p in block]\n"
    "# then each consecutive group of len(IL) entries is reordered: group_new[t] = "
    "group_old[IL[t]]\n"
    "IL = (0, 2, 4, 6, 1, 3, 5, 7) if bits == 4 else (0, 2, 1, 3)        # 16-bit activations\n"
    "IL = (0, 4, 1, 5, 2, 6, 3, 7) if bits == 4 else (0, 1, 2, 3)        # is_a_8bit\n"
    "```\n"
    "and finally each row of the permuted T is packed into int32 words: word w holds "
    "`T[:, w*P + t]` at bits `t*bits ..` for t < P = 32 // bits. The result is int32 "
    "`[K/16, 16*N*bits/32]` (`[K/16, 2N]` for 4-bit, `[K/16, 4N]` for 8-bit)."
)

PERM_SOURCE = r'''
def _marlin_perm(bits, is_a_8bit=False):
    # Marlin's 1024-entry run permutation (vLLM's get_weight_perm): new[j] = old[perm[j]].
    perm = []
    for i in range(32):
        col, q = i // 4, i % 4
        if is_a_8bit:
            rows = [4 * q + d for d in range(4)] + [4 * q + 16 + d for d in range(4)]
            block = [16 * r + col + 8 * b for b in (0, 1) for r in rows]
            perm += [p + 512 * j for j in range(2) for p in block]
        else:
            rows = [2 * q, 2 * q + 1, 2 * q + 8, 2 * q + 9]
            block = [16 * r + col + 8 * b for b in (0, 1) for r in rows]
            perm += [p + 256 * j for j in range(4) for p in block]
    if is_a_8bit:
        il = (0, 4, 1, 5, 2, 6, 3, 7) if bits == 4 else (0, 1, 2, 3)
    else:
        il = (0, 2, 4, 6, 1, 3, 5, 7) if bits == 4 else (0, 2, 1, 3)
    g = len(il)
    return [perm[s + il[t]] for s in range(0, 1024, g) for t in range(g)]
'''
