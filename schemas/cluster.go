package schemas

// Cluster is a registered Kubernetes cluster, a value of the clusters
// bucket (BucketClusters) keyed by its name, as Asperathos' cluster
// routes register it.
type Cluster struct {
	Name string `json:"name"`
	// Config is the cluster's kubeconfig, whose current context the
	// workers of the jobs naming the cluster are run with.
	Config       string            `json:"conf_content"`
	Certificates map[string]string `json:"certificates,omitempty"`
	// Active marks the cluster of the jobs that name none (one at most).
	Active bool `json:"active"`
}
