"""Readiness probes. Each returns None when healthy, else a short reason."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path


def port_open(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def tcp_probe(host: str, port: int) -> str | None:
    return None if port_open(host, port) else f"nothing listens on {host}:{port}"


def kafka_probe(bootstrap: str) -> str | None:
    from confluent_kafka.admin import AdminClient

    host, _, port = bootstrap.split(",")[0].rpartition(":")
    if not port_open(host, int(port)):
        return f"nothing listens on {host}:{port}"
    try:
        # log_level 0: a probe expects refusals while the broker starts; librdkafka would print each one.
        client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        brokers = client.list_topics(timeout=3).brokers
    except Exception as exc:  # noqa: BLE001 - any client failure means "not ready yet"
        return f"metadata request failed: {type(exc).__name__}"
    return None if brokers else "no broker in metadata"


def mongo_probe(uri: str) -> str | None:
    from pymongo import MongoClient
    from pymongo.errors import PyMongoError

    client: MongoClient[dict[str, object]] = MongoClient(uri, serverSelectionTimeoutMS=2000)
    try:
        client.admin.command("ping")
    except PyMongoError as exc:
        return f"ping failed: {type(exc).__name__}"
    finally:
        client.close()
    return None


def trino_probe(host: str, port: int, ca_file: Path | None = None) -> str | None:
    """Trino's ``/v1/info`` (public: no credentials); over HTTPS verified against ``ca_file`` when given."""
    scheme = "https" if ca_file is not None else "http"
    context = ssl.create_default_context(cafile=str(ca_file)) if ca_file is not None else None
    try:
        url = f"{scheme}://{host}:{port}/v1/info"
        with urllib.request.urlopen(url, timeout=3, context=context) as resp:  # noqa: S310 - http(s) only
            info = json.load(resp)
    except (OSError, urllib.error.URLError, ValueError) as exc:
        return f"/v1/info unavailable: {type(exc).__name__}"
    return "still starting" if info.get("starting", True) else None
