{{- /*
One controller's ServiceAccount, webhook CA Secret, Deployment, PodDisruptionBudget and
Services, as kustomize/controllers/<key>/{serviceaccount,webhook-ca-secret,deployment,pdb,
services}.yaml ship them (tests/helm checks that with default values they render the same,
Helm's labels aside). Called as (list $ key) by templates/controllers/<key>.yaml.
*/ -}}
{{- define "kruise-rs.controller" -}}
{{- $root := index . 0 -}}
{{- $key := index . 1 -}}
{{- $c := index (include "kruise-rs.catalog" $root | fromYaml) $key -}}
{{- $v := index $root.Values $key -}}
{{- $m := $root.Values.manager -}}
{{- $ns := include "kruise-rs.namespace" $root -}}
{{- $ports := splitList " " (include "kruise-rs.ports" (list $root $key)) -}}
{{- $metricsPort := index $ports 0 -}}
{{- $webhookPort := index $ports 1 -}}
{{- $replicas := $m.replicas -}}
{{- if and (hasKey $v "replicas") (not (kindIs "invalid" $v.replicas)) -}}{{- $replicas = $v.replicas -}}{{- end -}}
{{- $gates := list -}}
{{- with $c.gates }}{{ $gates = append $gates . }}{{ end -}}
{{- with $root.Values.featureGates }}{{ $gates = append $gates . }}{{ end -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $c.name }}
  namespace: {{ $ns }}
  labels:
    app.kubernetes.io/name: {{ $c.name }}
    app.kubernetes.io/part-of: kruise-rs
    {{- include "kruise-rs.helmLabels" $root | nindent 4 }}
  {{- include "kruise-rs.serviceAccountAnnotations" $root | nindent 2 }}
---
# The webhook CA and serving certificate every replica shares (KRUISE_WEBHOOK_CA_SECRET).
# Shipped empty: the first replica to start fills it, the others load it, rotations
# update it. An upgrade leaves the data alone (it is in neither manifest Helm compares).
apiVersion: v1
kind: Secret
metadata:
  name: {{ $c.webhook }}-ca
  namespace: {{ $ns }}
  labels:
    app.kubernetes.io/name: {{ $c.name }}
    app.kubernetes.io/part-of: kruise-rs
    app.kubernetes.io/component: webhook-ca
    {{- include "kruise-rs.helmLabels" $root | nindent 4 }}
type: Opaque
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $c.name }}
  namespace: {{ $ns }}
  labels:
    app.kubernetes.io/name: {{ $c.name }}
    app.kubernetes.io/part-of: kruise-rs
    app.kubernetes.io/component: controller
    {{- include "kruise-rs.helmLabels" $root | nindent 4 }}
