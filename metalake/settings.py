"""The settings kernel: the loader every process's settings share and the infrastructure sections.

Every process composes its own root (a :class:`KernelSettings` subclass beside its ``main.py``) from this one and the
sections of its own code, and loads it once with :func:`load_settings`; library code takes what it reads and never
loads settings itself. Variables are prefixed ``METALAKE_`` and nested with ``__``. A process reads the environment
and, if ``METALAKE_ENV_FILE`` names one, that file (real variables win); it discovers nothing on disk. Addresses and
paths have no defaults here: the operator tooling (``ops.settings``) derives the local stack's loopback addresses and
writes them into the stack's env file for the processes it starts; production sets each one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from metalake.lake_settings import LakeSettings
from metalake.lake_uri import LakeRoot, S3Path, parse_lake_root
from metalake.secret_files import SecretFilesSource
from metalake.telemetry.settings import TelemetrySettings
from metalake.trino_settings import TrinoSettings

KafkaSecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
KafkaSaslMechanism = Literal["SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "PLAIN"]


class KafkaPrincipalSettings(BaseModel):
    """The Kafka principal each process kind authenticates as (SCRAM: its ``kafka.sasl_username``; OAUTHBEARER: its
    ``kafka.oauth_client_id``, the token's ``sub``), named without the ``User:`` type. ``metalake kafka acls`` grants
    each what its process reads and writes (``ops/cli/kafka_acls.py``); every instance of a kind shares it."""

    api: str = "metalake-api"
    connect: str = "metalake-connect"
    stream: str = "metalake-stream"
    propagation: str = "metalake-propagation"
    outbound: str = "metalake-outbound"
    access: str = "metalake-access"
    lake: str = "metalake-lake"

    @field_validator("*")
    @classmethod
    def _a_name(cls, value: str) -> str:
        name = value.removeprefix("User:")
        # '*' would be Kafka's wildcard principal (everyone); blanks and ',' cannot be one principal's name.
        if not name or name == "*" or any(c.isspace() or c == "," for c in name):
            raise ValueError("a Kafka principal name: not empty, not '*', no blank or ','")
        return name


class KafkaSettings(BaseModel):
    """Every Kafka client's settings (librdkafka and the streaming job's Java client: ``metalake.kafka.config``
    maps them). PLAINTEXT by default (the local stack's tests); production sets SASL_SSL with SCRAM or OAUTHBEARER
    (OIDC client credentials) and the CA that signed the brokers' certificates. Topics the platform creates get
    ``topic_replication_factor`` replicas and ``min.insync.replicas`` = ``topic_min_insync_replicas`` (1/1: one local
    broker; a production cluster: 3/2, so a write acknowledged by ``acks=all`` survives the loss of a broker)."""

    bootstrap_servers: str | None = None
    client_id: str = "metalake"
    delivery_timeout_ms: int = 30_000
    topic_partitions: int = 3
    topic_replication_factor: int = Field(default=1, ge=1)
    topic_min_insync_replicas: int = Field(default=1, ge=1)
    security_protocol: KafkaSecurityProtocol = "PLAINTEXT"
    sasl_mechanism: KafkaSaslMechanism = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    # PEM file of the CA(s) that signed the brokers' certificates (unset: the system's trust store).
    ssl_ca_location: Path | None = None
    # Client certificate (mutual TLS), PEM. The streaming job's Java client reads one file holding the key followed by
    # its certificate chain: point both settings at such a bundle when the job needs a client certificate.
    ssl_certificate_location: Path | None = None
    ssl_key_location: Path | None = None
    ssl_key_password: SecretStr | None = None
    # OAUTHBEARER: tokens from an OIDC provider's token endpoint (client credentials grant).
    oauth_token_endpoint_url: str | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: SecretStr | None = None
    oauth_scope: str | None = None
    # The principal of each process kind, for the ACLs `metalake kafka acls` derives and applies.
    principals: KafkaPrincipalSettings = Field(default_factory=KafkaPrincipalSettings)

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSettings:
        if self.topic_min_insync_replicas > self.topic_replication_factor:
            raise ValueError(
                "kafka.topic_min_insync_replicas exceeds kafka.topic_replication_factor: no acks=all write could "
                "ever succeed"
            )
        if not self.security_protocol.startswith("SASL_"):
            return self
        if self.sasl_mechanism == "OAUTHBEARER":
            wanted = {
                "oauth_token_endpoint_url": self.oauth_token_endpoint_url,
                "oauth_client_id": self.oauth_client_id,
                "oauth_client_secret": self.oauth_client_secret,
            }
        else:
            wanted = {"sasl_username": self.sasl_username, "sasl_password": self.sasl_password}
        missing = [f"kafka.{name}" for name, value in wanted.items() if not value]
        if missing:
            raise ValueError(
                f"kafka.security_protocol={self.security_protocol} with kafka.sasl_mechanism={self.sasl_mechanism} "
                f"needs {', '.join(missing)}"
            )
        return self


class MongoSettings(BaseModel):
    uri: str | None = None
    server_selection_timeout_ms: int = 10_000
    # How long a write that must not be skipped (the job's projection) waits for MongoDB to come back before it fails
    # (metalake.mongo.while_unreachable): a restart of FerretDB or a failover must not fail the job's batches.
    outage_wait_s: float = 300.0


class SecretsSettings(BaseModel):
    """Tenants' third-party secrets at rest (``metalake.sealing``; docs/configuration.md): connector passwords,
    webhook signing secrets, Slack and Jira tokens, webhook HMAC keys, sealed with AES-256-GCM under a key derived
    from ``key_encryption_key`` (default: ``api.key_encryption_key``, from which a separate key is derived). Every
    process that stores or uses them reads it (API, connector worker, outbound runtime). To rotate: set the new key,
    move the old one to ``previous_key_encryption_keys`` (still opened), run ``metalake secrets reseal``, then drop
    it. ``schema_key`` keys tenants' Trino schema names (``tenants.trino_schemas``; default: the current key-encryption
    key, from which a separate key is derived): set it to keep the names when that key rotates."""

    key_encryption_key: SecretStr | None = None
    previous_key_encryption_keys: list[SecretStr] = Field(default_factory=list)
    schema_key: SecretStr | None = None


class HealthPorts(BaseModel):
    """The port of each long-running process's health server (``metalake.http.health``); 0 or unset: none. Two
    processes on one host need two ports: set each instance's own variable."""

    enrichment: int | None = Field(default=None, ge=0, lt=65536)
    propagation: int | None = Field(default=None, ge=0, lt=65536)
    outbound: int | None = Field(default=None, ge=0, lt=65536)
    access: int | None = Field(default=None, ge=0, lt=65536)
    lake_worker: int | None = Field(default=None, ge=0, lt=65536)


