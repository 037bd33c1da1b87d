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
{{- if and .Values.nats.bundled.enabled (gt (int .Values.nats.bundled.replicas) 1) -}}
{{- /* Every server of the bundled cluster, so a client reconnects to a survivor. */ -}}
{{- $name := include "assay.fullname" . -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.nats.bundled.replicas) -}}
{{- $urls = append $urls (printf "nats://%s-nats-%d.%s-nats-cluster:4222" $name $i $name) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else if .Values.nats.bundled.enabled -}}
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

{{/*
The subject prefix as a stream and bucket name part, as the services derive it
(assay_common::fleet::Subjects::name_token): a prefix of lowercase letters,
digits and `-` is upper-cased; any other also gets 8 hex digits of its sha256,
so two such prefixes stay apart.
*/}}
{{- define "assay.natsNameToken" -}}
{{- $p := .Values.nats.subjectPrefix -}}
{{- $upper := regexReplaceAll "[^A-Za-z0-9-]" $p "_" | upper -}}
{{- if regexMatch "^[a-z0-9-]+$" $p -}}
{{- $upper -}}
{{- else -}}
{{- printf "%s_%s" $upper (sha256sum $p | trunc 8) -}}
{{- end -}}
{{- end -}}

{{/* The NATS user of a role (call with dict root, role): RELEASE's `assay-coordinator`, … unless set. */}}
{{- define "assay.natsUser" -}}
{{- $auth := index .root.Values.nats.auth .role -}}
{{- default (printf "%s-%s" (include "assay.natsNameToken" .root | lower) .role) $auth.user -}}
{{- end -}}

{{/* The bundled server's environment variable holding a role's password or nkey (call with dict root, role). */}}
{{- define "assay.natsSecretVar" -}}
{{- $token := regexReplaceAll "[^A-Za-z0-9]" (include "assay.natsNameToken" .root) "_" | upper -}}
{{- printf "%s_%s_%s" $token (upper .role) (ternary "NKEY" "PASSWORD" (eq .root.Values.nats.auth.mode "nkey")) -}}
{{- end -}}

{{/*
The fleet's least-privilege NATS permissions and users, exactly as
`assay nats-permissions` prints them (deploy/nats/permissions.conf for the
default prefix; helm/tests checks the two agree). What each role may do and why:
SECURITY.md and common/src/nats_permissions.rs.
*/}}
{{- define "assay.natsPermissions" -}}
{{- $p := .Values.nats.subjectPrefix -}}
{{- $t := include "assay.natsNameToken" . -}}
{{- $jobs := printf "%s_JOBS" $t -}}
{{- $results := printf "%s_RESULTS" $t -}}
{{- $workers := printf "%s-workers" (lower $t) -}}
{{- $coord := printf "%s-coordinator" (lower $t) -}}
{{- $bucket := printf "%s_PROOFS" $t -}}
{{- $kv := printf "KV_%s" $bucket -}}
{{- $api := "$JS.API" -}}
{{- $kvRead := list (printf "%s.DIRECT.GET.%s.>" $api $kv) (printf "%s.STREAM.MSG.GET.%s" $api $kv) (printf "%s.CONSUMER.CREATE.%s" $api $kv) (printf "%s.CONSUMER.CREATE.%s.>" $api $kv) (printf "%s.CONSUMER.INFO.%s.>" $api $kv) (printf "$JS.FC.%s.>" $kv) -}}
{{- $coordPub := list (printf "%s.jobs.>" $p) (printf "%s.progress.>" $p) (printf "$KV.%s.>" $bucket) (printf "%s.INFO" $api) -}}
{{- range (list $jobs $results $kv) -}}
{{- $coordPub = append $coordPub (printf "%s.STREAM.INFO.%s" $api .) -}}
{{- $coordPub = append $coordPub (printf "%s.STREAM.CREATE.%s" $api .) -}}
{{- end -}}
{{- $coordPub = concat $coordPub (list (printf "%s.STREAM.PURGE.%s" $api $jobs) (printf "%s.CONSUMER.INFO.%s.%s" $api $jobs $workers) (printf "%s.CONSUMER.CREATE.%s.%s.>" $api $jobs $workers) (printf "%s.CONSUMER.INFO.%s.%s" $api $results $coord) (printf "%s.CONSUMER.CREATE.%s.%s.>" $api $results $coord) (printf "%s.CONSUMER.MSG.NEXT.%s.%s" $api $results $coord) (printf "$JS.ACK.%s.%s.>" $results $coord)) $kvRead (list (printf "%s.CONSUMER.DELETE.%s.>" $api $kv)) -}}
{{- $workerPub := list (printf "%s.results.>" $p) (printf "%s.STREAM.INFO.%s" $api $jobs) (printf "%s.STREAM.INFO.%s" $api $results) (printf "%s.CONSUMER.INFO.%s.%s" $api $jobs $workers) (printf "%s.CONSUMER.MSG.NEXT.%s.%s" $api $jobs $workers) (printf "$JS.ACK.%s.%s.>" $jobs $workers) -}}
{{- $submitterPub := concat (list (printf "%s.submit" $p) (printf "%s.cancel" $p) (printf "%s.STREAM.INFO.%s" $api $kv)) $kvRead -}}
{{- $operatorPub := concat (list (printf "%s.cancel" $p) (printf "$KV.%s.fleet.halt" $bucket) (printf "%s.STREAM.INFO.%s" $api $kv)) $kvRead -}}
{{- $inbox := printf "_INBOX_%s" (lower $t) -}}
{{- $roles := list (dict "role" "coordinator" "publish" $coordPub "subscribe" (list (printf "%s.submit" $p) (printf "%s.cancel" $p) (printf "%s_coordinator.>" $inbox)) "responses" true) (dict "role" "worker" "publish" $workerPub "subscribe" (list (printf "%s_worker.>" $inbox)) "responses" false) (dict "role" "submitter" "publish" $submitterPub "subscribe" (list (printf "%s.progress.>" $p) (printf "%s_submitter.>" $inbox)) "responses" false) (dict "role" "operator" "publish" $operatorPub "subscribe" (list (printf "%s_operator.>" $inbox)) "responses" false) -}}
{{- $nkey := eq .Values.nats.auth.mode "nkey" -}}
# NATS permissions of the Assay fleet with subject prefix {{ $p | quote }}: what each of the
# coordinator, the workers, the submitters (the CLI) and the operators (halt, resume,
# status, cancel) may publish and subscribe to.
# Generated by `assay nats-permissions --subject-prefix {{ $p }}{{ if $nkey }} --auth nkey{{ end }}`; SECURITY.md says what
# each role may do and why. The users' secrets are environment variables of the server.
{{ range $roles }}
ASSAY_{{ upper .role }}_PERMISSIONS = {
  publish = {
    allow = [
{{- range .publish }}
      {{ . | quote }}
{{- end }}
    ]
  }
  subscribe = {
    allow = [
{{- range .subscribe }}
      {{ . | quote }}
{{- end }}
    ]
  }
{{- if .responses }}
  allow_responses = true
{{- end }}
}
{{ end }}
authorization {
  users = [
{{- range $roles }}
{{- $var := include "assay.natsSecretVar" (dict "root" $ "role" .role) }}
    { {{ if $nkey }}nkey: ${{ $var }}{{ else }}user: {{ include "assay.natsUser" (dict "root" $ "role" .role) | quote }}, password: ${{ $var }}{{ end }}, permissions: $ASSAY_{{ upper .role }}_PERMISSIONS }
{{- end }}
  ]
}
{{ end -}}

