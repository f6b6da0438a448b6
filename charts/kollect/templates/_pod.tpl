{{/*
The pod parts both layouts share: the single pod (hooks.replicas 1) and the split one (a hooks
Deployment and an exporter Deployment). Each takes (dict "root" $ "split" bool ...).
*/}}

{{/* True (non-empty) when the hooks run in their own Deployment, apart from the exporter. */}}
{{- define "kollect.split" -}}
{{- if gt (int .Values.hooks.replicas) 1 }}true{{ end }}
{{- end }}

{{/* Selector labels of one component of the split layout: (dict "root" $ "component" "hooks"). */}}
{{- define "kollect.componentSelectorLabels" -}}
{{ include "kollect.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The exporter's address for the hooks in the split layout: its own Service. */}}
{{- define "kollect.exporterServiceName" -}}
{{- printf "%s-exporter" (include "kollect.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Exporter pods with a standby (exporter.replicas > 1, split layout only): non-empty when so. */}}
{{- define "kollect.exporterStandby" -}}
{{- if and (include "kollect.split" .) (gt (int .Values.exporter.replicas) 1) }}true{{ end }}
{{- end }}

{{/* The headless Service listing every exporter pod, ready or not, for KOLLECT_EXPORTER_PEERS. */}}
{{- define "kollect.exporterPeersName" -}}
{{- printf "%s-exporter-peers" (include "kollect.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Pod spec up to the containers: service account, pull secrets, security context. */}}
{{- define "kollect.podSpecHead" -}}
{{- $r := .root -}}
serviceAccountName: {{ include "kollect.serviceAccountName" $r }}
{{- with $r.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $r.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if .exporter }}
# The exporter drains pending exports on SIGTERM for up to 25s.
{{- end }}
terminationGracePeriodSeconds: 30
securityContext:
  {{- include "kollect.podSecurityContext" $r | nindent 2 }}
{{- end }}

{{/* The hooks container. */}}
{{- define "kollect.hooksContainer" -}}
{{- $r := .root -}}
- name: hooks
  image: {{ include "kollect.image" $r }}
  imagePullPolicy: {{ $r.Values.image.pullPolicy }}
  args: ["node", "dist/server/main-hooks.js"]
  ports:
    - name: http
      containerPort: 8080
      protocol: TCP
  env:
    - name: PORT
      value: "8080"
    {{- if .split }}
    - name: KOLLECT_EXPORTER_URL
      value: {{ printf "http://%s:8081" (include "kollect.exporterServiceName" $r) | quote }}
    {{- end }}
    {{- if include "kollect.exporterStandby" $r }}
    # Reports go to every exporter pod, standbys included, so a takeover has the state.
    - name: KOLLECT_EXPORTER_PEERS
      value: {{ printf "%s.%s.svc:8081" (include "kollect.exporterPeersName" $r) $r.Release.Namespace | quote }}
    {{- end }}
    # Target syncs run in child processes, each with a capped heap: keep
    # (workers + 1) × workerMemoryMb plus ~300 MiB inside the hooks memory limit.
    - name: KOLLECT_EXTRACT_WORKERS
      value: {{ $r.Values.extraction.workers | quote }}
    - name: KOLLECT_WORKER_MEMORY_MB
      value: {{ $r.Values.extraction.workerMemoryMb | quote }}
    - name: KOLLECT_HOOK_BODY_LIMIT
      value: {{ $r.Values.extraction.bodyLimitBytes | int64 | quote }}
    {{- include "kollect.commonEnv" $r | trim | nindent 4 }}
  {{- if .split }}
  # /readyz also checks that the exporter answers through its Service.
  {{- else }}
  # /readyz also checks that the exporter answers on loopback.
  {{- end }}
  readinessProbe:
    httpGet:
      path: /readyz
      port: http
    periodSeconds: 5
    timeoutSeconds: 3
    failureThreshold: 3
  livenessProbe:
    httpGet:
      path: /healthz
      port: http
    initialDelaySeconds: 10
    periodSeconds: 10
    timeoutSeconds: 3
    failureThreshold: 3
  resources:
    {{- toYaml $r.Values.resources.hooks | nindent 4 }}
  securityContext:
    {{- include "kollect.containerSecurityContext" $r | nindent 4 }}
  volumeMounts:
    - name: tmp
      mountPath: /tmp
    {{- if $r.Values.hookToken.enabled }}
    - name: hook-token
      mountPath: {{ include "kollect.hookTokenDir" $r }}
      readOnly: true
    {{- end }}
    {{- with $r.Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* The exporter container: on loopback in the pod, or on the pod IP (with the token) when split. */}}
{{- define "kollect.exporterContainer" -}}
{{- $r := .root -}}
- name: exporter
  image: {{ include "kollect.image" $r }}
  imagePullPolicy: {{ $r.Values.image.pullPolicy }}
  args: ["node", "dist/server/main-exporter.js"]
  {{- if .split }}
  ports:
    - name: exporter
      containerPort: 8081
      protocol: TCP
  {{- end }}
  env:
    - name: KOLLECT_EXPORTER_PORT
      value: "8081"
    {{- if .split }}
    # Reached by the hooks pods through its Service: the token is required off loopback.
    - name: KOLLECT_EXPORTER_HOST
      value: "0.0.0.0"
    {{- end }}
    - name: KOLLECT_EXPORTER_ITEM_BUDGET_BYTES
      value: {{ $r.Values.exporter.itemBudgetBytes | int64 | quote }}
    - name: KOLLECT_EXPORTER_NAMESPACE_SHARE
      value: {{ $r.Values.exporter.namespaceShare | quote }}
    {{- if include "kollect.exporterStandby" $r }}
    - name: KOLLECT_LEADER_ELECTION
      value: "true"
    {{- end }}
    # The Lease the rbac.yaml Role names, and the pod as its holder (KOLLECT_LEADER_ELECTION).
    - name: KOLLECT_LEASE_NAME
      value: {{ printf "%s-exporter" (include "kollect.fullname" $r) | quote }}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: POD_NAMESPACE
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    - name: NODE_OPTIONS
      value: {{ printf "--max-semi-space-size=32 --max-old-space-size=%d" ($r.Values.exporter.heapMb | int) | quote }}
    {{- with include "kollect.extraCaEnv" $r }}
    {{- . | trim | nindent 4 }}
    {{- end }}
    {{- include "kollect.commonEnv" $r | trim | nindent 4 }}
  {{- if .split }}
  readinessProbe:
    httpGet:
      path: /healthz
      port: exporter
    periodSeconds: 5
    timeoutSeconds: 3
    failureThreshold: 3
  livenessProbe:
    httpGet:
      path: /healthz
      port: exporter
  {{- else }}
  # Loopback only: the kubelet's httpGet/tcpSocket probes target the pod IP and cannot
  # reach it, so the probe runs inside the container: bash (essential in the image's Debian
  # base) sends GET /healthz over its /dev/tcp and reads the status line, where a second Node.js
  # process cost ~60 MiB and a tenth of a second or more on every probe.
  livenessProbe:
    exec:
      command:
        - /bin/bash
        - -c
        - 'exec 3<>/dev/tcp/127.0.0.1/8081 && printf "GET /healthz HTTP/1.0\r\n\r\n" >&3 && read -r -t 4 status <&3 && [[ $status == "HTTP/1.1 200 "* ]]'
  {{- end }}
    initialDelaySeconds: 10
    periodSeconds: 20
    timeoutSeconds: 5
    failureThreshold: 3
  resources:
    {{- toYaml $r.Values.resources.exporter | nindent 4 }}
  securityContext:
    {{- include "kollect.containerSecurityContext" $r | nindent 4 }}
  volumeMounts:
    - name: data
      mountPath: /data
    - name: tmp
      mountPath: /tmp
    {{- with include "kollect.extraCaMount" $r }}
    {{- . | trim | nindent 4 }}
    {{- end }}
    {{- if $r.Values.hookToken.enabled }}
    - name: hook-token
      mountPath: {{ include "kollect.hookTokenDir" $r }}
      readOnly: true
    {{- end }}
    {{- with $r.Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* Volumes and scheduling: (dict "root" $ "exporter" bool) — /data only where the exporter runs. */}}
{{- define "kollect.podSpecTail" -}}
{{- $r := .root -}}
volumes:
  {{- if .exporter }}
  - name: data
    {{- if $r.Values.persistence.enabled }}
    persistentVolumeClaim:
      claimName: {{ include "kollect.fullname" $r }}-data
    {{- else }}
    emptyDir: {}
    {{- end }}
  {{- end }}
  - name: tmp
    emptyDir:
      sizeLimit: 256Mi
  {{- if $r.Values.hookToken.enabled }}
  - name: hook-token
    secret:
      secretName: {{ include "kollect.hookTokenSecretName" $r }}
      defaultMode: 0440
      items:
        - key: token
          path: token
  {{- end }}
  {{- if .exporter }}
  {{- with include "kollect.extraCaVolume" $r }}
  {{- . | trim | nindent 2 }}
  {{- end }}
  {{- end }}
  {{- with $r.Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $r.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $r.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $r.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
