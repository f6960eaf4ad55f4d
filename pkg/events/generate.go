package events

// registry_gen.go (the Type constants and EventType methods), doc.go's
// table and docs/events.md are generated from the registry (registry.go)
// and the data structs' comments; their tests fail when one is stale. The
// code comes first: the documents' test needs a new type's EventType.
//go:generate go test -run TestRegistry_GeneratedCodeIsCurrent -update .
//go:generate go test -run "TestDocs_PackageTableIsCurrent|TestDocs_EventsReferenceIsCurrent" -update .
