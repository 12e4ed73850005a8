{{/*
The sidecar as named templates for a component's own chart, writing the pod `confgate inject` writes
(tests/commands/chart.rs renders tests/fixtures/component-chart and compares its pod with inject's).
A component chart lists this chart as a dependency (its values are then .Values.confgate) and
writes, in its pod template's spec:

  initContainers:
    {{- include "confgate.sidecar" (dict "volume" "config" "values" .Values.confgate) | nindent 8 }}
  containers:
    - name: component
      volumeMounts:
        - name: confgate-active          # the promoted copy, where the component reads its config
          mountPath: /etc/component/config
          readOnly: true
  volumes:
    - name: config                       # the ConfigMap, mounted by confgate alone
      configMap:
        name: component-config
        optional: true                   # a missing ConfigMap is held and reported, not a stuck pod
    {{- include "confgate.volumes" (dict "values" .Values.confgate) | nindent 8 }}

and, unless sidecar.podReport is false, the Role its pods' ServiceAccount needs to report:

  {{ include "confgate.reporterRBAC" (dict "namespace" .Release.Namespace "serviceAccount" "default" "configMaps" (list "component-config")) }}

What `inject` also works out from the pod and these templates do not: another container on port 9797
(set CONFGATE_LISTEN in sidecar.env), a hostNetwork pod, a signal reload's shareProcessNamespace, a
checker's volume. For those pods use `confgate inject` (or as Helm's post-renderer).
*/}}

{{/*
The confgate native sidecar (an init container with restartPolicy Always): one list item for
initContainers. Arguments: "volume", the ConfigMap volume it gates; "values", this chart's values.
*/}}
{{- define "confgate.sidecar" -}}
{{- $v := .values -}}
{{- if not .volume }}{{ fail "confgate.sidecar: pass the ConfigMap volume to gate as \"volume\"" }}{{ end -}}
- name: confgate
  image: {{ include "confgate.image" $v.image }}
  imagePullPolicy: {{ $v.image.pullPolicy | quote }}
  restartPolicy: Always
  args:
    - run
    - --watch
    - /etc/confgate/incoming
    - --promote-to
    - /etc/confgate/active
    - --annotations
    - /etc/podinfo/annotations
    - --log-format
    - json
    {{- range $v.sidecar.args }}
    - {{ . | quote }}
    {{- end }}
  {{- if or $v.sidecar.podReport $v.sidecar.env }}
  env:
    {{- if $v.sidecar.podReport }}
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: POD_UID
      valueFrom:
        fieldRef:
          fieldPath: metadata.uid
    {{- end }}
    {{- with $v.sidecar.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  ports:
    - name: confgate
      containerPort: 9797
  startupProbe:
    exec:
      command: [/confgate, probe, startup]
    periodSeconds: 2
    timeoutSeconds: 2
    failureThreshold: 150
  readinessProbe:
    exec:
      command: [/confgate, probe, ready]
    periodSeconds: 5
    timeoutSeconds: 2
  livenessProbe:
    exec:
      command: [/confgate, probe, live]
    periodSeconds: 10
    timeoutSeconds: 2
    failureThreshold: 3
  resources:
    {{- toYaml $v.sidecar.resources | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    - name: {{ .volume | quote }}
      mountPath: /etc/confgate/incoming
      readOnly: true
    - name: confgate-active
      mountPath: /etc/confgate/active
    - name: confgate-podinfo
      mountPath: /etc/podinfo
      readOnly: true
    {{- if $v.sidecar.podReport }}
    - name: confgate-token
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
    {{- end }}
{{- end -}}

{{/*
The volumes the sidecar adds: the promoted copy (memory-backed, shared with the component), the
pod's annotations, and the token mounted into confgate's container alone. Argument "values".
*/}}
{{- define "confgate.volumes" -}}
- name: confgate-active
  emptyDir:
    medium: Memory
    sizeLimit: 4Mi
- name: confgate-podinfo
  downwardAPI:
    items:
      - path: annotations
        fieldRef:
          fieldPath: metadata.annotations
{{- if .values.sidecar.podReport }}
- name: confgate-token
  projected:
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                fieldPath: metadata.namespace
{{- end }}
{{- end -}}

{{/*
Role confgate-reporter and its binding to the pods' own ServiceAccount (never changed): Events and
pods/status, kept to the pod's own object by the own-pod policy (ownPodPolicy), and the known-good
records of the gated ConfigMaps. Arguments: "namespace", "serviceAccount", "configMaps" (a list).
*/}}
{{- define "confgate.reporterRBAC" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: confgate-reporter
  namespace: {{ .namespace | quote }}
rules:
  - apiGroups: [events.k8s.io]
    resources: [events]
    verbs: [create, patch]
  - apiGroups: [""]
    resources: [pods/status]
    verbs: [patch]
  # Grants nothing: marks the holder for the own-pod policy.
  - apiGroups: [confgate.io]
    resources: [pods]
    verbs: [report-own-pod-only]
  {{- with .configMaps }}
  - apiGroups: [""]
    resources: [configmaps]
    resourceNames:
      {{- range . }}
      - {{ printf "%s.confgate-known-good" . | quote }}
      {{- end }}
    verbs: [get, patch]
  # A known-good record's creation cannot be narrowed by name.
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [create]
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: confgate-reporter
  namespace: {{ .namespace | quote }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: confgate-reporter
subjects:
  - kind: ServiceAccount
    name: {{ .serviceAccount | default "default" | quote }}
    namespace: {{ .namespace | quote }}
{{- end -}}
