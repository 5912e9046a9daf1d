// Wrapper module: builds the KubeRay operator (package main at the root of
// github.com/ray-project/kuberay/ray-operator; no replace directives upstream,
// the wrapper only pins the release and its go.sum). Its k8s.io modules are
// v0.34.1, the same as the kube wrapper's, so both share GOCACHE packages.
module raygate.local/envbin/kuberay

go 1.24.0

require github.com/ray-project/kuberay/ray-operator v1.5.0
