#!/usr/bin/env bash
# The move to DRA done by hand with kubectl, as docs/twin.md walks through it, polling every
# 0.5 s: the baseline `python -m bench.cutover` compares `gpushift cutover` with.
#
#   bench/kubectl_cutover.sh KUBECONFIG TARGET_DIR
#
# Consumers are the Deployments whose pods ask for nvidia.com/gpu; each one's Flux
# Kustomization is the one labelled on it, or on the HelmRelease that renders it.
set -euo pipefail
export KUBECONFIG=$1
target=$2
POLL=0.5
gpushift=${GPUSHIFT:-gpushift}
k() { kubectl --request-timeout=30s "$@"; }
now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
say() { echo "$(now) $*" >&2; }
until_true() { # until_true WHAT CMD…: run CMD every $POLL s until it succeeds
  local what=$1; shift
  say "waiting: $what"
  until "$@"; do sleep "$POLL"; done
}
gpu_pods='[.items[] | select(.metadata.deletionTimestamp == null or true)
  | select(([.spec.containers[].resources | (.limits // {}), (.requests // {}) | keys[]]
            | map(select(startswith("nvidia.com/gpu"))) | length > 0)
           or ((.spec.resourceClaims // []) | length > 0))]'

# 1. Consumers: namespace, Deployment, replicas, and the Kustomization that owns each.
hrs=$(k get helmreleases.helm.toolkit.fluxcd.io -A -o json)
consumers=$(k get deployments -A -o json | jq -r --argjson hrs "$hrs" '
  ($hrs.items | map({key: "\(.metadata.namespace)/\(.metadata.name)",
                     value: (.metadata.labels // {})}) | from_entries) as $hr
  | .items[]
  | select([.spec.template.spec.containers[].resources.limits // {} | keys[]
            | select(startswith("nvidia.com/gpu"))] | length > 0)
  | (.metadata.labels // {}) as $l
  | (if $l["helm.toolkit.fluxcd.io/name"] then
       $hr["\($l["helm.toolkit.fluxcd.io/namespace"])/\($l["helm.toolkit.fluxcd.io/name"])"] // {}
     else $l end) as $owner
  | "\(.metadata.namespace) \(.metadata.name) \(.spec.replicas // 1) \($owner["kustomize.toolkit.fluxcd.io/namespace"] // "") \($owner["kustomize.toolkit.fluxcd.io/name"] // "")"')
count=$(k get pods -A -o json | jq "$gpu_pods | map(select(.status.phase == \"Running\")) | length")
gpu_nodes=$(k get nodes -o json | jq '[.items[] | select((.status.allocatable["nvidia.com/gpu"] // "0") != "0")] | length')
say "consumers: $(wc -l <<<"$consumers") Deployments, $count GPU pods, $gpu_nodes GPU nodes"

# 2. Suspend their Kustomizations and scale them to 0.
while read -r ns name _ ksns ks; do
  [ -n "$ks" ] && k -n "$ksns" patch kustomizations.kustomize.toolkit.fluxcd.io "$ks" \
    --type merge -p '{"spec":{"suspend":true}}' >/dev/null
  k -n "$ns" scale deployment "$name" --replicas 0 >/dev/null
done <<<"$consumers"

# 3. Drained: no GPU pod left, Terminating ones included.
drained() { [ "$(k get pods -A -o json | jq "$gpu_pods | length")" = 0 ]; }
until_true "no GPU pod" drained

# 4. The merge, and a reconcile of the root Kustomization.
"$gpushift" twin git-set "$target" --kubeconfig "$KUBECONFIG" >/dev/null
token=$(now)
k -n flux-system annotate kustomizations.kustomize.toolkit.fluxcd.io cluster-apps --overwrite \
  "reconcile.fluxcd.io/requestedAt=$token" >/dev/null
reconciled() {
  k -n flux-system get kustomizations.kustomize.toolkit.fluxcd.io cluster-apps -o json | jq -e \
    --arg t "$token" '.status.lastHandledReconcileAt == $t
      and ([.status.conditions[]? | select(.type == "Ready" and .status == "True")] | length > 0)' \
    >/dev/null
}
until_true "cluster-apps reconciled" reconciled

# 5. The device plugin is gone: allocatable 0 everywhere and no device-plugin DaemonSet.
old_gone() {
  [ "$(k get nodes -o json | jq '[.items[] | select((.status.allocatable["nvidia.com/gpu"] // "0") != "0")] | length')" = 0 ] &&
    [ "$(k get daemonsets -A -o json | jq '[.items[] | select(.metadata.name | test("device-plugin"))] | length')" = 0 ]
}
until_true "nvidia.com/gpu allocatable 0 on every node" old_gone

# 6. DRA is up: one gpu.nvidia.com ResourceSlice per GPU node.
dra_up() {
  [ "$(k get resourceslices -o json | jq '[.items[] | select(.spec.driver == "gpu.nvidia.com")] | length')" -ge "$gpu_nodes" ]
}
until_true "one ResourceSlice per GPU node" dra_up

# 7. Resume: unsuspend, request a reconcile, restore the replicas.
token=$(now)
while read -r ns name replicas ksns ks; do
  if [ -n "$ks" ]; then
    k -n "$ksns" patch kustomizations.kustomize.toolkit.fluxcd.io "$ks" \
      --type merge -p '{"spec":{"suspend":null}}' >/dev/null
    k -n "$ksns" annotate kustomizations.kustomize.toolkit.fluxcd.io "$ks" --overwrite \
      "reconcile.fluxcd.io/requestedAt=$token" >/dev/null
  fi
  k -n "$ns" scale deployment "$name" --replicas "$replicas" >/dev/null
done <<<"$consumers"
back() {
  [ "$(k get pods -A -o json | jq "$gpu_pods | map(select(.status.phase == \"Running\" and .metadata.deletionTimestamp == null)) | length")" -ge "$count" ]
}
until_true "$count GPU pods Running" back
say "done"
