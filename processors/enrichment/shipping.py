"""metalake's own Python packages as one zip for a cluster's executors, as ``spark-submit --py-files`` ships code.

The executors import the job's row functions (``processors.enrichment.rows``) and what they use (``metalake``,
``catalog``, ``tenants``, ``control``); on a local master they run in this interpreter, on a cluster in the workers'
Python, which holds the dependencies (``metalake[spark]``) but must run the driver's version of metalake's own code,
not whatever is installed there. The zip's name carries its contents' hash: a worker never runs a stale copy cached by
name.
"""

from __future__ import annotations

import hashlib
import importlib.util
import zipfile
from pathlib import Path

# The import roots the executors' code comes from (every package of the distribution but the API, connectors and ops,
# which run nowhere near Spark).
PACKAGES = ("metalake", "catalog", "tenants", "control", "processors")
# zip's own epoch: fixed timestamps make the archive's bytes a function of the sources alone.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is not importable here: cannot ship it to the executors")
    return Path(next(iter(spec.submodule_search_locations)))


def _files() -> list[tuple[str, Path]]:
    out = []
    for name in PACKAGES:
        root = _package_dir(name)
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.append((f"{name}/{path.relative_to(root).as_posix()}", path))
    return out


def code_archive(folder: Path) -> Path:
    """The zip of :data:`PACKAGES` in ``folder`` (made when its contents changed; an existing one is reused)."""
    files = _files()
    digest = hashlib.sha256()
    for arcname, path in files:
        digest.update(arcname.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    target = folder / f"metalake-code-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for arcname, path in files:
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    tmp.replace(target)
    return target
