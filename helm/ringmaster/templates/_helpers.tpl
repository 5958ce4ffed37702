{{/* Chart name, at most 63 characters (a DNS label). */}}
{{- define "ringmaster.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Base of object names: the release name, prefixed to the chart name unless it holds it. */}}
{{- define "ringmaster.fullname" -}}
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

{{/* helm.sh/chart: name-version, "+" not allowed in label values. */}}
{{- define "ringmaster.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "ringmaster.labels" -}}
helm.sh/chart: {{ include "ringmaster.chart" . }}
{{ include "ringmaster.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ringmaster
{{- end -}}

{{/* Labels that select the release's pods (never change after install). */}}
{{- define "ringmaster.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ringmaster.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Per-component labels: include with (dict "ctx" $ "component" "agent"). */}}
{{- define "ringmaster.componentLabels" -}}
{{ include "ringmaster.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}
{{- define "ringmaster.componentSelector" -}}
{{ include "ringmaster.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ringmaster.coordinatorName" -}}
{{- printf "%s-coordinator" (include "ringmaster.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "ringmaster.agentName" -}}
{{- printf "%s-agent" (include "ringmaster.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* host:port the agents and the ranks reach the coordinator at (the Service's DNS name). */}}
{{- define "ringmaster.coordinatorAddress" -}}
{{- printf "%s.%s.svc:%d" (include "ringmaster.coordinatorName" .) .Release.Namespace (int .Values.coordinator.port) -}}
{{- end -}}

{{- define "ringmaster.coordinatorImage" -}}
{{- $i := .Values.images.coordinator -}}
{{- printf "%s:%s" $i.repository (default .Chart.AppVersion $i.tag) -}}
{{- end -}}
{{/* An agent pool's image: include with (dict "ctx" $ "flavor" "cuda13"|"cuda12"|"cpu"). The CPU
     image (no CUDA, Gloo only) is images.cpuAgent; the CUDA ones are images.agent, tagged
     <appVersion>-<flavor> unless images.agent.tag is set. */}}
{{- define "ringmaster.agentImage" -}}
{{- if eq .flavor "cpu" -}}
{{- $i := .ctx.Values.images.cpuAgent -}}
{{- printf "%s:%s" $i.repository (default (printf "%s-cpu" .ctx.Chart.AppVersion) $i.tag) -}}
{{- else -}}
{{- $i := .ctx.Values.images.agent -}}
{{- printf "%s:%s" $i.repository (default (printf "%s-%s" .ctx.Chart.AppVersion .flavor) $i.tag) -}}
{{- end -}}
{{- end -}}

{{/* Secret holding the join and submit tokens and the TLS material. */}}
{{- define "ringmaster.credentialsSecret" -}}
{{- default (printf "%s-credentials" (include "ringmaster.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{/* Secret with the CLI's client certificate, ca.crt and the submit token (generated TLS only). */}}
{{- define "ringmaster.clientSecret" -}}
{{- printf "%s-client" (include "ringmaster.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* True ("true") when the chart generates the TLS material: no existing Secret, no PEM values. */}}
{{- define "ringmaster.generatesTls" -}}
{{- if not (or .Values.tls.existingSecret .Values.tls.cert .Values.tls.key .Values.tls.ca) -}}true{{- end -}}
{{- end -}}

{{/* Security context of every container: no root, no privilege, nothing writable but volumes. */}}
{{- define "ringmaster.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}
