"""A placement helper the scheduler keeps in its own dependency folder (deps/)."""


def cpu(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def first_fit(free: dict[str, float], need: float) -> str | None:
    """The first node, by name, with room for ``need`` cpus."""
    for node in sorted(free):
        if free[node] >= need:
            return node
    return None
