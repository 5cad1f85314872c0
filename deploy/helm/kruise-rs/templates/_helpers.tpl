{{- /*
What every template shares. The static facts of each controller (object names, binary,
the CRDs it uses) are in kruise-rs.catalog; what a user may change is in values.yaml.
*/ -}}

{{- /* The controllers' namespace (OpenKruise's installation.namespace). */ -}}
{{- define "kruise-rs.namespace" -}}
{{- .Values.installation.namespace -}}
{{- end -}}

{{- /* Where the node agents run and where imagepulljob-ctl copies pull secrets for them:
fixed, as the agent's admission policies and imagepulljob-ctl's authorizer name it. */ -}}
{{- define "kruise-rs.daemonNamespace" -}}
kruise-daemon-config
{{- end -}}

{{- /* Helm's own labels, added after the kustomize ones (tests/helm strips these four when it
compares the chart with kustomize/overlays). Never in a selector: selectors are immutable. */ -}}
{{- define "kruise-rs.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- /*
Per controller (the key is its values key and its kustomize/controllers/<key> directory):
  name     Deployment, ServiceAccount, Lease, PDB and Role name
  binary   the binary and image name (kruise-rs/<binary>)
  webhook  the webhook Service; its CA Secret is <webhook>-ca
  crds     the CRDs it reads or writes (every apps.kruise.io / policy.kruise.io resource of
           its ClusterRole: tests/helm checks it), installed with it unless crds.installAll
  index    a small number, unique, for host ports under manager.hostNetwork
  leader   whether it holds a Lease (protection-ctl is a webhook only)
  gates    gates it always runs with, before featureGates
  env      extra fixed environment
*/ -}}
{{- define "kruise-rs.catalog" -}}
broadcastjob:
  name: broadcastjob-controller
  binary: broadcastjob-ctl
  webhook: broadcastjob-webhook
  crds: [broadcastjobs.apps.kruise.io]
  index: 1
cloneset:
  name: cloneset-controller
  binary: cloneset-ctl
  webhook: cloneset-webhook
  crds: [clonesets.apps.kruise.io, podunavailablebudgets.policy.kruise.io]
  predownload: true
  index: 2
cronjob:
  name: advancedcronjob-controller
  binary: cronjob-ctl
  webhook: advancedcronjob-webhook
  crds: [advancedcronjobs.apps.kruise.io, broadcastjobs.apps.kruise.io, imagelistpulljobs.apps.kruise.io]
  index: 3
crr:
  name: containerrecreaterequest-controller
  binary: crr-ctl
  webhook: containerrecreaterequest-webhook
  crds: [containerrecreaterequests.apps.kruise.io]
  index: 4
daemonset:
  name: daemonset-controller
  binary: daemonset-ctl
  webhook: daemonset-webhook
  crds: [daemonsets.apps.kruise.io, podunavailablebudgets.policy.kruise.io]
  index: 5
imagepulljob:
  name: imagepulljob-controller
  binary: imagepulljob-ctl
  webhook: imagepulljob-webhook
  crds: [imagepulljobs.apps.kruise.io, imagelistpulljobs.apps.kruise.io, nodeimages.apps.kruise.io]
  index: 6
  env:
  - name: KRUISE_DAEMON_CONFIG_NS
    value: kruise-daemon-config
launchpriority:
  name: container-launch-priority-controller
  binary: launchpriority-ctl
  webhook: container-launch-priority-webhook
  crds: []
  index: 7
persistentpodstate:
  name: persistentpodstate-controller
  binary: persistentpodstate-ctl
  webhook: persistentpodstate-webhook
  crds: [persistentpodstates.apps.kruise.io, statefulsets.apps.kruise.io]
  index: 8
podprobemarker:
  name: podprobemarker-controller
  binary: podprobemarker-ctl
  webhook: podprobemarker-webhook
  crds: [podprobemarkers.apps.kruise.io, nodepodprobes.apps.kruise.io]
  index: 17
ephemeraljob:
  name: ephemeraljob-controller
  binary: ephemeraljob-ctl
  webhook: ephemeraljob-webhook
  crds: [ephemeraljobs.apps.kruise.io]
  index: 18
