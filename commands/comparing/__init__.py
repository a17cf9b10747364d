"""``timewarp compare`` and ``timewarp report``: runs side by side (terminal table and a
self-contained HTML report)."""
