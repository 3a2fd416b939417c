"""``reconcile`` then ``drop`` of two tenants in one Spark driver, for tests/integration/test_s3_lake_ops.py:
``python -m s3lakeops RECONCILE_TENANT DROP_TENANT OUT_JSON``. The lake (``METALAKE_LAKE__ROOT``, the S3 settings)
comes from the environment. Each runs through its command's report function (``reconcile_report``, ``drop_report``:
directory, leases, object store), sharing one session instead of starting a JVM each as the CLI does. The reports
go to OUT_JSON: Delta prints VACUUM summaries on stdout."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ops.settings import get_settings
from processors.lake.drop import drop_report
from processors.lake.reconcile import reconcile_report
from processors.lake.sparkio import lake_session


def main(argv: list[str]) -> int:
    reconciled, dropped, out = argv[0], argv[1], Path(argv[2])
    settings = get_settings()
    spark = lake_session(settings, "s3lakeops")
    try:
        reports = {
            "reconcile": reconcile_report(settings, reconciled, dry_run=False, window_days=30, spark=spark),
            "drop": drop_report(settings, dropped, spark=spark),
        }
    finally:
        spark.stop()
    out.write_text(json.dumps(reports, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
