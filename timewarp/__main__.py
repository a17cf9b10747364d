"""``python -m timewarp``: the ``timewarp`` command.

The one module of the runtime package that reaches up to the commands layer: it is the
entry point users know, not something a scheduler process imports (see docs/design.md,
"Layers")."""

from commands.cli import entry

entry()
