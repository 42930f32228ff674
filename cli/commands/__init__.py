"""CLI subcommands: one module per command (or command group), each with `register(sub)`."""
