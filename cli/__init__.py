"""The `accelopt` command line, the top layer: it alone wires the core (`accelopt/`), the
actors, the event log, the memory, the suites and the device agents together. Nothing in
the project imports it (tests/test_layers.py checks). `main.py` builds the parser;
`commands/` holds one module (or package, for a command group) per subcommand."""
