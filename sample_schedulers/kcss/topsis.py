"""TOPSIS (Technique for Order of Preference by Similarity to Ideal Solution), as the
KCSS paper states it:

1. decision matrix ``f[i][j]``: alternative (node) i on criterion j;
2. vector normalisation ``r[i][j] = f[i][j] / sqrt(sum_i f[i][j]**2)``;
3. weighting ``v[i][j] = w[j] * r[i][j]``;
4. ideal ``A+`` (max of a benefit column, min of a cost column) and anti-ideal ``A-``
   (the opposite);
5. Euclidean separations ``S+[i] = |v[i] - A+|`` and ``S-[i] = |v[i] - A-|``;
6. relative closeness ``RC[i] = S-[i] / (S+[i] + S-[i])`` in [0, 1]; higher is better.

Edge cases the paper leaves open, decided here: a column of zeros normalises to zeros
(it then cannot separate anyone); when ``S+ + S- = 0`` (every alternative equal on every
weighted criterion) ``RC = 0.5`` for all, so callers' tie-breaking decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def relative_closeness(
    matrix: Sequence[Sequence[float]],
    weights: Sequence[float],
    benefit: Sequence[bool],
) -> list[float]:
    """RC of every row of ``matrix``. ``weights`` (non-negative, one per column; the paper
    has them sum to 1 — they are used as given) and ``benefit`` (True: more is better)
    have one entry per column."""
    if not matrix:
        return []
    columns = len(weights)
    if len(benefit) != columns or any(len(row) != columns for row in matrix):
        raise ValueError("matrix rows, weights and benefit flags must have the same length")
    if any(w < 0 for w in weights):
        raise ValueError("weights must be non-negative")
    columns_in = list(zip(*matrix, strict=True))
    weighted = []  # column-major: weighted[j][i]
    best = []
    worst = []
    for j, column in enumerate(columns_in):
        norm = math.sqrt(sum(x * x for x in column))
        w = weights[j]
        col = [w * (x / norm) for x in column] if norm else [0.0] * len(column)
        weighted.append(col)
        hi, lo = max(col), min(col)
        best.append(hi if benefit[j] else lo)
        worst.append(lo if benefit[j] else hi)
    s_plus = [0.0] * len(matrix)
    s_minus = [0.0] * len(matrix)
    for j, col in enumerate(weighted):
        b, a = best[j], worst[j]
        for i, v in enumerate(col):
            s_plus[i] += (v - b) ** 2
            s_minus[i] += (v - a) ** 2
    closeness = []
    for sp, sm in zip(s_plus, s_minus, strict=True):
        sp, sm = math.sqrt(sp), math.sqrt(sm)
        total = sp + sm
        closeness.append(sm / total if total > 0 else 0.5)
    return closeness
