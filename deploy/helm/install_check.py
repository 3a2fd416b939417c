"""The chart on a real Kubernetes API server (deploy/helm/install-check.sh, `make chart-install-check`): what the
offline checks (tests/integration/deploy) cannot see, because only the server knows it.

  prepare NAMESPACE CLAIM...  the namespace (Pod Security "restricted" enforced) and what a user creates before
                              `helm install` (docs/deploy.md#secrets): the Secrets and the ReadWriteMany claims
  dry-run NAMESPACE MANIFEST  every object of `helm template` created with dryRun=All and fieldValidation=Strict: a
                              field the server does not know, a duplicate, or a Pod Security warning fails
  verify NAMESPACE MANIFEST   after `helm install`: every object of `helm get manifest` read back with what was sent;
                              every Secret key, ConfigMap and claim a pod template names exists; each Deployment's
                              pod template and the executors' template admitted as a Pod (dry run: Pod Security,
                              the ServiceAccount admission)
  pods NAMESPACE MANIFEST     the last step alone (install-check.sh's broken renderings, which must be refused)

No pod runs: nothing schedules them (no scheduler, no kubelet). The server, its CA and the admin's client certificate:
KUBE_CHECK_SERVER (https://127.0.0.1:PORT) and KUBE_CHECK_PKI (ca.crt, admin.crt, admin.key). Runs with the
deployment checks' venv (PyYAML)."""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

# The Secrets of docs/deploy.md#secrets, with placeholder values (nothing connects to them).
KAFKA_PRINCIPALS = ("api", "connect", "stream", "propagation", "outbound", "access", "lake")
PEM = "-----BEGIN CERTIFICATE-----\nplaceholder\n-----END CERTIFICATE-----\n"
SECRETS: dict[str, dict[str, str]] = {
    "metalake-keys": {"api-kek": "a2V5" * 11, "secrets-kek": "a2V5" * 11, "schema-key": "a2V5" * 11},
    "metalake-mongo": {"uri": "mongodb://metalake:placeholder@docdb.example:27017/?tls=true&retryWrites=false"},
    "metalake-docdb-ca": {"ca.pem": PEM},
    "metalake-kafka": {f"{p}-{k}": f"metalake-{p}" for p in KAFKA_PRINCIPALS for k in ("username", "password")},
    "metalake-trino-ca": {"ca.crt": PEM},
    "metalake-trino-passwords": dict.fromkeys(("api", "stream", "access"), '{"metalake": "placeholder"}'),
}
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}


class CheckFailed(Exception):
    """What the server refused or changed."""


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]
    warnings: list[str]


class Api:
    """The API server over HTTPS, as the admin (a client certificate of group system:masters)."""

    def __init__(self, server: str, pki: Path) -> None:
        self.server = server.rstrip("/")
        self.tls = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.tls.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}  # (apiVersion, kind): (collection, namespaced)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Reply:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)  # noqa: S310 (https only)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, context=self.tls, timeout=30) as response:  # noqa: S310
                return Reply(response.status, json.load(response), response.headers.get_all("Warning") or [])
        except urllib.error.HTTPError as error:
            return Reply(error.code, json.loads(error.read() or b"{}"), error.headers.get_all("Warning") or [])

    def path(self, obj: dict[str, Any], namespace: str, named: bool = True) -> str:
        """The object's URL path (its collection's with named=False), from the server's discovery."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        if (api_version, kind) not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            reply = self.call("GET", base)
            if reply.status != 200:
                raise CheckFailed(f"{api_version} is not served: {reply.body.get('message')}")
            for r in reply.body["resources"]:
                if "/" not in r["name"]:  # not a subresource
                    self._resources[(api_version, r["kind"])] = (r["name"], r["namespaced"])
        plural, namespaced = self._resources[(api_version, kind)]
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        scope = f"/namespaces/{namespace}" if namespaced else ""
        return f"{base}{scope}/{plural}" + (f"/{obj['metadata']['name']}" if named else "")


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def documents(manifest: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(manifest.read_text()) if d]


def label(obj: dict[str, Any]) -> str:
    return f"{obj['apiVersion']} {obj['kind']} {obj['metadata']['name']}"


def create(api: Api, obj: dict[str, Any], namespace: str) -> None:
    reply = api.call("POST", api.path(obj, namespace, named=False), obj)
    if reply.status not in (200, 201):
        raise CheckFailed(f"{label(obj)} not created: {reply.body.get('message')}")


def prepare(api: Api, namespace: str, claims: list[str]) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": RESTRICTED}}
    create(api, ns, namespace)
    for name, data in SECRETS.items():
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}
        create(api, secret, namespace)
    for claim in claims:
        spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}}
        create(
            api,
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim}, "spec": spec},
            namespace,
        )
    say(f"{namespace}: created, Pod Security 'restricted' enforced; {len(SECRETS)} Secrets, claims {claims}")


def dry_run(api: Api, namespace: str, manifest: Path) -> None:
    objects = documents(manifest)
    for obj in objects:
        reply = api.call("POST", api.path(obj, namespace, named=False) + "?dryRun=All&fieldValidation=Strict", obj)
        if reply.status not in (200, 201):
            raise CheckFailed(f"{label(obj)} refused: {reply.body.get('message')}")
        if reply.warnings:
            raise CheckFailed(f"{label(obj)} accepted with warnings: {reply.warnings}")
    say(f"{namespace}: the server accepts all {len(objects)} rendered objects (strict fields, dry run)")


def differences(sent: Any, stored: Any, where: str) -> Iterator[str]:  # noqa: ANN401
    """Where the stored object lacks or changed what was sent (the server may add defaults; it drops empty values)."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        for key, value in sent.items():
            if key in stored:
                yield from differences(value, stored[key], f"{where}.{key}")
            elif value not in (None, "", [], {}):
                yield f"{where}.{key} missing"
    elif isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        for i, (a, b) in enumerate(zip(sent, stored, strict=True)):
            yield from differences(a, b, f"{where}[{i}]")
    elif sent != stored:
        yield f"{where}: sent {sent!r}, stored {stored!r}"


