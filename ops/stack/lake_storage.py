"""Where Trino's ``lake`` catalog finds the lake: the local folder (its native local file system) or the S3 bucket
(its native S3 file system), with the file metastore inside the lake root either way (``_trino_metastore``: a
folder no tenant id can name). The S3 keys never enter the catalog file: it names environment variables that only
Trino's process gets (Trino substitutes ``${ENV:...}`` when it loads the catalog)."""

from __future__ import annotations

from metalake.lake_settings import LakeS3Settings
from metalake.lake_uri import S3Path
from ops.settings import Settings

METASTORE_DIR = "_trino_metastore"
ACCESS_KEY_VAR = "METALAKE_TRINO_S3_ACCESS_KEY"
SECRET_KEY_VAR = "METALAKE_TRINO_S3_SECRET_KEY"  # noqa: S105 - a variable's name, not a secret


def trino_file_system(settings: Settings, s3: LakeS3Settings) -> list[str]:
    """The catalog's file-system and metastore lines for the configured lake root (creating the local metastore
    folder on a local lake), with ``s3`` the store to read (the local stack's: ``seaweedfs.stack_s3``). A local
    lake's catalog also reads ``s3://`` locations when the store has an endpoint (tenants registered with a lake
    root on S3; the local stack always names its SeaweedFS)."""
    root = settings.lake_root
    if isinstance(root, S3Path):
        lines = [f"hive.metastore.catalog.dir={(root / METASTORE_DIR).uri('s3')}"]
    else:
        (root / METASTORE_DIR).mkdir(parents=True, exist_ok=True)
        lines = [
            f"hive.metastore.catalog.dir=local:///{METASTORE_DIR}",
            "fs.native-local.enabled=true",
            f"local.location={root}",
        ]
        if s3.endpoint is None:
            return lines
    lines += [
        "fs.native-s3.enabled=true",
        f"s3.region={s3.region}",
        f"s3.path-style-access={'true' if s3.path_style else 'false'}",
    ]
    if s3.endpoint:
        lines.append(f"s3.endpoint={s3.endpoint}")
    if s3.access_key_id is not None and s3.secret_access_key is not None:
        lines += [f"s3.aws-access-key=${{ENV:{ACCESS_KEY_VAR}}}", f"s3.aws-secret-key=${{ENV:{SECRET_KEY_VAR}}}"]
    return lines


def trino_file_system_env(settings: Settings, s3: LakeS3Settings) -> dict[str, str]:
    """The variables the catalog's ``${ENV:...}`` lines name (empty when it reads no S3 store)."""
    if s3.access_key_id is None or s3.secret_access_key is None or not (settings.lake_on_s3 or s3.endpoint):
        return {}
    return {
        ACCESS_KEY_VAR: s3.access_key_id.get_secret_value(),
        SECRET_KEY_VAR: s3.secret_access_key.get_secret_value(),
    }
