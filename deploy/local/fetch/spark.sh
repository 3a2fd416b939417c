#!/usr/bin/env bash
# Resolves the Delta Lake and Kafka-source jars for Spark into $STACK_DIR/cache/spark/jars, minus any jar that
# pyspark already ships (two versions of one library on the classpath fail in odd ways).
source "$(dirname "$0")/common.sh"
POM="$REPO_DIR/deploy/local/maven/spark/pom.xml"
PYTHON="${PYTHON:-python3}"
PYSPARK_JARS=$("$PYTHON" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))') \
  || die "spark: pyspark is not importable with $PYTHON; run the bootstrap first"
VERSION="$(sha256sum "$POM" | cut -c1-16)-$(basename "$(ls "$PYSPARK_JARS"/spark-core_*.jar)")"
DEST="$CACHE_DIR/spark"
ready "$DEST/.ready" "$VERSION" && { echo "spark: cached"; exit 0; }
fetch_lock "$DEST"
ready "$DEST/.ready" "$VERSION" && { echo "spark: cached"; exit 0; }
rm -rf "$DEST" && mkdir -p "$DEST/jars"
echo "spark: resolving Delta and Kafka connector jars with Maven"
every 5 "spark: resolving" mvn_run -f "$POM" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$DEST/jars"
removed=0
for jar in "$DEST"/jars/*.jar; do
  artifact=$(basename "$jar" | sed -E 's/-[0-9][^-]*(-[A-Za-z0-9.]+)?\.jar$//')
  if ls "$PYSPARK_JARS/$artifact"-[0-9]*.jar >/dev/null 2>&1; then rm "$jar"; removed=$((removed + 1)); fi
done
ls "$DEST/jars" | grep -q '^delta-spark_' || die "spark: delta-spark jar missing after resolution"
echo "$VERSION" > "$DEST/.ready"
echo "spark: $(ls "$DEST/jars" | wc -l) jars kept, $removed duplicates of pyspark's removed"
