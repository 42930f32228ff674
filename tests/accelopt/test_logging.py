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


def test_llm_call_failure_log_carries_run_id(capsys, monkeypatch):
    import asyncio

    from scripted_llm import Script, install_script, remove_script

    import actors.llm.gateway as gateway
    from accelopt.config import LLMConfig, RoleLLM
    from accelopt.records import ChatMessage

    configure_logging("json", "INFO")
    # the module's logger was bound under whatever configuration was current at its import
    monkeypatch.setattr(gateway, "log", get_logger(component="llm-gateway"))
    model = install_script("test-logging-empty", Script({"*": []}))  # no reply: the call fails (not retried)
    try:
        gw = gateway.LLMGateway(LLMConfig(default=RoleLLM(model=model, retries=0)))
        calls = asyncio.run(
            gw.complete(
                "planner", [ChatMessage(role="user", content="hi")], run_id="run-7", request_id="req-1"
            )
        )
    finally:
        remove_script("test-logging-empty")
    assert calls[-1].error is not None, calls
    records = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    failed = [r for r in records if r.get("event") == "llm call failed"]
    assert len(failed) == 1, records
    assert failed[0]["run_id"] == "run-7" and failed[0]["request_id"] == "req-1"
