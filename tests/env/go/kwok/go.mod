// Wrapper module: builds sigs.k8s.io/kwok/cmd/kwok (no replace directives upstream;
// the wrapper only pins the release and its go.sum).
module raygate.local/envbin/kwok

go 1.24.0

require sigs.k8s.io/kwok v0.7.0
