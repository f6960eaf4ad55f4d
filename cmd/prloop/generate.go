package main

// docs/configuration.md is generated from the configuration structs' tags;
// TestDocs_ConfigurationIsCurrent fails when it is stale.
//go:generate go test -run TestDocs_ConfigurationIsCurrent -update .
