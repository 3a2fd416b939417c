{{/* Names, labels, the image of a process, and the environment every process shares. */}}
{{- define "metalake.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 40 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "metalake.labels" -}}
app.kubernetes.io/name: metalake
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one process: (dict "root" $ "name" "api") */}}
{{- define "metalake.selector" -}}
app.kubernetes.io/name: metalake
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "metalake.image" -}}
{{- $i := .root.Values.image -}}
{{- printf "%s/%s%s:%s" $i.registry $i.namePrefix .name (default .root.Chart.AppVersion $i.tag) -}}
{{- end -}}

{{- define "metalake.required" -}}
{{- required "kafka.bootstrapServers is required" .Values.kafka.bootstrapServers -}}
{{- required "trino.host is required" .Values.trino.host -}}
{{- required "lake.root is required" .Values.lake.root -}}
{{- required "api.issuer is required" .Values.api.issuer -}}
{{- end -}}

{{/* The Kafka principal key of a process in kafka.credentialsSecret (the lake worker authenticates as "lake"). */}}
{{- define "metalake.kafkaPrincipal" -}}
{{- if eq .name "lake-worker" -}}lake{{- else -}}{{ .name }}{{- end -}}
{{- end -}}

{{/* The processes that name tenants' Trino schemas (tenants/trino_schemas.py): the schema key's readers. The stream
   job and the access processor get that key alone, not the key-encryption keys. */}}
{{- define "metalake.schemaNamers" -}}
["api", "connect", "outbound", "lake-worker", "stream", "access"]
{{- end -}}

{{/* Secret-backed settings of a process, as files (METALAKE_<SETTING>_FILE) and the one environment variable. */}}
{{- define "metalake.secretEnv" -}}
{{- $v := .root.Values -}}
{{- $principal := include "metalake.kafkaPrincipal" . -}}
- name: METALAKE_MONGO__URI
  valueFrom: {secretKeyRef: {name: {{ $v.mongo.uriSecret.name }}, key: {{ $v.mongo.uriSecret.key }}}}
- name: METALAKE_KAFKA__SASL_USERNAME
  valueFrom: {secretKeyRef: {name: {{ $v.kafka.credentialsSecret }}, key: {{ $principal }}-username}}
- name: METALAKE_KAFKA__SASL_PASSWORD_FILE
  value: /var/run/metalake/kafka/password
{{- if .trino }}
- name: METALAKE_TRINO__PASSWORDS_FILE
  value: /var/run/metalake/trino/passwords.json
{{- end }}
{{- if has .name (list "api" "connect" "outbound" "lake-worker") }}
- name: METALAKE_API__KEY_ENCRYPTION_KEY_FILE
  value: /var/run/metalake/keys/api-kek
- name: METALAKE_SECRETS__KEY_ENCRYPTION_KEY_FILE
  value: /var/run/metalake/keys/secrets-kek
{{- end }}
{{- if has .name (include "metalake.schemaNamers" . | fromJsonArray) }}
{{- /* Tenants' Trino schema names are keyed: every process that names one must hold the same key. */}}
- name: METALAKE_SECRETS__SCHEMA_KEY_FILE
  value: /var/run/metalake/keys/schema-key
{{- end }}
{{- if $v.metrics.tokenSecret }}
- name: METALAKE_TELEMETRY__METRICS_TOKEN_FILE
  value: /var/run/metalake/metrics/token
{{- end }}
{{- if $v.lake.s3.credentialsSecret }}
- name: METALAKE_LAKE__S3__ACCESS_KEY_ID_FILE
  value: /var/run/metalake/s3/access-key-id
- name: METALAKE_LAKE__S3__SECRET_ACCESS_KEY_FILE
  value: /var/run/metalake/s3/secret-access-key
{{- end }}
{{- end -}}

{{/* Volumes of a process: its secrets (each only the keys it needs; 0440: root owns the files, the pod reads them
   through its fsGroup), a writable /tmp, shared claims. */}}
{{- define "metalake.volumes" -}}
{{- $v := .root.Values -}}
{{- $principal := include "metalake.kafkaPrincipal" . -}}
- name: tmp
  emptyDir: {sizeLimit: 1Gi}
