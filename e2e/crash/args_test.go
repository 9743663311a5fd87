package crash

// postgresServeArgs are added to `superstep serve` on PostgreSQL. A
// restarted server has a new host id, so it takes the killed one's runs
// over only when their leases expire: a short lease keeps the test fast,
// and 2s (renewed every 667ms) leaves room for pauses of a loaded CI
// machine, so that no lease is lost without a crash.
var postgresServeArgs = []string{"--lease", "2s"}
