"""metalake's own S3 calls beyond the bucket probes: the ListObjectsV2 pages followed to the end, DeleteObjects in
batches, a prefix deleted page after page (log first), and what the requests carry. The HTTP exchange is replaced by
canned S3 answers (``_request``); the same calls run against SeaweedFS in tests/integration/test_s3_lake_ops.py."""

# ruff: noqa: S314 - the XML parsed here is the tests' own and the client's requests

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from xml.etree import ElementTree as ET

import pytest
from pydantic import SecretStr

from metalake.s3 import (
    MAX_DELETE,
    S3Client,
    S3Error,
    canonical_query,
    delete_body,
    parse_delete_errors,
    parse_list_page,
)

NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def _page(keys: Sequence[str], prefixes: Sequence[str] = (), token: str | None = None, ns: bool = True) -> bytes:
    xmlns = f' xmlns="{NS}"' if ns else ""
    body = "".join(f"<Contents><Key>{k}</Key><Size>1</Size></Contents>" for k in keys)
    body += "".join(f"<CommonPrefixes><Prefix>{p}</Prefix></CommonPrefixes>" for p in prefixes)
    more = f"<IsTruncated>true</IsTruncated><NextContinuationToken>{token}</NextContinuationToken>" if token else ""
    return f"<ListBucketResult{xmlns}>{more or '<IsTruncated>false</IsTruncated>'}{body}</ListBucketResult>".encode()


class Bucket(S3Client):
    """An S3Client whose requests a dict of objects answers as S3 would (keys sorted, pages of ``max-keys``,
    a continuation token naming the next key), recording each request."""

    def __init__(self, keys: Sequence[str], forget_deletes: bool = False) -> None:
        super().__init__("http://s3.test", "us-east-1", SecretStr("AK"), SecretStr("SK"))
        object.__setattr__(self, "objects", set(keys))
        object.__setattr__(self, "calls", [])
        object.__setattr__(self, "forget_deletes", forget_deletes)

    objects: set[str]
    calls: list[tuple[str, dict[str, str], bytes]]
    forget_deletes: bool

    def _request(
        self, method: str, bucket: str, query: Sequence[tuple[str, str]] = (), body: bytes = b""
    ) -> tuple[int, bytes]:
        q = dict(query)
        self.calls.append((method, q, body))
        if method == "POST":
            doomed = [k.text or "" for k in ET.fromstring(body).iter(f"{{{NS}}}Key")]
            if not self.forget_deletes:
                self.objects -= set(doomed)
            return 200, b'<DeleteResult xmlns="' + NS.encode() + b'"></DeleteResult>'
        prefix, size = q["prefix"], int(q["max-keys"])
        keys = sorted(k for k in self.objects if k.startswith(prefix) and k > q.get("continuation-token", ""))
        if "delimiter" in q:
            folders = sorted(
                {prefix + k[len(prefix) :].split("/", 1)[0] + "/" for k in keys if "/" in k[len(prefix) :]}
            )
            return 200, _page([], folders)
        page, rest = keys[:size], keys[size:]
        return 200, _page(page, token=page[-1] if rest else None)


def test_a_listing_follows_its_continuation_tokens_to_the_last_page() -> None:
    bucket = Bucket([f"lake/acme/t/f{i}" for i in range(5)])
    pages = list(bucket.list_objects("b", "lake/acme/", max_keys=2))
    assert [len(p.keys) for p in pages] == [2, 2, 1]
    assert [k for p in pages for k in p.keys] == sorted(bucket.objects)
    assert [c[1].get("continuation-token") for c in bucket.calls] == [None, "lake/acme/t/f1", "lake/acme/t/f3"]


def test_a_truncated_page_without_a_token_is_an_error_not_an_endless_loop() -> None:
    class Broken(Bucket):
        def _request(self, method: str, bucket: str, query=(), body=b""):  # type: ignore[no-untyped-def]
            return 200, b"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"

    with pytest.raises(S3Error, match="without a continuation token"):
        list(Broken([]).list_objects("b", "p/"))


def test_deleting_a_prefix_takes_its_objects_only_page_by_page_each_log_first() -> None:
    mine = [f"lake/acme/events/part-{i}.parquet" for i in range(3)] + ["lake/acme/events/_delta_log/0.json"]
    others = ["lake/acme2/events/part-0.parquet", "lake/acmex", "lake/beta/audit/_delta_log/0.json"]
    bucket = Bucket([*mine, *others])
    assert bucket.delete_prefix("b", "lake/acme/", first=("_delta_log",), page_size=2) == len(mine)
    assert bucket.objects == set(others)
    deletes = [[k.text for k in ET.fromstring(c[2]).iter(f"{{{NS}}}Key")] for c in bucket.calls if c[0] == "POST"]
    assert deletes[0] == ["lake/acme/events/_delta_log/0.json", "lake/acme/events/part-0.parquet"]
    assert sum(len(d) for d in deletes) == len(mine)
    # A rerun (after a crash midway, or a second deprovisioning) finds nothing and deletes nothing.
    assert bucket.delete_prefix("b", "lake/acme/") == 0