class HealthSettings(BaseModel):
    """The processors' health servers: ``/healthz`` (the loop polled within ``stall_after_s``) and ``/readyz`` (each
    dependency answers within ``check_timeout_s``). ``host`` is the address they bind: loopback by default; a
    cluster's probes reach the pod's address (``0.0.0.0``). They say nothing secret: states and exception classes."""

    host: str = "127.0.0.1"
    ports: HealthPorts = Field(default_factory=HealthPorts)
    check_timeout_s: float = Field(default=2.0, gt=0, le=30)
    # Longer than the slowest batch a processor handles between two polls (an access resync, a large closure).
    stall_after_s: float = Field(default=300.0, gt=0)


class ApiKeySettings(BaseModel):
    """The admin API's key-encryption key (``METALAKE_API__KEY_ENCRYPTION_KEY``): the default of
    ``secrets.key_encryption_key``, so every process that opens sealed secrets reads it. The API's own section
    (``control.auth.settings.ApiSettings``) extends this one."""

    key_encryption_key: SecretStr | None = None


class KernelSettings(BaseSettings):
    """The root every process's settings extend: the infrastructure every process may reach. Paths and addresses
    have no default (:class:`SettingMissing` names the variable when one is read unset)."""

    model_config = SettingsConfigDict(env_prefix="METALAKE_", env_nested_delimiter="__", extra="ignore")

    kafka: KafkaSettings = KafkaSettings()
    mongo: MongoSettings = MongoSettings()
    trino: TrinoSettings = TrinoSettings()
    lake: LakeSettings = LakeSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    secrets: SecretsSettings = SecretsSettings()
    health: HealthSettings = HealthSettings()
    api: ApiKeySettings = ApiKeySettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # A secret setting's ``METALAKE_<SETTING>_FILE`` (metalake.secret_files) after its variable, before the file.
        files = SecretFilesSource(settings_cls)
        return init_settings, env_settings, files, dotenv_settings, file_secret_settings

    @model_validator(mode="after")
    def _normalise_paths(self) -> KernelSettings:
        self.lake.root = parse_lake_root(self.lake.root)
        self.lake.checkpoint_root = self.lake.checkpoint_root.resolve() if self.lake.checkpoint_root else None
        return self

    @property
    def kafka_bootstrap(self) -> str:
        return required(self.kafka.bootstrap_servers, "kafka.bootstrap_servers")

    @property
    def mongo_uri(self) -> str:
        return required(self.mongo.uri, "mongo.uri")

    @property
    def lake_root(self) -> LakeRoot:
        """The lake's root: a local folder or an S3 location (``metalake.lake_uri``)."""
        root = self.lake.root
        if root is None:
            return required(root, "lake.root")
        return root

    @property
    def lake_on_s3(self) -> bool:
        return isinstance(self.lake.root, S3Path)

    @property
    def checkpoint_root(self) -> Path:
        return required(self.lake.checkpoint_root, "lake.checkpoint_root")


_T = TypeVar("_T")
_Root = TypeVar("_Root", bound=KernelSettings)


class SettingMissing(RuntimeError):
    """A setting this process needs has no value: named with its environment variable."""


def required(value: _T | None, name: str) -> _T:
    """``value``, or :class:`SettingMissing` naming the setting ``name`` (dotted, e.g. ``lake.root``)."""
    if value is None:
        variable = "METALAKE_" + name.upper().replace(".", "__")
        raise SettingMissing(
            f"settings: {name} is unset; set {variable} (the local stack's tooling sets it for a checkout)"
        )
    return value


def _env_files() -> tuple[Path, ...]:
    explicit = os.environ.get("METALAKE_ENV_FILE")
    return (Path(explicit),) if explicit else ()


def load_settings(root: type[_Root]) -> _Root:
    """Fresh settings of the process whose root is ``root``, from the environment and ``METALAKE_ENV_FILE``: called
    by a process's entry point only, which passes on what its code reads."""
    files = [f for f in _env_files() if f.is_file()]
    return root(_env_file=files or None)
