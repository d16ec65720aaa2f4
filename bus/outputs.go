package bus

// Outputs is a Client's role of reading what jobs produce: their results
// (Results, StoredResults, ResultCount), progress (StoredProgress), logs (Logs,
// PublishLog) and scaling decisions (Decisions, LastDecision).
type Outputs struct{ c *Client }

// Outputs returns c's reader of what jobs produce.
func (c *Client) Outputs() Outputs { return Outputs{c} }
