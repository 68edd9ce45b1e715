{{- define "karpenter-capi.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "karpenter-capi.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "karpenter-capi.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "karpenter-capi.serviceAccountName" -}}
{{- default (include "karpenter-capi.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "karpenter-capi.workload" -}}
{{- if has .Values.components (list "all" "workload") }}true{{ end -}}
{{- end -}}

{{- define "karpenter-capi.management" -}}
{{- if has .Values.components (list "all" "management") }}true{{ end -}}
{{- end -}}

{{- define "karpenter-capi.managementRules" }}
# The management identity: only the scalable resources, their scale subresource and Machines.
rules:
  - apiGroups: [cluster.x-k8s.io, machine.openshift.io]
    resources: [machinedeployments, machinesets, machines]
    verbs: [get, list, watch, patch]
  - apiGroups: [cluster.x-k8s.io, machine.openshift.io]
    resources: [machinedeployments/scale, machinesets/scale]
    verbs: [get, update, patch]
  # Events on a scalable resource whose annotations are malformed (InvalidScalableResource).
  - apiGroups: ["", events.k8s.io]
    resources: [events]
    verbs: [create, patch]
  {{- if .Values.management.readInfrastructureTemplates }}
  # Infrastructure machine templates: status.capacity for scale from zero (read only).
  - apiGroups:
    {{- range .Values.management.infrastructureGroups }}
      - {{ . | quote }}
    {{- end }}
    resources: ["*"]
    verbs: [get, list, watch]
  {{- end }}
{{- end }}
