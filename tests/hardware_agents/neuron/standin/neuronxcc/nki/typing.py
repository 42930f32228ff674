"""STAND-IN `neuronxcc.nki.typing` (tests only)."""

tensor = object
