package events

// docs/events.md is generated from this package's types and the table of
// publishers; TestDocs_EventsReferenceIsCurrent fails when it is stale.
//go:generate go test -run TestDocs_EventsReferenceIsCurrent -update .
