// The Go module `make upstream` builds the control plane from: kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl and etcd, at the versions required here.
// upstream/build.py adds one replace per staging module, generated from k8s.io/kubernetes's
// own go.mod, in a copy of this module under the build cache; nothing else is kept here.
module gpushift.invalid/upstream

go 1.26.0

require k8s.io/kubernetes v1.37.2
