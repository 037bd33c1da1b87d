{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "assay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name prefix of every resource: RELEASE-assay unless the release already says assay. */}}
{{- define "assay.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "assay.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "assay.labels" -}}
helm.sh/chart: {{ include "assay.chart" . }}
{{ include "assay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "assay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "assay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "assay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "assay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "assay.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The NATS URL the services use: the bundled server's Service when it is on. */}}
{{- define "assay.natsUrl" -}}
{{- if .Values.nats.bundled.enabled -}}
{{- printf "nats://%s-nats:4222" (include "assay.fullname" .) -}}
{{- else -}}
{{- .Values.nats.url -}}
{{- end -}}
{{- end -}}

{{- define "assay.natsCredentialsPath" -}}
/etc/assay/nats/{{ .Values.nats.credentials.key }}
{{- end -}}

{{/*
Environment shared by coordinator and worker: object-store settings and
credentials (by Secret reference only), OTLP export, extra variables.
Call with a dict: root (the chart context) and service (coordinator|worker).
*/}}
{{- define "assay.commonEnv" -}}
{{- $root := .root -}}
- name: ASSAY_CONFIG
  value: /etc/assay/assay.toml
{{- with $root.Values.store.s3.endpoint }}
- name: AWS_ENDPOINT_URL
  value: {{ . | quote }}
{{- end }}
{{- with $root.Values.store.s3.region }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- if $root.Values.store.s3.allowHttp }}
- name: AWS_ALLOW_HTTP
  value: "true"
{{- end }}
{{- with $root.Values.store.credentials.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $root.Values.store.credentials.accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $root.Values.store.credentials.secretAccessKeyKey }}
{{- end }}
{{- if $root.Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $root.Values.otel.endpoint | quote }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: assay-{{ .service }}
{{- with $root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Container securityContext: non-root, read-only root, no capabilities. */}}
{{- define "assay.restrictedContainerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