{{/*
How a service authenticates to NATS and secures the connection, as ASSAY_NATS_*
variables (they override the config file's [nats] keys). Call with dict root, role.
*/}}
{{- define "assay.natsEnv" -}}
{{- $v := .root.Values.nats -}}
{{- if $v.auth.enabled }}
{{- $auth := index $v.auth .role }}
{{- $secret := required (printf "nats.auth.%s.existingSecret is required when nats.auth.enabled is true (hint: a Secret holding the %s's NATS %s)" .role .role (ternary "nkey seed" "password" (eq $v.auth.mode "nkey"))) $auth.existingSecret }}
{{- if eq $v.auth.mode "nkey" }}
- name: ASSAY_NATS_NKEY_SEED_FILE
  value: {{ printf "/etc/assay/nats-auth/%s" $auth.key | quote }}
{{- else }}
- name: ASSAY_NATS_USER
  value: {{ include "assay.natsUser" . | quote }}
- name: ASSAY_NATS_PASSWORD_FILE
  value: {{ printf "/etc/assay/nats-auth/%s" $auth.key | quote }}
{{- end }}
{{- end }}
{{- if $v.tls.enabled }}
{{- $secret := required "nats.tls.existingSecret is required when nats.tls.enabled is true (hint: a Secret holding the CA that signed the NATS server's certificate)" $v.tls.existingSecret }}
- name: ASSAY_NATS_REQUIRE_TLS
  value: "true"
- name: ASSAY_NATS_TLS_CA
  value: {{ printf "/etc/assay/nats-tls/%s" $v.tls.caKey | quote }}
{{- if $v.tls.certKey }}
- name: ASSAY_NATS_TLS_CERT
  value: {{ printf "/etc/assay/nats-tls/%s" $v.tls.certKey | quote }}
- name: ASSAY_NATS_TLS_KEY
  value: {{ printf "/etc/assay/nats-tls/%s" $v.tls.keyKey | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The volume mounts of assay.natsEnv's files. Call with dict root, role. */}}
{{- define "assay.natsVolumeMounts" -}}
{{- $v := .root.Values.nats -}}
{{- if $v.auth.enabled }}
- name: nats-auth
  mountPath: /etc/assay/nats-auth
  readOnly: true
{{- end }}
{{- if $v.tls.enabled }}
- name: nats-tls
  mountPath: /etc/assay/nats-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* The volumes of assay.natsEnv's files: only the keys it names. Call with dict root, role. */}}
{{- define "assay.natsVolumes" -}}
{{- $v := .root.Values.nats -}}
{{- if $v.auth.enabled }}
{{- $auth := index $v.auth .role }}
- name: nats-auth
  secret:
    secretName: {{ $auth.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ $auth.key }}
        path: {{ $auth.key }}
{{- end }}
{{- if $v.tls.enabled }}
- name: nats-tls
  secret:
    secretName: {{ $v.tls.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ $v.tls.caKey }}
        path: {{ $v.tls.caKey }}
      {{- if $v.tls.certKey }}
      - key: {{ $v.tls.certKey }}
        path: {{ $v.tls.certKey }}
      - key: {{ $v.tls.keyKey }}
        path: {{ $v.tls.keyKey }}
      {{- end }}
{{- end }}
{{- end -}}

{{/*
Required pod anti-affinity across nodes for the pods of one component, so the loss of a node
takes at most one of them. Argument: dict "root" . "component" NAME.
*/}}
{{- define "assay.spreadAcrossNodes" -}}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "assay.selectorLabels" .root | nindent 10 }}
          app.kubernetes.io/component: {{ .component }}
{{- end -}}
