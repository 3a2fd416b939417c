#!/usr/bin/env bash
# Resolves Spark's s3a jars (hadoop-aws matching pyspark's Hadoop, its AWS SDK bundle) into
# $STACK_DIR/cache/spark-s3/jars, for a lake on S3. Refuses if pyspark's Hadoop is not the one the pom names.
source "$(dirname "$0")/common.sh"
POM="$REPO_DIR/deploy/local/maven/spark-s3/pom.xml"
PYTHON="${PYTHON:-python3}"
PYSPARK_JARS=$("$PYTHON" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))') \
  || die "spark-s3: pyspark is not importable with $PYTHON; run the bootstrap first"
HADOOP=$(basename "$(ls "$PYSPARK_JARS"/hadoop-client-api-*.jar)" .jar | sed 's/^hadoop-client-api-//')
grep -q "<artifactId>hadoop-aws</artifactId><version>$HADOOP</version>" "$POM" \
  || die "spark-s3: pyspark ships Hadoop $HADOOP; set hadoop-aws to $HADOOP in $POM"
VERSION="$(sha256sum "$POM" | cut -c1-16)-$HADOOP"
DEST="$CACHE_DIR/spark-s3"
ready "$DEST/.ready" "$VERSION" && { echo "spark-s3: cached"; exit 0; }
rm -rf "$DEST" && mkdir -p "$DEST/jars"
echo "spark-s3: resolving hadoop-aws $HADOOP and the AWS SDK bundle with Maven (about 690 MB the first time)"
mvn_run -f "$POM" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$DEST/jars"
ls "$DEST/jars" | grep -q '^hadoop-aws-' || die "spark-s3: hadoop-aws jar missing after resolution"
echo "$VERSION" > "$DEST/.ready"
echo "spark-s3: $(ls "$DEST/jars" | wc -l) jars"