protection:
  name: deletionprotection-controller
  binary: protection-ctl
  webhook: deletionprotection-webhook
  crds: []
  index: 9
  leader: false
pub:
  name: podunavailablebudget-controller
  binary: pub-ctl
  webhook: podunavailablebudget-webhook
  crds: [podunavailablebudgets.policy.kruise.io, clonesets.apps.kruise.io, statefulsets.apps.kruise.io]
  index: 10
resourcedistribution:
  name: resourcedistribution-controller
  binary: resourcedistribution-ctl
  webhook: resourcedistribution-webhook
  crds: [resourcedistributions.apps.kruise.io]
  index: 11
  # Upstream's default for this gate is off (its webhook then refuses every
  # ResourceDistribution); deploying this controller is asking for the feature.
  gates: ResourceDistributionGate=true
sidecarset:
  name: sidecarset-controller
  binary: sidecarset-ctl
  webhook: sidecarset-webhook
  crds: [sidecarsets.apps.kruise.io]
  index: 12
statefulset:
  name: statefulset-controller
  binary: statefulset-ctl
  webhook: statefulset-webhook
  crds: [statefulsets.apps.kruise.io, podunavailablebudgets.policy.kruise.io]
  predownload: true
  index: 13
uniteddeployment:
  name: uniteddeployment-controller
  binary: uniteddeployment-ctl
  webhook: uniteddeployment-webhook
  crds: [uniteddeployments.apps.kruise.io, clonesets.apps.kruise.io, statefulsets.apps.kruise.io]
  index: 14
workloadspread:
  name: workloadspread-controller
  binary: workloadspread-ctl
  webhook: workloadspread-webhook
  crds: [workloadspreads.apps.kruise.io, clonesets.apps.kruise.io, statefulsets.apps.kruise.io]
  index: 15
{{- end -}}

{{- /* The node agent's CRDs (it reads its node's NodeImage and ContainerRecreateRequests). */ -}}
{{- /* The CRDs the enabled controllers and the node agent use (a YAML list): what the chart
installs (crds.yaml, unless crds.installAll) and what the uninstall guard checks. */ -}}
{{- define "kruise-rs.usedCrds" -}}
{{- $wanted := dict }}
{{- $catalog := include "kruise-rs.catalog" . | fromYaml }}
{{- range $key, $c := $catalog }}
{{- if include "kruise-rs.enabled" (list $ $key) }}
{{- range $c.crds }}{{ $_ := set $wanted . true }}{{ end }}
{{- if and $c.predownload (include "kruise-rs.gateOn" (list $ "PreDownloadImageForInPlaceUpdate")) }}
{{- $_ := set $wanted "imagepulljobs.apps.kruise.io" true }}
{{- end }}
{{- end }}
{{- end }}
{{- if include "kruise-rs.daemonEnabled" . }}
{{- range (include "kruise-rs.daemonCrds" . | fromYamlArray) }}{{ $_ := set $wanted . true }}{{ end }}
{{- end }}
{{- keys $wanted | sortAlpha | toJson }}
{{- end -}}

{{- define "kruise-rs.daemonCrds" -}}
[nodeimages.apps.kruise.io, nodepodprobes.apps.kruise.io, containerrecreaterequests.apps.kruise.io]
{{- end -}}

{{- /* "true" when controller <key> is enabled (list $ key), else empty. */ -}}
{{- define "kruise-rs.enabled" -}}
{{- $root := index . 0 -}}
{{- $values := index $root.Values (index . 1) -}}
{{- if and $values $values.enabled -}}true{{- end -}}
{{- end -}}

{{- /* "true" when the node agent is deployed: daemon.enabled, and not turned off by
OpenKruise's way (featureGates KruiseDaemon=false). */ -}}
{{- define "kruise-rs.daemonEnabled" -}}
{{- if and .Values.daemon.enabled (not (include "kruise-rs.gateOff" (list . "KruiseDaemon"))) -}}true{{- end -}}
{{- end -}}

