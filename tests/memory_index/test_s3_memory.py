"""A run's memory on an S3 API (a local moto server): the run config names the URI and the
object-store settings, the credentials come from the environment, and the run's curator and
retriever (real NATS, real LanceDB, the real embedding model) index and retrieve through it."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from accelopt import catalog as c
from accelopt.config import ConfigError, build_config
from actors.roles.curator import MemoryCurator
from actors.roles.retriever import MemoryRetriever
from events.log import EventLog
from memory_index import MemoryIndex


def test_a_run_config_points_the_curator_and_retriever_at_an_s3_memory(
    nats_server, local_s3, embedder, make_entry, to_events, monkeypatch
):
    uri = f"s3://{local_s3.bucket()}/fleet-memory"
    cfg = build_config(
        overrides=[
            f"memory.uri={uri}",
            "memory.index_wait_s=5",
            f'memory.storage_options={{endpoint: "{local_s3.endpoint}", region: us-east-1, '
            'allow_http: "true"}',
        ]
    )
    for key, value in local_s3.credentials.items():  # as a fleet host's environment would hold them
        monkeypatch.setenv(key.upper(), value)
    options = dict(cfg.memory.storage_options)  # what actors/runtime/deployment.py hands both memory members
    assert "aws_secret_access_key" not in options
    memory = msgspec.to_builtins(cfg.memory)
    insight = make_entry(
        "**Vectorize the exp in silu**",
        "Use an 8-wide polynomial exp so silu runs in AVX2.",
        problem="silu",
        source_run="run-h100",
    )
    started = c.RunStarted(
        event_id=c.derive_event_id("run-cpu", "RunStarted"),
        run_id="run-cpu",
        ts=time.time(),
        config={"memory": memory},
        seed=0,
        targets=[],
    )
    result_id = c.derive_event_id("run-cpu", "MemoryRetrieved", "silu", 1, "k1")
    request = c.MemoryRequested(
        event_id=c.derive_event_id("run-cpu", "MemoryRequested", result_id),
        run_id="run-cpu",
        ts=time.time(),
        result_id=result_id,
        problem="silu",
        op_type="silu",
        device="cpu",
        language="c",
        iteration=1,
        candidate_id="k1",
        candidate_source="for (i...) y[i] = x[i] / (1 + exp(-x[i]));",
        memory=memory,
        expect_entry_ids=[insight.id],
    )

    async def go() -> c.MemoryRetrieved:
        elog = await EventLog.connect(nats_server.url)
        await elog.publish_many([started, *to_events([insight])])
        curator = MemoryCurator(
            nats_server.url, cfg.memory.uri, embedder=embedder, storage_options=options, batch_window_s=0.02
        )
        await curator.run(until_idle_s=0.5)
        await curator.close()
        assert curator.written == 1
        await elog.publish(request)
        retriever = MemoryRetriever(
            nats_server.url, cfg.memory.uri, embedder=embedder.name, storage_options=options
        )
        await retriever.run(until_idle_s=0.5)
        await retriever.close()
        (answer,) = [e for e in await elog.history("run-cpu") if isinstance(e, c.MemoryRetrieved)]
        await elog.close()
        return answer

    answer = asyncio.run(go())
    assert answer.event_id == result_id and not answer.note
    assert [e.entry_id for e in answer.entries] == [insight.id]
    assert MemoryIndex.open(uri, embedder=embedder, storage_options=options).get(insight.id) == insight
    assert any(k.endswith(".lance") for k in local_s3.objects(uri))


def test_a_memory_on_s3_without_credentials_fails_clearly(local_s3, embedder, make_entry, monkeypatch):
    """Without keys anywhere, opening fails with LanceDB's credentials error; nothing is written."""
    uri = f"s3://{local_s3.bucket()}/memory"
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    options = {
        "endpoint": local_s3.endpoint,
        "region": "us-east-1",
        "allow_http": "true",
        "connect_timeout": "2s",
        "timeout": "5s",
    }
    with pytest.raises(ValueError, match="AWS credentials"):
        MemoryIndex.open(uri, embedder=embedder, storage_options=options).upsert([make_entry("t", "x")])
    assert local_s3.objects(uri) == []


@pytest.mark.parametrize("key", ["aws_secret_access_key", "aws_session_token", "AWS_ACCESS_KEY_ID"])
def test_credentials_in_the_run_config_are_refused(key):
    with pytest.raises(ConfigError, match=rf"memory\.storage_options: {key}: credentials .* environment"):
        build_config(overrides=["memory.uri=s3://bucket/memory", f"memory.storage_options={{{key}: x}}"])
