// Package kubernetes holds dsmount's example Kubernetes manifests (one
// daemon per node as a DaemonSet, its namespace and S3 Secret, and a
// training Job that reads the dataset) and, in its test, their check: every
// YAML document decoded strictly with the official API types, and the
// wiring between them (privileged FUSE container, cache and mount host
// paths, mount propagation, the dsmount command line and environment
// against the CLI's flags). docs/kubernetes.md is the guide.
//
// There is no Go code here to import; the package exists for its test.
package kubernetes
