package feedback

// NewAgentForTest is the agent runner the service builds from cfg, for
// the benchmarks of an agent run (bench_agent_test.go).
func NewAgentForTest(cfg Config, sb Sandbox) (Agent, error) { return newAgent(cfg, sb) }
