{{/* The node config's text: the value, or the chart's copy of the base's file */}}
{{- define "orh.nodeConfig" -}}
{{- if .Values.nodeConfig }}{{ .Values.nodeConfig }}{{ else }}{{ .Files.Get "files/oci-rdma-hook.conf" }}{{ end -}}
{{- end -}}

{{/* The ConfigMap's name: a hash of the text in it, as kustomize's configMapGenerator names it */}}
{{- define "orh.configMapName" -}}
oci-rdma-hook-node-config-{{ include "orh.nodeConfig" . | sha256sum | trunc 10 }}
{{- end -}}

{{- define "orh.mode" -}}
{{- if not (has .Values.mode (list "handler" "nri")) -}}
{{- fail (printf "values.yaml: mode: %q is neither handler nor nri" .Values.mode) -}}
{{- end -}}
{{- .Values.mode -}}
{{- end -}}

{{/* The scheduling fields both DaemonSets share */}}
{{- define "orh.scheduling" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
