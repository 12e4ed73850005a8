#!/usr/bin/env bash
# Writes the chart's injection policy and own-pod policy templates from `confgate inject --policy`, so
# the chart renders what the CLI prints (tests/commands/chart.rs renders both and compares them).
#
# Usage: scripts/chart-policies.sh [CONFGATE]        (default: target/debug/confgate)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/confgate}
# Stand-ins the CLI accepts, replaced by the chart's values below.
image=registry.invalid/stand-in/image:stand-in
ns=stand-in-own-namespace
out=$("$bin" inject --policy --image "$image" --own-namespace "$ns")
if grep -q '{{' <<<"$out"; then
    echo "the policy holds {{, which Helm would read as an action: escape it here" >&2
    exit 1
fi
# The stream is VAP, VAP binding, MAP, MAP binding; the own-pod pair goes to its own template.
split() {
    awk -v want="$1" 'BEGIN { n = 0 } /^---$/ { n++; next } { if ((want == "own" && n < 2) || (want == "inject" && n >= 2)) print }' <<<"$out" |
        awk -v want="$1" 'BEGIN { first = 1 } /^apiVersion:/ && !first { print "---" } /^apiVersion:/ { first = 0 } { print }'
}
{
    echo '{{- /* Written by scripts/chart-policies.sh from `confgate inject --policy`: do not edit. */ -}}'
    echo '{{- if .Values.injectionPolicy.enabled }}'
    split inject |
        sed -e "s|$image|{{ include \"confgate.image\" .Values.image }}|g" \
            -e "s|$ns|{{ include \"confgate.ownNamespace\" . }}|g"
    echo '{{- end }}'
} >charts/confgate/templates/inject-policy.yaml
{
    echo '{{- /* Written by scripts/chart-policies.sh from `confgate inject --policy`: do not edit. */ -}}'
    echo '{{- if .Values.ownPodPolicy.enabled }}'
    split own
    echo '{{- end }}'
} >charts/confgate/templates/own-pod-policy.yaml
if grep -q "stand-in" charts/confgate/templates/own-pod-policy.yaml; then
    echo "the own-pod policy names the image or the namespace: it has no value for them" >&2
    exit 1
fi
