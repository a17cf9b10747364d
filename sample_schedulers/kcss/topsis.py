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
    norms = [math.sqrt(sum(row[j] ** 2 for row in matrix)) for j in range(columns)]
    weighted = [
        [weights[j] * (row[j] / norms[j] if norms[j] else 0.0) for j in range(columns)]
        for row in matrix
    ]
    best = []
    worst = []
    for j in range(columns):
        column = [row[j] for row in weighted]
        hi, lo = max(column), min(column)
        best.append(hi if benefit[j] else lo)
        worst.append(lo if benefit[j] else hi)
    closeness = []
    for row in weighted:
        s_plus = math.sqrt(sum((v - b) ** 2 for v, b in zip(row, best, strict=True)))
        s_minus = math.sqrt(sum((v - w) ** 2 for v, w in zip(row, worst, strict=True)))
        total = s_plus + s_minus
        closeness.append(s_minus / total if total > 0 else 0.5)
    return closeness