def read_back(api: Api, namespace: str, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        reply = api.call("GET", api.path(obj, namespace))
        if reply.status != 200:
            raise CheckFailed(f"{label(obj)} not found after helm install: {reply.body.get('message')}")
        changed = list(differences(obj, reply.body, ""))
        if changed:
            raise CheckFailed(f"{label(obj)} stored otherwise than sent: {changed}")
    say(f"{namespace}: all {len(objects)} objects of the release read back as sent")


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, pod) of every Deployment's template and of the executors' template (with the image Spark sets)."""
    images: dict[str, str] = {}
    for obj in objects:
        if obj["kind"] == "Deployment":
            template = obj["spec"]["template"]
            images[obj["metadata"]["name"]] = template["spec"]["containers"][0]["image"]
            yield obj["metadata"]["name"], template
    for obj in objects:
        if obj["kind"] == "ConfigMap" and "executor.yaml" in obj.get("data", {}):
            pod = yaml.safe_load(obj["data"]["executor.yaml"])
            driver = obj["metadata"]["name"].removesuffix("-executor")
            pod["spec"]["containers"][0]["image"] = images[driver]
            yield obj["metadata"]["name"], pod


def references(spec: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key or None) of every Secret, ConfigMap and claim a pod spec needs."""
    for container in spec["containers"]:
        for source in container.get("envFrom", []):
            for kind, ref in (("Secret", "secretRef"), ("ConfigMap", "configMapRef")):
                if ref in source and not source[ref].get("optional"):
                    yield kind, source[ref]["name"], None
        for env in container.get("env", []):
            for kind, ref in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                key_ref = env.get("valueFrom", {}).get(ref)
                if key_ref and not key_ref.get("optional"):
                    yield kind, key_ref["name"], key_ref["key"]
    for volume in spec.get("volumes", []):
        for kind, source, field in (("Secret", "secret", "secretName"), ("ConfigMap", "configMap", "name")):
            if source in volume and not volume[source].get("optional"):
                items = volume[source].get("items") or [{"key": None}]
                yield from ((kind, volume[source][field], item["key"]) for item in items)
        if "persistentVolumeClaim" in volume:
            yield "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"], None


def check_references(api: Api, namespace: str, name: str, spec: dict[str, Any]) -> None:
    for kind, ref, key in references(spec):
        obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": ref}}
        reply = api.call("GET", api.path(obj, namespace))
        if reply.status != 200:
            raise CheckFailed(f"{name} needs {kind} {ref}, which the documented steps do not create")
        if key is not None and key not in reply.body.get("data", {}):
            raise CheckFailed(f"{name} needs key {key!r} of {kind} {ref}, which the documented steps do not create")


def admit_pods(api: Api, namespace: str, objects: list[dict[str, Any]]) -> None:
    count = 0
    for name, template in pod_specs(objects):
        check_references(api, namespace, name, template["spec"])
        pod = {"apiVersion": "v1", "kind": "Pod", **template}
        pod["metadata"] = {**template.get("metadata", {}), "name": f"{name}-admission-check"}
        reply = api.call("POST", api.path(pod, namespace, named=False) + "?dryRun=All&fieldValidation=Strict", pod)
        if reply.status not in (200, 201) or reply.warnings:
            raise CheckFailed(f"a pod of {name} refused: {reply.body.get('message')} {reply.warnings}")
        count += 1
    say(f"{namespace}: {count} pod templates admitted as pods (Pod Security restricted), their references exist")


def main(argv: list[str]) -> int:
    api = Api(os.environ["KUBE_CHECK_SERVER"], Path(os.environ["KUBE_CHECK_PKI"]))
    command, namespace, rest = argv[0], argv[1], argv[2:]
    try:
        if command == "prepare":
            prepare(api, namespace, rest)
        elif command == "dry-run":
            dry_run(api, namespace, Path(rest[0]))
        elif command == "verify":
            objects = documents(Path(rest[0]))
            read_back(api, namespace, objects)
            admit_pods(api, namespace, objects)
        elif command == "pods":
            admit_pods(api, namespace, documents(Path(rest[0])))
        else:
            raise SystemExit(f"unknown command {command!r}")
    except CheckFailed as failure:
        sys.stderr.write(f"{namespace}: FAILED: {failure}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
