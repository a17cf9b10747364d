"""The execution history (the paper's Records/Statistics tables): durations per image and slot.

Each completed pod adds one running time under two keys: the exact slot
``(image, node, resource)`` and the class ``(image, node_class, resource)``. A lookup
prefers the node's own statistics and falls back to its class, so a node that joins the
cluster benefits from what its siblings taught.

The history can be saved to and loaded from a JSON file (the paper's database). Saving
writes a temporary file and renames it, so a crash never leaves half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .model import Resource, Stats

_VERSION = 1


class History:
    """Min/avg/max running time per (image, node, resource) and per (image, class, resource)."""

    def __init__(self) -> None:
        self._by_node: dict[tuple[str, str, str], Stats] = {}
        self._by_class: dict[tuple[str, str, str], Stats] = {}

    def record(
        self, image: str, node: str, node_class: str, resource: Resource, duration: float
    ) -> None:
        """Add one observed running time (seconds, >= 0)."""
        if duration < 0:
            raise ValueError(f"negative duration {duration!r} for image {image!r}")
        for table, key in (
            (self._by_node, (image, node, resource)),
            (self._by_class, (image, node_class, resource)),
        ):
            old = table.get(key)
            table[key] = Stats.of([duration]) if old is None else old.add(duration)

    def lookup(self, image: str, node: str, node_class: str, resource: Resource) -> Stats | None:
        """Statistics for ``image`` on that slot: the node's own, else its class's, else None."""
        found = self._by_node.get((image, node, resource))
        if found is not None:
            return found
        return self._by_class.get((image, node_class, resource))

    def knows(self, image: str) -> bool:
        """True once any run of ``image`` was recorded."""
        return any(key[0] == image for key in self._by_class)

    def __len__(self) -> int:
        return sum(stats.count for stats in self._by_class.values())

    def to_json(self) -> dict:
        def rows(table: dict[tuple[str, str, str], Stats], where: str) -> list[dict]:
            return [
                {
                    "image": image,
                    where: place,
                    "resource": resource,
                    "count": s.count,
                    "min": s.minimum,
                    "max": s.maximum,
                    "total": s.total,
                }
                for (image, place, resource), s in sorted(table.items())
            ]

        return {
            "version": _VERSION,
            "nodes": rows(self._by_node, "node"),
            "classes": rows(self._by_class, "class"),
        }

    @classmethod
    def from_json(cls, data: object, source: str = "<history>") -> History:
        """Parse :meth:`to_json` output; raise ValueError naming ``source`` and the bad row."""
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ValueError(f"{source}: not a KubCG history (expected version {_VERSION})")
        history = cls()
        for section, where, table in (
            ("nodes", "node", history._by_node),
            ("classes", "class", history._by_class),
        ):
            for i, row in enumerate(data.get(section, [])):
                try:
                    resource = row["resource"]
                    if resource not in ("cpu", "gpu"):
                        raise ValueError(f"resource must be cpu or gpu, not {resource!r}")
                    stats = Stats(
                        int(row["count"]), float(row["min"]), float(row["max"]), float(row["total"])
                    )
                    if stats.count < 1 or stats.minimum > stats.maximum:
                        raise ValueError("count must be >= 1 and min <= max")
                    table[(str(row["image"]), str(row[where]), resource)] = stats
                except (KeyError, TypeError, ValueError) as exc:
                    raise ValueError(f"{source}: {section}[{i}]: {exc}") from exc
        return history

    @classmethod
    def load(cls, path: Path) -> History:
        """Read a history file; a missing file is an empty history."""
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from exc
        return cls.from_json(data, str(path))

    def save(self, path: Path) -> None:
        """Write atomically (temporary file in the same directory, then rename)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(self.to_json(), f, indent=1, sort_keys=True)
                f.write("\n")
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