spec:
  # Both replicas keep their caches warm and serve admission; the Lease holder
  # reconciles. A rollout never takes the webhook down to zero ready replicas.
  replicas: {{ $replicas }}
  revisionHistoryLimit: 3
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ $c.name }}
      app.kubernetes.io/component: controller
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ $c.name }}
        app.kubernetes.io/part-of: kruise-rs
        app.kubernetes.io/component: controller
        {{- include "kruise-rs.helmLabels" $root | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        # For Prometheus' kubernetes_sd `role: pod` scrape configs; with the Prometheus
        # Operator use serviceMonitor.enabled instead.
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ $metricsPort | quote }}
        prometheus.io/path: /metrics
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ $c.name }}
      {{- include "kruise-rs.imagePullSecrets" $root | nindent 6 }}
      {{- if $m.hostNetwork }}
      # Every controller on a node then shares one network: each has its own ports.
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      {{- end }}
      {{- with ($v.priorityClassName | default $m.priorityClassName) }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      affinity:
      {{- if $v.affinity }}
        {{- toYaml $v.affinity | nindent 8 }}
      {{- else }}
        {{- with $m.nodeAffinity }}
        nodeAffinity:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              topologyKey: kubernetes.io/hostname
              labelSelector:
                matchLabels:
                  app.kubernetes.io/name: {{ $c.name }}
                  app.kubernetes.io/component: controller
      {{- end }}
      {{- with ($v.nodeSelector | default $m.nodeSelector) }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with ($v.tolerations | default $m.tolerations) }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      terminationGracePeriodSeconds: 30
      {{- with include "kruise-rs.webhookCertSecret" (list $root $c.webhook) }}
      volumes:
      - name: webhook-cert
        secret:
          secretName: {{ . }}
      {{- end }}
      containers:
      - name: controller
        image: {{ include "kruise-rs.image" (list $root $v $c.binary) }}
        imagePullPolicy: {{ $root.Values.image.pullPolicy }}
        env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: KRUISE_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        {{- if (hasKey $c "leader" | ternary $c.leader true) }}
        - name: KRUISE_LEADER_ELECT
          value: "true"
        {{- end }}
        - name: KRUISE_ADMIN_ADDR
          value: 0.0.0.0:{{ $metricsPort }}
        - name: KRUISE_WEBHOOK_ADDR
          value: 0.0.0.0:{{ $webhookPort }}
        - name: KRUISE_WEBHOOK_SERVICE
          value: $(KRUISE_NAMESPACE)/{{ $c.webhook }}
        {{- with include "kruise-rs.webhookCertSecret" (list $root $c.webhook) }}
        # The certificate of a Secret (certManager or webhookCertificate), mounted below.
        - name: KRUISE_WEBHOOK_CERT_DIR
          value: {{ include "kruise-rs.webhookCertDir" $root }}
        {{- else }}
        - name: KRUISE_WEBHOOK_CA_SECRET
          value: {{ $c.webhook }}-ca
        {{- end }}
        # The timeout of the webhooks below (webhookConfiguration.timeoutSeconds): the
        # controller re-registers them at every start, and without this would put its
        # house default back. Rendered always, default included, as kustomize ships it
        # ("10"): both install paths then pin the timeout their webhook configurations
        # carry, the drift test covers this line, and a kustomize user finds the knob.
        - name: KRUISE_WEBHOOK_TIMEOUT_SECONDS
          value: {{ $root.Values.webhookConfiguration.timeoutSeconds | quote }}
        {{- with $c.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- if and (eq $key "sidecarset") $v.notUpdateLiveStatus }}
        - name: KRUISE_SIDECARSET_NOTUPDATE_LIVE_STATUS
          value: "true"
        {{- end }}
        {{- if and (eq $key "workloadspread") $v.eagerDeletionCost }}
        - name: KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST
          value: "true"
        {{- end }}
        {{- if $c.gates }}
        - name: KRUISE_FEATURE_GATES
          value: {{ join "," $gates | quote }}
        {{- end }}
        - name: KRUISE_LOG_FORMAT
          value: {{ include "kruise-rs.logFormat" (list $m.loggingFormat) }}
        - name: RUST_LOG
          value: {{ include "kruise-rs.rustLog" (list $m.log.level) }}
        {{- if and (not $c.gates) $gates }}
        - name: KRUISE_FEATURE_GATES
          value: {{ join "," $gates | quote }}
        {{- end }}
        {{- with $m.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $v.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with include "kruise-rs.webhookCertSecret" (list $root $c.webhook) }}
        volumeMounts:
        - name: webhook-cert
          mountPath: {{ include "kruise-rs.webhookCertDir" $root }}
          readOnly: true
        {{- end }}
        ports:
        - name: metrics
          containerPort: {{ $metricsPort }}
        - name: webhook
          containerPort: {{ $webhookPort }}
        livenessProbe:
          httpGet:
            path: /healthz
            port: metrics
          initialDelaySeconds: 5
          periodSeconds: 10
          failureThreshold: 3
        readinessProbe:
          # Ready once every cache has synced and the webhook serves TLS.
          httpGet:
            path: /readyz
            port: metrics
          periodSeconds: 5
          failureThreshold: 3
        {{- with $v.resources }}
        resources:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          privileged: false
          capabilities:
            drop: [ALL]
{{- if ge (int $replicas) 2 }}
---
# One replica always serves admission (the webhooks fail closed) during node drains; the
# other may be evicted. Not rendered for a single replica (it would block every drain).
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $c.name }}
  namespace: {{ $ns }}
  labels:
    app.kubernetes.io/name: {{ $c.name }}
    app.kubernetes.io/part-of: kruise-rs
    {{- include "kruise-rs.helmLabels" $root | nindent 4 }}
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ $c.name }}
      app.kubernetes.io/component: controller
{{- end }}
---
# /metrics of every replica, ready or not (a replica stuck before ready is the one to
# look at); the ServiceMonitor selects it by its labels.
apiVersion: v1
kind: Service
metadata:
  name: {{ $c.name }}-metrics
  namespace: {{ $ns }}
  labels:
    app.kubernetes.io/name: {{ $c.name }}
    app.kubernetes.io/part-of: kruise-rs
    app.kubernetes.io/component: metrics
    {{- include "kruise-rs.helmLabels" $root | nindent 4 }}
spec:
  selector:
    app.kubernetes.io/name: {{ $c.name }}
    app.kubernetes.io/component: controller
  publishNotReadyAddresses: true
  ports:
  - name: metrics
    port: 8080
    targetPort: metrics
---
# What the apiserver calls (KRUISE_WEBHOOK_SERVICE): ready replicas only.
apiVersion: v1
kind: Service
metadata:
  name: {{ $c.webhook }}
  namespace: {{ $ns }}
  labels:
    app.kubernetes.io/name: {{ $c.name }}
    app.kubernetes.io/part-of: kruise-rs
    app.kubernetes.io/component: webhook
    {{- include "kruise-rs.helmLabels" $root | nindent 4 }}
spec:
  selector:
    app.kubernetes.io/name: {{ $c.name }}
    app.kubernetes.io/component: controller
  ports:
  - name: webhook
    port: 443
    targetPort: webhook
{{- end -}}