{{- /* The featureGates items, trimmed, as a list. */ -}}
{{- define "kruise-rs.gateItems" -}}
{{- $items := list -}}
{{- range (splitList "," (.Values.featureGates | default "")) -}}
{{- $item := trim . -}}
{{- if $item -}}{{- $items = append $items (regexReplaceAll "\\s*=\\s*" $item "=") -}}{{- end -}}
{{- end -}}
{{- toJson $items -}}
{{- end -}}

{{- /* "true" when featureGates sets gate <name> to true (list $ name); the last setting wins,
as the binaries parse it. */ -}}
{{- define "kruise-rs.gateOn" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
{{- $on := false -}}
{{- range (include "kruise-rs.gateItems" $root | fromJsonArray) -}}
{{- if eq . (printf "%s=true" $name) -}}{{- $on = true -}}{{- else if eq . (printf "%s=false" $name) -}}{{- $on = false -}}{{- end -}}
{{- end -}}
{{- if $on -}}true{{- end -}}
{{- end -}}

{{- /* "true" when featureGates sets gate <name> to false (list $ name). */ -}}
{{- define "kruise-rs.gateOff" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
{{- $off := false -}}
{{- range (include "kruise-rs.gateItems" $root | fromJsonArray) -}}
{{- if eq . (printf "%s=false" $name) -}}{{- $off = true -}}{{- else if eq . (printf "%s=true" $name) -}}{{- $off = false -}}{{- end -}}
{{- end -}}
{{- if $off -}}true{{- end -}}
{{- end -}}

{{- /* The image of <binary> for values <v> (list $ v binary): <v>.image.repository, else
<image.repository>/<binary>; <v>.image.tag, else image.tag, else the chart's appVersion. */ -}}
{{- define "kruise-rs.image" -}}
{{- $root := index . 0 -}}{{- $v := index . 1 -}}{{- $binary := index . 2 -}}
{{- $own := $v.image | default dict -}}
{{- $repo := $own.repository | default (printf "%s/%s" $root.Values.image.repository $binary) -}}
{{- $tag := $own.tag | default $root.Values.image.tag | default $root.Chart.AppVersion -}}
{{- printf "%s:%s" $repo (toString $tag) -}}
{{- end -}}

{{- /* RUST_LOG from a level (list level): OpenKruise's klog numbers are accepted (0-3 info,
4 debug, 5 and more trace); anything else is a RUST_LOG filter as is. */ -}}
{{- define "kruise-rs.rustLog" -}}
{{- $level := toString (index . 0) -}}
{{- if regexMatch "^[0-9]+$" $level -}}
{{- $n := atoi $level -}}
{{- if ge $n 5 -}}trace{{- else if eq $n 4 -}}debug{{- else -}}info{{- end -}}
{{- else -}}
{{- $level | default "info" -}}
{{- end -}}
{{- end -}}

{{- /* KRUISE_LOG_FORMAT from manager.loggingFormat / daemon.loggingFormat: empty means json
(the kustomize default; OpenKruise's empty means plain text), "text" or "json". */ -}}
{{- define "kruise-rs.logFormat" -}}
{{- $f := toString (index . 0) -}}
{{- if eq $f "text" -}}text{{- else -}}json{{- end -}}
{{- end -}}

{{- /* The metrics and webhook ports of controller <key> (list $ key) as "metrics webhook":
8080 and 9443 in the Pod's own network; distinct host ports under manager.hostNetwork,
where every controller on a node shares one network. */ -}}
{{- define "kruise-rs.ports" -}}
{{- $root := index . 0 -}}{{- $key := index . 1 -}}
{{- $c := index (include "kruise-rs.catalog" $root | fromYaml) $key -}}
{{- if $root.Values.manager.hostNetwork -}}
{{- printf "%d %d" (add 10300 (int $c.index)) (add 10400 (int $c.index)) -}}
{{- else -}}
8080 9443
{{- end -}}
{{- end -}}

{{- /* imagePullSecrets for a Pod spec, indented by the caller. */ -}}
{{- define "kruise-rs.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
{{- if kindIs "string" . }}
- name: {{ . }}
{{- else }}
- {{ toYaml . | nindent 2 | trim }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- /* serviceAccount.annotations for a ServiceAccount's metadata. */ -}}
{{- define "kruise-rs.serviceAccountAnnotations" -}}
{{- with .Values.serviceAccount.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
