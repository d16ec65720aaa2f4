package bus

// Queues is a Client's administration of jobs' work queues, the manager's
// role: a job's work consumer made (EnsureWork), released to its workers
// once the ledger has its items (ReleaseWork), dropped and purged when the
// job ends (DropQueued, DeleteWorkConsumer, PurgeJob); the ledger of
// streaming jobs' items kept (KeepLedger) and results for items never
// queued set aside (SetAsideNeverQueued); items published to jobs that do
// not take them looked at and refused (QueuedWork, RefuseWork); the items
// each job holds counted (QueuedItems).
type Queues struct{ c *Client }

// Queues returns c's work-queue administration.
func (c *Client) Queues() Queues { return Queues{c} }
