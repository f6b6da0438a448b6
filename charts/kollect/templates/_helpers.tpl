{{/* Chart name, overridable. */}}
{{- define "kollect.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Resource name prefix: the release name when it already contains the chart name (release
"kollect" → "kollect", Service "kollect-hooks"), else <release>-<chart>.
*/}}
{{- define "kollect.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kollect.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kollect.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kollect.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kollect.labels" -}}
helm.sh/chart: {{ include "kollect.chart" . }}
{{ include "kollect.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kollect
{{- end }}

{{/* The hooks Service, which the CompositeControllers call. */}}
{{- define "kollect.serviceName" -}}
{{- printf "%s-hooks" (include "kollect.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kollect.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kollect.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the hook token (key `token`): existingSecret, else <fullname>-hook-token. */}}
{{- define "kollect.hookTokenSecretName" -}}
{{- if .Values.hookToken.existingSecret }}
{{- .Values.hookToken.existingSecret }}
{{- else }}
{{- printf "%s-hook-token" (include "kollect.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* [registry/]repository@digest, else [registry/]repository:tag (tag: appVersion by default). */}}
{{- define "kollect.image" -}}
{{- $i := .Values.image }}
{{- if not $i.repository }}
{{- fail "image.repository is not set: no Kollect image is published for this chart yet. Build and push one (docker build -t <registry>/kollect:<tag> .) and install with --set image.repository=<registry>/kollect (and image.tag or image.digest), or use the chart a release publishes (oci://ghcr.io/<owner>/charts/kollect), which defaults to its image" }}
{{- end }}
{{- $repo := $i.repository }}
{{- with $i.registry }}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}
{{- end }}
{{- if $i.digest }}
{{- printf "%s@%s" $repo $i.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion $i.tag) }}
{{- end }}
{{- end }}

{{/* One ServiceMonitor endpoint's scrape settings: interval, timeout, honorLabels and relabelings. */}}
{{- define "kollect.scrapeSettings" -}}
{{- $m := .Values.serviceMonitor -}}
interval: {{ $m.interval }}
scrapeTimeout: {{ $m.scrapeTimeout }}
{{- if $m.honorLabels }}
honorLabels: true
{{- end }}
{{- with $m.relabelings }}
relabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $m.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
extraCACerts, for the containers that open sinks (exporter, hub): the bundle's mount, and the
settings that add it to the system's CAs. Node.js (pg, NATS, Kafka, the AWS SDK, fetch) reads
NODE_EXTRA_CA_CERTS at start; git reads GIT_SSL_CAINFO, which Debian's libcurl-gnutls adds to
/etc/ssl/certs. A DSN's sslrootcert stays refused (a sink's settings never name a local file).
*/}}
{{- define "kollect.extraCaEnv" -}}
{{- if .Values.extraCACerts.secretName }}
- name: NODE_EXTRA_CA_CERTS
  value: /etc/kollect/extra-ca/ca.crt
- name: GIT_SSL_CAINFO
  value: /etc/kollect/extra-ca/ca.crt
{{- end }}
{{- end }}

{{- define "kollect.extraCaMount" -}}
{{- if .Values.extraCACerts.secretName }}
- name: extra-ca
  mountPath: /etc/kollect/extra-ca
  readOnly: true
{{- end }}
{{- end }}

{{- define "kollect.extraCaVolume" -}}
{{- with .Values.extraCACerts }}
{{- if .secretName }}
- name: extra-ca
  secret:
    secretName: {{ .secretName }}
    defaultMode: 0444
    items:
      - key: {{ .key }}
        path: ca.crt
{{- end }}
{{- end }}
{{- end }}

{{/* Where both containers find the hook token file. */}}
{{- define "kollect.hookTokenDir" -}}
/var/run/secrets/kollect/hook-token
{{- end }}

{{/* Settings both containers share. */}}
{{- define "kollect.commonEnv" -}}
{{- if .Values.hookToken.enabled }}
- name: KOLLECT_HOOK_TOKEN_FILE
  value: {{ include "kollect.hookTokenDir" . }}/token
{{- else }}
{{- /* Without a token the processes refuse to start unless running open is explicit. */}}
- name: KOLLECT_HOOK_AUTH
  value: "none"
{{- end }}
{{- if .Values.cluster }}
- name: KOLLECT_CLUSTER
  value: {{ .Values.cluster | quote }}
{{- end }}
- name: KOLLECT_ALLOW_PRIVATE_SINKS
  value: {{ .Values.allowPrivateSinks | quote }}
- name: KOLLECT_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- range .Values.extraEnv }}
{{- if hasKey . "value" }}
{{- /* Quoted: `--set extraEnv[0].value=5000` would otherwise render a number. */}}
- name: {{ .name }}
  value: {{ .value | toString | quote }}
{{- else }}
- {{ toYaml . | nindent 2 | trim }}
{{- end }}
{{- end }}
{{- end }}

{{/* Container securityContext: no privilege, read-only root filesystem. */}}
{{- define "kollect.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* Pod securityContext of every Kollect pod: a fixed non-root user, RuntimeDefault seccomp. */}}
{{- define "kollect.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The hub's selector labels. Its own app.kubernetes.io/name: the single pod's Deployment, hooks
Service and NetworkPolicy select by name + instance alone, and must never reach the hub pod.
*/}}
{{- define "kollect.hubSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-hub" (include "kollect.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: hub
{{- end }}

{{- define "kollect.hubLabels" -}}
helm.sh/chart: {{ include "kollect.chart" . }}
{{ include "kollect.hubSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kollect
{{- end }}

{{- /* An alert's for, labels and the start of its annotations; args: prometheusRule, the alert's values, runbook URL. */}}
{{- define "kollect.alertMeta" -}}
{{- $p := index . 0 }}{{ $alert := index . 1 -}}
for: {{ $alert.for }}
labels:
  severity: {{ $alert.severity }}
  {{- with $p.additionalLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  runbook_url: {{ index . 2 }}
{{- end }}
