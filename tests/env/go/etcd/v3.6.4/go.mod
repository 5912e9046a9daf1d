// Wrapper module: builds the etcd server (package go.etcd.io/etcd/server/v3)
// at the version Kubernetes v1.34.4 was released against. etcd's own go.mod
// replaces its sibling modules with local paths; from here they resolve to the
// published versions that server/v3 requires.
module raygate.local/envbin/etcd

go 1.23.0

require go.etcd.io/etcd/server/v3 v3.6.4