- name: kafka
  secret:
    secretName: {{ $v.kafka.credentialsSecret }}
    defaultMode: 0440
    items:
      - {key: {{ $principal }}-password, path: password}
{{- if $v.kafka.caSecret }}
- name: kafka-ca
  secret: {secretName: {{ $v.kafka.caSecret }}, items: [{key: ca.crt, path: ca.crt}]}
{{- end }}
{{- if $v.mongo.caSecret }}
- name: mongo-ca
  secret: {secretName: {{ $v.mongo.caSecret }}, items: [{key: ca.pem, path: ca.pem}]}
{{- end }}
- name: trino-ca
  secret: {secretName: {{ $v.trino.caSecret }}, items: [{key: ca.crt, path: ca.crt}]}
{{- if .trino }}
- name: trino
  secret:
    secretName: {{ $v.trino.passwordsSecret }}
    defaultMode: 0440
    items: [{key: {{ .name }}, path: passwords.json}]
{{- end }}
{{- if has .name (list "api" "connect" "outbound" "lake-worker") }}
- name: keys
  secret: {secretName: {{ $v.keys.secret }}, defaultMode: 0440}
{{- else if has .name (include "metalake.schemaNamers" . | fromJsonArray) }}
- name: keys
  secret: {secretName: {{ $v.keys.secret }}, defaultMode: 0440, items: [{key: schema-key, path: schema-key}]}
{{- end }}
{{- if $v.metrics.tokenSecret }}
- name: metrics-token
  secret: {secretName: {{ $v.metrics.tokenSecret }}, defaultMode: 0440, items: [{key: token, path: token}]}
{{- end }}
{{- if $v.lake.s3.credentialsSecret }}
- name: s3
  secret: {secretName: {{ $v.lake.s3.credentialsSecret }}, defaultMode: 0440}
{{- end }}
{{- if .rules }}
- name: rules
  persistentVolumeClaim: {claimName: {{ $v.trino.rulesClaim }}}
{{- end }}
{{- if .spark }}
- name: checkpoints
  persistentVolumeClaim: {claimName: {{ $v.lake.checkpointClaim }}}
- name: spark-scratch
  emptyDir: {sizeLimit: 20Gi}
{{- end }}
{{- end -}}

{{- define "metalake.volumeMounts" -}}
{{- $v := .root.Values -}}
- {name: tmp, mountPath: /tmp}
- {name: kafka, mountPath: /var/run/metalake/kafka, readOnly: true}
{{- if $v.kafka.caSecret }}
- {name: kafka-ca, mountPath: /var/run/metalake/kafka-ca, readOnly: true}
{{- end }}
{{- if $v.mongo.caSecret }}
- {name: mongo-ca, mountPath: /var/run/metalake/mongo-ca, readOnly: true}
{{- end }}
- {name: trino-ca, mountPath: /var/run/metalake/trino-ca, readOnly: true}
{{- if .trino }}
- {name: trino, mountPath: /var/run/metalake/trino, readOnly: true}
{{- end }}
{{- if has .name (include "metalake.schemaNamers" . | fromJsonArray) }}
- {name: keys, mountPath: /var/run/metalake/keys, readOnly: true}
{{- end }}
{{- if $v.metrics.tokenSecret }}
- {name: metrics-token, mountPath: /var/run/metalake/metrics, readOnly: true}
{{- end }}
{{- if $v.lake.s3.credentialsSecret }}
- {name: s3, mountPath: /var/run/metalake/s3, readOnly: true}
{{- end }}
{{- if .rules }}
- {name: rules, mountPath: /var/lib/metalake/trino-rules}
{{- end }}
{{- if .spark }}
- {name: checkpoints, mountPath: /var/lib/metalake/checkpoints}
- {name: spark-scratch, mountPath: /var/lib/metalake/spark}
{{- end }}
{{- end -}}

{{- define "metalake.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: health}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
livenessProbe:
  httpGet: {path: /healthz, port: health}
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
startupProbe:
  httpGet: {path: /healthz, port: health}
  periodSeconds: 5
  failureThreshold: 60
{{- end -}}

{{/* prometheus.io annotations of a pod whose /metrics is on `port`: (dict "root" $ "port" 8081); none while /metrics
   is off (no metrics.tokenSecret). */}}
{{- define "metalake.scrapeAnnotations" -}}
{{- $m := .root.Values.metrics -}}
{{- if and $m.tokenSecret $m.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}
