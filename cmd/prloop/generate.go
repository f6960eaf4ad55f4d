package main

// docs/configuration.md and pkg/config's Known are generated from the
// configuration structs' tags; TestDocs_ConfigurationIsCurrent and
// TestConfig_KnownIsCurrent fail when they are stale.
//go:generate go test -run TestDocs_ConfigurationIsCurrent|TestConfig_KnownIsCurrent -update .
