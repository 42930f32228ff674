"""A local S3 API (moto's server) for tests and benchmarks of an `s3://` memory.

Needs the `dev` extra (moto[server]). The server keeps objects in memory and honours S3's
conditional PUT (If-None-Match), which LanceDB's commits rely on when several writers
share one table, so concurrent curators behave as they would on AWS S3.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

REGION = "us-east-1"
FAKE_KEY = "accelopt-test"
"""The server accepts any credentials; these are the ones the helpers hand out."""


class LocalS3:
    """One moto server on a free loopback port. `start()`, then `bucket()` per memory, `stop()`."""

    def __init__(self) -> None:
        self._server: Any = None
        self.endpoint = ""

    def start(self) -> LocalS3:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as e:
            raise RuntimeError(
                "a local S3 API needs moto[server]: install the dev extra (pip install -e '.[dev]')"
            ) from e
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def credentials(self) -> dict[str, str]:
        return {"aws_access_key_id": FAKE_KEY, "aws_secret_access_key": FAKE_KEY}

    @property
    def storage_options(self) -> dict[str, str]:
        """LanceDB storage options reaching this server (fake keys included: tests only)."""
        return {"endpoint": self.endpoint, "region": REGION, "allow_http": "true", **self.credentials}

    def bucket(self, name: str | None = None) -> str:
        """Create a fresh bucket; returns its name."""
        import boto3

        name = name or f"memory-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, **self.credentials).create_bucket(
            Bucket=name
        )
        return name

    def objects(self, uri: str) -> list[str]:
        """The keys under an `s3://bucket/prefix` URI on this server."""
        import boto3

        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        client = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, **self.credentials)
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
