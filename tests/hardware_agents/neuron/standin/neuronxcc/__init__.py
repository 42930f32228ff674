"""STAND-IN `neuronxcc` for AccelOpt's tests: NOT the AWS Neuron compiler (see ../README.md)."""

__version__ = "0.0.0+accelopt.standin"
STANDIN = True
