#!/usr/bin/env bash
# Resolves a Kafka broker (KRaft) and its log4j2 binding from Maven Central into $STACK_DIR/cache/kafka/libs.
source "$(dirname "$0")/common.sh"
POM="$REPO_DIR/deploy/local/maven/kafka/pom.xml"
VERSION=$(sha256sum "$POM" | cut -c1-16)
DEST="$CACHE_DIR/kafka"
ready "$DEST/.ready" "$VERSION" && { echo "kafka: cached"; exit 0; }
fetch_lock "$DEST"
ready "$DEST/.ready" "$VERSION" && { echo "kafka: cached"; exit 0; }
rm -rf "$DEST" && mkdir -p "$DEST/libs"
echo "kafka: resolving jars with Maven"
every 5 "kafka: resolving" mvn_run -f "$POM" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$DEST/libs"
ls "$DEST/libs" | grep -q '^kafka_2.13-' || die "kafka: broker jar missing after resolution"
echo "$VERSION" > "$DEST/.ready"
echo "kafka: $(ls "$DEST/libs" | wc -l) jars"
