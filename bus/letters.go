package bus

// Letters is a Client's dead-letter role: the letters of items past their
// max deliveries and of messages a stage could not read, moved into the
// dead-letter streams (Move), read (List, Get, Body, Stored,
// StoredMalformed), written (Publish), redriven and deleted, and the
// objects of large bodies swept. A stage sets a message aside with
// Client.SetAside, the one part of the role consuming stages need.
type Letters struct{ c *Client }

// Letters returns c's dead-letter role.
func (c *Client) Letters() Letters { return Letters{c} }
