package bus

// Workers is a Client's role of workers' presence: a replica announcing
// itself live for its job (AnnounceReplica) and withdrawing (WithdrawReplica),
// and the count of each job's live replicas (Presence).
type Workers struct{ c *Client }

// Workers returns c's role of workers' presence.
func (c *Client) Workers() Workers { return Workers{c} }
