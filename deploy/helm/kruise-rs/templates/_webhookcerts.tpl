{{- /*
Webhook certificates (docs/install.md, "Webhook certificates"). Three modes:
  ""           the default: each controller makes its own CA and serving certificate and
               shares them through its <webhook>-ca Secret (KRUISE_WEBHOOK_CA_SECRET)
  certManager  certManager.enabled: cert-manager issues <webhook>-cert for each webhook
               Service; its CA injector fills the caBundles
  secret       webhookCertificate.secretName: an existing Secret (tls.crt, tls.key and
               optionally ca.crt) for every controller; caBundle from values or ca.crt
In the last two the Secret is mounted at KRUISE_WEBHOOK_CERT_DIR: the controller serves it,
reloads it when it changes, and registers ca.crt as the caBundle (or, without ca.crt,
leaves the caBundle to the injector / to this chart).
*/ -}}
{{- define "kruise-rs.webhookCertMode" -}}
{{- $cm := .Values.certManager | default dict -}}
{{- $wc := .Values.webhookCertificate | default dict -}}
{{- if and $cm.enabled $wc.secretName -}}
{{- fail "certManager.enabled and webhookCertificate.secretName: choose one source of webhook certificates" -}}
{{- end -}}
{{- if $cm.enabled -}}certManager{{- else if $wc.secretName -}}secret{{- end -}}
{{- end -}}

{{- /* The Secret mounted at KRUISE_WEBHOOK_CERT_DIR for webhook Service <svc> (list $ svc);
empty in the default mode. */ -}}
{{- define "kruise-rs.webhookCertSecret" -}}
{{- $root := index . 0 -}}
{{- $mode := include "kruise-rs.webhookCertMode" $root -}}
{{- if eq $mode "certManager" -}}{{ index . 1 }}-cert
{{- else if eq $mode "secret" -}}{{ $root.Values.webhookCertificate.secretName }}
{{- end -}}
{{- end -}}

{{- /* Where the controllers read a mounted certificate. */ -}}
{{- define "kruise-rs.webhookCertDir" -}}/etc/kruise-rs/webhook-certs{{- end -}}

{{- /* metadata.annotations of a webhook configuration or CRD calling Service <svc>
(list $ svc): cert-manager's CA injector, in certManager mode. */ -}}
{{- define "kruise-rs.webhookCertAnnotations" -}}
{{- $root := index . 0 -}}
{{- if eq (include "kruise-rs.webhookCertMode" $root) "certManager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ include "kruise-rs.namespace" $root }}/{{ index . 1 }}-cert
{{- end -}}
{{- end -}}

{{- /* clientConfig.caBundle (base64) in secret mode: webhookCertificate.caBundle, PEM or
already base64. */ -}}
{{- define "kruise-rs.caBundle" -}}
{{- if eq (include "kruise-rs.webhookCertMode" .) "secret" -}}
{{- with .Values.webhookCertificate.caBundle -}}
{{- if hasPrefix "-----BEGIN" (trim .) }}{{ b64enc (trim .) }}{{ else }}{{ trim . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
