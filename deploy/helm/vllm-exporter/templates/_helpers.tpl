{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "vllm-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name of the chart's objects. */}}
{{- define "vllm-exporter.fullname" -}}
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

{{- define "vllm-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "vllm-exporter.labels" -}}
helm.sh/chart: {{ include "vllm-exporter.chart" . }}
{{ include "vllm-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: vllm-exporter
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the pods the exporter runs in. */}}
{{- define "vllm-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vllm-exporter.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default (printf "v%s" .Chart.AppVersion) .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "vllm-exporter.configMapName" -}}
{{- default (printf "%s-config" (include "vllm-exporter.fullname" .)) .Values.existingConfigMap }}
{{- end }}

{{- define "vllm-exporter.hasConfig" -}}
{{- if or .Values.existingConfigMap .Values.config }}true{{ end }}
{{- end }}

{{/*
The exporter as a native sidecar: one list item for a pod's initContainers
(restartPolicy: Always, Kubernetes >= 1.29). A parent chart that runs vLLM
includes it with (index .Subcharts "vllm-exporter") as the context.
*/}}
{{- define "vllm-exporter.sidecar" -}}
{{- $e := .Values.exporter -}}
- name: vllm-exporter
  image: {{ include "vllm-exporter.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  restartPolicy: Always
  args:
    - --vllm.url={{ default (printf "http://localhost:%v" .Values.vllm.port) $e.vllmURL }}
    - --web.listen-address=:{{ $e.port }}
    - --log.level={{ $e.logLevel }}
    - --log.format={{ $e.logFormat }}
    {{- if include "vllm-exporter.hasConfig" . }}
    - --config.file=/etc/vllm_exporter/config.yml
    {{- end }}
    {{- if $e.sloState.enabled }}
    - --slo.state-file=/var/lib/vllm_exporter/slo-state.json
    {{- end }}
    {{- if not $e.gpu.enabled }}
    - --no-collector.gpu
    {{- end }}
    {{- range $e.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  env:
    - name: GOMEMLIMIT
      value: {{ $e.goMemLimit | quote }}
    {{- if $e.apiKeySecret.name }}
    - name: VLLM_API_KEY
      valueFrom:
        secretKeyRef:
          name: {{ $e.apiKeySecret.name }}
          key: {{ $e.apiKeySecret.key }}
    {{- end }}
    {{- if $e.gpu.enabled }}
    - name: NVIDIA_VISIBLE_DEVICES
      value: {{ $e.gpu.visibleDevices | quote }}
    - name: NVIDIA_DRIVER_CAPABILITIES
      value: utility
    {{- else }}
    - name: NVIDIA_VISIBLE_DEVICES
      value: void
    {{- end }}
    {{- with $e.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: metrics
      containerPort: {{ $e.port }}
      protocol: TCP
  {{- with $e.readinessProbe }}
  readinessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $e.livenessProbe }}
  livenessProbe:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  resources:
    {{- toYaml $e.resources | nindent 4 }}
  securityContext:
    {{- toYaml $e.securityContext | nindent 4 }}
  {{- if or (include "vllm-exporter.hasConfig" .) $e.sloState.enabled $e.extraVolumeMounts }}
  volumeMounts:
    {{- if include "vllm-exporter.hasConfig" . }}
    - name: vllm-exporter-config
      mountPath: /etc/vllm_exporter
      readOnly: true
    {{- end }}
    {{- if $e.sloState.enabled }}
    - name: vllm-exporter-state
      mountPath: /var/lib/vllm_exporter
    {{- end }}
    {{- with $e.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
{{- end }}

{{/* The volumes the sidecar mounts: list items for the pod's volumes. */}}
{{- define "vllm-exporter.volumes" -}}
{{- if include "vllm-exporter.hasConfig" . }}
- name: vllm-exporter-config
  configMap:
    name: {{ include "vllm-exporter.configMapName" . }}
{{- end }}
{{- if .Values.exporter.sloState.enabled }}
- name: vllm-exporter-state
  emptyDir:
    sizeLimit: {{ .Values.exporter.sloState.sizeLimit }}
{{- end }}
{{- end }}

{{/* The rule files the PrometheusRule carries, in name order. */}}
{{- define "vllm-exporter.ruleFiles" -}}
{{- range $path, $_ := .Files.Glob "files/rules/*.yml" }}
{{- if or $.Values.prometheusRule.sloRules (ne (base $path) "slo-rules.yml") }}
{{ $path }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of the pods the monitors select. */}}
{{- define "vllm-exporter.podSelector" -}}
{{- if .Values.podSelector }}
{{- toYaml .Values.podSelector }}
{{- else }}
{{- include "vllm-exporter.selectorLabels" . }}
{{- end }}
{{- end }}
