from timewarp.cli import entry

entry()
