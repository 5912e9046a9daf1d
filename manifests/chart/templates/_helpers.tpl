{{/*
Labels on every object: raygate's own (the same as `raygate manifests`), then Helm's.
*/}}
{{- define "raygate.labels" -}}
app.kubernetes.io/name: raygate
app.kubernetes.io/part-of: raygate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/*
The Pods' labels and the selector of the Service, Deployment and PodDisruptionBudget. Only
raygate's name: a selector cannot change on upgrade.
*/}}
{{- define "raygate.selectorLabels" -}}
app.kubernetes.io/name: raygate
{{- end }}

{{/* The image reference. */}}
{{- define "raygate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Whether raygate maintains its own certificates and CA bundles. */}}
{{- define "raygate.selfManaged" -}}
{{- if and .Values.webhook.enabled (eq .Values.certificates.mode "self-managed") }}true{{ end }}
{{- end }}

{{/* The Secret mounted at /etc/raygate/tls, if the certificate comes from one. */}}
{{- define "raygate.tlsSecret" -}}
{{- if .Values.webhook.enabled }}
{{- if eq .Values.certificates.mode "cert-manager" }}raygate-webhook-tls
{{- else if eq .Values.certificates.mode "files" }}{{ required "certificates.files.secretName is required with certificates.mode=files" .Values.certificates.files.secretName }}
{{- end }}
{{- end }}
{{- end }}

{{/* Annotations asking cert-manager's CA injector for the bundle (cert-manager mode). */}}
{{- define "raygate.caInjection" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/raygate-webhook
{{- end }}
{{- end }}

{{/* Namespaces raygate acts in: opted in, never kube-system or its own. */}}
{{- define "raygate.optedIn" -}}
matchExpressions:
- key: {{ .Values.namespaceLabel.key }}
  operator: In
  values:
  - {{ .Values.namespaceLabel.value | quote }}
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
  - kube-system
  - {{ .Release.Namespace }}
{{- end }}

{{/* Every namespace but kube-system and raygate's own, opted in or not. */}}
{{- define "raygate.allButSystem" -}}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
  - kube-system
  - {{ .Release.Namespace }}
{{- end }}

{{/* The opt-in label's value in object OBJECT ('' when absent), in CEL. */}}
{{- define "raygate.optInValue" -}}
{{- $ := index . 0 }}{{ $o := index . 1 }}{{ $k := $.Values.namespaceLabel.key -}}
(has({{ $o }}.metadata.labels) && '{{ $k }}' in {{ $o }}.metadata.labels ? {{ $o }}.metadata.labels['{{ $k }}'] : '')
{{- end }}

{{/* A webhook's clientConfig: raygate's Service, with the files mode's CA bundle. */}}
{{- define "raygate.clientConfig" -}}
{{- $ := index . 0 }}
clientConfig:
  service:
    name: raygate
    namespace: {{ $.Release.Namespace }}
    path: {{ index . 1 }}
    port: 443
  {{- if and (eq $.Values.certificates.mode "files") $.Values.certificates.files.caBundle }}
  caBundle: {{ $.Values.certificates.files.caBundle | b64enc }}
  {{- end }}
{{- end }}

{{/* Checks of values that templates cannot express as types. */}}
{{- define "raygate.validate" -}}
{{- if not (or .Values.webhook.enabled .Values.reconciler.enabled) }}
{{- fail "webhook.enabled=false and reconciler.enabled=false leave nothing to run" }}
{{- end }}
{{- if not (has .Values.certificates.mode (list "self-managed" "cert-manager" "files")) }}
{{- fail (printf "certificates.mode %q: expected self-managed, cert-manager or files" .Values.certificates.mode) }}
{{- end }}
{{- if not (has .Values.failurePolicy (list "Fail" "Ignore")) }}
{{- fail (printf "failurePolicy %q: expected Fail or Ignore" .Values.failurePolicy) }}
{{- end }}
{{- if not (has .Values.reconciler.default (list "raygate" "kuberay")) }}
{{- fail (printf "reconciler.default %q: expected raygate or kuberay" .Values.reconciler.default) }}
{{- end }}
{{- if not (has .Values.logFormat (list "text" "json")) }}
{{- fail (printf "logFormat %q: expected text or json" .Values.logFormat) }}
{{- end }}
{{- end }}
