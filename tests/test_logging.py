"""structlog emits JSON lines with the run context bound."""

from __future__ import annotations

import json

import structlog

from accelopt.logging import bind_run, configure_logging, get_logger


def test_json_lines_carry_run_id(capsys):
    configure_logging("json", "INFO")
    bind_run("run-42", problem="matmul")
    try:
        get_logger(component="test").info("hello", n=3)
    finally:
        structlog.contextvars.clear_contextvars()
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["event"] == "hello"
    assert record["run_id"] == "run-42" and record["problem"] == "matmul"
    assert record["component"] == "test" and record["n"] == 3 and record["level"] == "info"


def test_level_filters(capsys):
    configure_logging("json", "ERROR")
    get_logger().warning("quiet")
    assert "quiet" not in capsys.readouterr().err
