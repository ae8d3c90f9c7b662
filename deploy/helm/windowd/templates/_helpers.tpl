{{/* The release's name for every object (at most 63 characters). */}}
{{- define "windowd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "windowd.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "windowd.labels" -}}
{{ include "windowd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The image of windowd and of its plan init container. */}}
{{- define "windowd.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Where the secrets' password files are mounted. */}}
{{- define "windowd.secretsDir" -}}/etc/windowd/secrets{{- end -}}

{{/*
The windowd configuration: the config value with state.dir, http.listen,
shutdown_grace and the password files set by the chart.
*/}}
{{- define "windowd.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $state := default (dict) (get $cfg "state") -}}
{{- $_ := set $state "dir" .Values.persistence.mountPath -}}
{{- $_ = set $cfg "state" $state -}}
{{- $http := default (dict) (get $cfg "http") -}}
{{- $_ = set $http "listen" (printf "0.0.0.0:%d" (int .Values.http.port)) -}}
{{- $_ = set $cfg "http" $http -}}
{{- $_ = set $cfg "shutdown_grace" (printf "%ds" (int .Values.shutdownGraceSeconds)) -}}
{{- if .Values.secrets.sasl.secretName -}}
{{- $kafka := get $cfg "kafka" -}}
{{- $sasl := default (dict) (get $kafka "sasl") -}}
{{- $_ = unset $sasl "password" -}}
{{- $_ = set $sasl "password_file" (printf "%s/sasl-password" (include "windowd.secretsDir" .)) -}}
{{- $_ = set $kafka "sasl" $sasl -}}
{{- end -}}
{{- if .Values.secrets.schemaRegistry.secretName -}}
{{- $sr := required "secrets.schemaRegistry.secretName needs config.schema_registry" (get $cfg "schema_registry") -}}
{{- $basic := default (dict) (get $sr "basic_auth") -}}
{{- $_ = unset $basic "password" -}}
{{- $_ = set $basic "password_file" (printf "%s/schema-registry-password" (include "windowd.secretsDir" .)) -}}
{{- $_ = set $sr "basic_auth" $basic -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* resources.limits.memory in MiB (Mi or Gi only). */}}
{{- define "windowd.memoryLimitMiB" -}}
{{- $m := required "resources.limits.memory is required (GOMEMLIMIT is derived from it)" .Values.resources.limits.memory | toString -}}
{{- if hasSuffix "Gi" $m -}}
{{- mul (trimSuffix "Gi" $m | int) 1024 -}}
{{- else if hasSuffix "Mi" $m -}}
{{- trimSuffix "Mi" $m | int -}}
{{- else -}}
{{- fail (printf "resources.limits.memory %q: write it in Mi or Gi" $m) -}}
{{- end -}}
{{- end -}}

{{/*
GOMEMLIMIT (README, Memory): the container's memory limit less Pebble's C
memory (64 MiB per pipeline), less memoryHeadroomPercent for the rest of the
process (stacks, cgo allocations).
*/}}
{{- define "windowd.gomemlimit" -}}
{{- $limit := include "windowd.memoryLimitMiB" . | int -}}
{{- $pebble := mul 64 (len .Values.config.pipelines) -}}
{{- $go := div (mul (sub $limit $pebble) (sub 100 (int .Values.memoryHeadroomPercent))) 100 -}}
{{- if lt $go 128 -}}
{{- fail (printf "resources.limits.memory %s leaves %d MiB for the Go heap after Pebble's %d MiB: raise it" .Values.resources.limits.memory $go $pebble) -}}
{{- end -}}
{{- printf "%dMiB" $go -}}
{{- end -}}

{{- define "windowd.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The state volume, the config and the secrets' password files. */}}
{{- define "windowd.volumeMounts" -}}
- name: state
  mountPath: {{ .Values.persistence.mountPath }}
- name: config
  mountPath: /etc/windowd/config.yaml
  subPath: config.yaml
  readOnly: true
{{- if .Values.secrets.sasl.secretName }}
- name: sasl-password
  mountPath: {{ include "windowd.secretsDir" . }}/sasl-password
  subPath: {{ .Values.secrets.sasl.key }}
  readOnly: true
{{- end }}
{{- if .Values.secrets.schemaRegistry.secretName }}
- name: schema-registry-password
  mountPath: {{ include "windowd.secretsDir" . }}/schema-registry-password
  subPath: {{ .Values.secrets.schemaRegistry.key }}
  readOnly: true
{{- end }}
{{- end -}}
