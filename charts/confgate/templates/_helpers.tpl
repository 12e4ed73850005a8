{{/*
The chart's helpers: the image reference, checked, and the namespace the injection policy leaves alone.
*/}}

{{/*
The sidecar's image from values `image` (pass the chart's .Values.image, or a component chart's
.Values.confgate.image): repository:tag, or repository@digest. It is written into the injection
policy's CEL as a string literal, so only the characters of an image reference are allowed; anything
else fails the render, naming the values.
*/}}
{{- define "confgate.image" -}}
{{- $ref := ternary (printf "%s@%s" .repository (.digest | default "")) (printf "%s:%s" .repository (toString .tag)) (ne (.digest | default "") "") -}}
{{- if not (regexMatch "^[A-Za-z0-9][A-Za-z0-9._:/@+=-]*[A-Za-z0-9]$" $ref) -}}
{{- fail (printf "image %q (values image.repository, image.tag, image.digest) is not an image reference: set them to a registry/name:tag or a registry/name@sha256:... of your own" $ref) -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/*
The namespace the injection policy leaves alone besides kube-system: injectionPolicy.ownNamespace, or
the release's. It is written into the binding's selector as it is (the template is the CLI's output), so
only a namespace's name is allowed; anything else fails the render.
*/}}
{{- define "confgate.ownNamespace" -}}
{{- $ns := .Values.injectionPolicy.ownNamespace | default .Release.Namespace -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" $ns) -}}
{{- fail (printf "namespace %q (value injectionPolicy.ownNamespace, or the release's namespace) is not a namespace's name: set it to confgate's own namespace" $ns) -}}
{{- end -}}
{{- $ns -}}
{{- end -}}
