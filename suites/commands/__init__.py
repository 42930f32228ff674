"""Subcommands of `accelopt suite`: one module per subcommand, each with `register(subparsers)`
that adds its parser and sets `func(args) -> int` (see accelopt/commands/suite.py)."""
