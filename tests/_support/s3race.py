"""One Spark driver appending to a Delta table on S3, for the single-writer race (tests/integration/
test_s3_single_writer.py): ``python -m s3race TABLE_URI WRITER APPENDS BARRIER_DIR [--no-guard]``.

The lake (``METALAKE_LAKE__ROOT``, the S3 settings) comes from the environment. The driver starts its Spark session,
writes ``<writer>.ready`` in BARRIER_DIR and waits for ``go`` there, so the drivers' appends overlap; then it appends
APPENDS one-row commits, each holding the table's writer lease (``single_writer``) unless ``--no-guard``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from metalake.mongo import mongo_client
from ops.settings import get_settings
from processors.enrichment.single_writer import WriterLeases
from processors.lake.sparkio import lake_session
from tenants.naming import CONTROL_DATABASE


def main(argv: list[str]) -> int:
    table, writer, appends, barrier = argv[0], argv[1], int(argv[2]), Path(argv[3])
    guard = "--no-guard" not in argv
    settings = get_settings()
    spark = lake_session(settings, f"s3race-{writer}")
    mongo = mongo_client(settings)
    leases = WriterLeases.in_database(mongo[CONTROL_DATABASE], settings.lake.writer_lease)
    rows = [spark.createDataFrame([(writer, i)], "writer string, i int") for i in range(appends)]
    (barrier / f"{writer}.ready").write_text("ready")
    deadline = time.monotonic() + 300
    while not (barrier / "go").exists():
        if time.monotonic() > deadline:
            return 3
        time.sleep(0.05)
    for frame in rows:
        if guard:
            with leases.holding([table]) as fence:
                fence.check()
                frame.write.format("delta").mode("append").save(table)
        else:
            frame.write.format("delta").mode("append").save(table)
    mongo.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