@pytest.mark.parametrize("prefix", ["lake/acme", "", "/"])
def test_a_prefix_that_is_not_a_folder_is_refused(prefix: str) -> None:
    bucket = Bucket(["lake/acme/x", "lake/acme2/x"])
    with pytest.raises(ValueError, match="must name a folder"):
        bucket.delete_prefix("b", prefix)
    assert len(bucket.objects) == 2 and bucket.calls == []


def test_a_store_that_keeps_listing_deleted_objects_stops_the_deletion() -> None:
    bucket = Bucket(["lake/acme/x"], forget_deletes=True)
    with pytest.raises(S3Error, match="still listed after deletion"):
        bucket.delete_prefix("b", "lake/acme/")


def test_deletes_go_in_batches_of_the_protocol_maximum() -> None:
    bucket = Bucket([])
    assert bucket.delete_objects("b", [f"k{i}" for i in range(MAX_DELETE + 5)]) == MAX_DELETE + 5
    assert [len(list(ET.fromstring(c[2]).iter(f"{{{NS}}}Key"))) for c in bucket.calls] == [MAX_DELETE, 5]


def test_common_prefixes_name_the_folders_under_a_prefix() -> None:
    bucket = Bucket(["lake/acme/audit/x", "lake/beta/events/y", "lake/_pooled/events/z", "lake/file"])
    assert bucket.common_prefixes("b", "lake/") == ["_pooled", "acme", "beta"]


def test_list_and_delete_answers_parse_with_or_without_the_namespace() -> None:
    for ns in (True, False):
        page = parse_list_page(_page(["a", "b"], ["p/"], token="tok", ns=ns))
        assert (page.keys, page.prefixes, page.truncated, page.next_token) == (["a", "b"], ["p/"], True, "tok")
    errors = b'<DeleteResult xmlns="' + NS.encode() + b'"><Error><Key>k1</Key><Code>AccessDenied</Code></Error>'
    assert parse_delete_errors(errors + b"</DeleteResult>") == [("k1", "AccessDenied")]
    assert parse_delete_errors(b"") == []


def test_a_refused_object_fails_the_deletion_naming_its_code() -> None:
    class Refusing(Bucket):
        def _request(self, method: str, bucket: str, query=(), body=b""):  # type: ignore[no-untyped-def]
            return 200, b"<DeleteResult><Error><Key>k</Key><Code>AccessDenied</Code></Error></DeleteResult>"

    with pytest.raises(S3Error, match="1 objects not deleted, first 'k': AccessDenied"):
        Refusing([]).delete_objects("b", ["k"])


def test_a_quiet_delete_request_names_each_key() -> None:
    root = ET.fromstring(delete_body(["a/b", "c&d"]))
    assert root.tag == f"{{{NS}}}Delete"
    assert root.findtext(f"{{{NS}}}Quiet") == "true"
    assert [k.text for k in root.iter(f"{{{NS}}}Key")] == ["a/b", "c&d"]


def test_the_query_is_signed_in_canonical_form_and_the_body_by_its_hash() -> None:
    assert canonical_query([("prefix", "lake/a b"), ("list-type", "2"), ("delete", "")]) == (
        "delete=&list-type=2&prefix=lake%2Fa%20b"
    )
    client = S3Client("http://s3.test", "us-east-1", SecretStr("AK"), SecretStr("SK"))
    now = datetime(2026, 1, 1, tzinfo=UTC)
    plain = client.signed_headers("GET", "s3.test", "/b", now)
    listed = client.signed_headers("GET", "s3.test", "/b", now, [("list-type", "2")])
    reordered = client.signed_headers("GET", "s3.test", "/b", now, [("b", "2"), ("a", "1")])
    assert reordered == client.signed_headers("GET", "s3.test", "/b", now, [("a", "1"), ("b", "2")])
    assert plain["authorization"] != listed["authorization"]
    body = delete_body(["k"])
    posted = client.signed_headers("POST", "s3.test", "/b", now, [("delete", "")], hashlib.sha256(body).hexdigest())
    assert posted["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
    assert "SK" not in repr(posted)
