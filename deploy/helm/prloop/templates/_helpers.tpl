{{/*
Shared pieces of prloop's objects. The chart renders the objects of
deploy/k8s; cmd/prloop/helm_test.go compares the two.
*/}}

{{/* Labels of an object: its name, part of prloop, and Helm's own. */}}
{{- define "prloop.labels" -}}
{{- with .name }}
app.kubernetes.io/name: {{ . }}
{{- end }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
app.kubernetes.io/part-of: prloop
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end }}

{{/* A service's image: registry/prloop-<service>:tag. */}}
{{- define "prloop.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- with .root.Values.image.registry }}{{ . }}/{{ end }}prloop-{{ .name }}:{{ $tag }}
{{- end }}

{{/* The pod-level security settings of the services but feedback. */}}
{{- define "prloop.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
{{- end }}

{{/* The HTTP port the probes and Prometheus use. */}}
{{- define "prloop.port" -}}
ports:
  - name: http
    containerPort: 8080
    protocol: TCP
{{- end }}

{{/*
The probes: liveness never waits for NATS (or every pod restarts while it is
away); readiness does.
*/}}
{{- define "prloop.probes" -}}
startupProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 2
  failureThreshold: 30
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: 5
  timeoutSeconds: 6
  failureThreshold: 3
{{- end }}

{{/* The environment every service sets itself: its NATS user and the token. */}}
{{- define "prloop.env" -}}
# This service's NATS user (deploy/nats/nats.conf): it may publish only its
# own event types and write only its own buckets.
- name: PRLOOP_NATS_CREDS_FILE
  value: /run/secrets/prloop/nats/{{ .name }}.nk
{{- if eq .name "merger" }}
- name: PRLOOP_GITHUB_LOGIN
  valueFrom:
    configMapKeyRef:
      name: prloop-identity
      key: PRLOOP_GITHUB_LOGIN
{{- end }}
- name: GITHUB_TOKEN
  valueFrom:
    secretKeyRef:
      name: prloop
      key: github-token
      optional: true # GitHub App auth needs none
{{- end }}

{{/* The mounts of the Secrets: the App's key and this service's NATS key. */}}
{{- define "prloop.secretMounts" -}}
- name: github-app
  mountPath: /run/secrets/prloop/github-app
  readOnly: true
- name: nats-key
  mountPath: /run/secrets/prloop/nats
  readOnly: true
{{- end }}

{{- define "prloop.secretVolumes" -}}
- name: github-app
  secret:
    secretName: prloop
    optional: true
    defaultMode: 0440
    items:
      - key: github-app-private-key.pem
        path: private-key.pem
# Only this service's key from the Secret prloop-nats-keys (prloop nats-keys).
- name: nats-key
  secret:
    secretName: prloop-nats-keys
    defaultMode: 0440
    items:
      - key: {{ .name }}.nk
        path: {{ .name }}.nk
{{- end }}

{{/* The pod template's metadata: its labels and Prometheus' annotations. */}}
{{- define "prloop.podMeta" -}}
labels:
  app.kubernetes.io/name: {{ .name }}
  app.kubernetes.io/component: service
annotations:
  prometheus.io/scrape: "true"
  prometheus.io/port: "8080"
  prometheus.io/path: /metrics
  {{- include "prloop.configChecksum" .root | nindent 2 }}
{{- end }}

{{/*
The pod template's annotations beyond prometheus: the ConfigMaps' checksum,
so helm upgrade restarts the services when a setting changes (they read
their environment at start).
*/}}
{{- define "prloop.configChecksum" -}}
checksum/config: {{ include (print .Template.BasePath "/config.yaml") . | sha256sum }}
{{- end }}
