"""One strategy per kind: what the API server does with objects of that kind (decode,
defaults, validation, update rules, field selectors, deletion). ``base.Strategy`` is the
generic behaviour; the modules here hold the kinds that differ from it, one module per
kind or family. The table in ``resources.py`` names each served type's strategy, and
``resources.register`` adds a kind at run time."""

from .base import Context, Strategy, TypeNames

__all__ = ["Context", "Strategy", "TypeNames"]
