package host

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Operations counted by superstep_host_failures_total (label op).
const (
	opCommit       = "commit"        // a commit attempt failed
	opCreate       = "create"        // Create failed after its record was durable
	opPublish      = "publish"       // handing an event to a reader failed
	opDeliver      = "deliver"       // delivering an answer to a pending request failed
	opLeaseRenew   = "lease_renew"   // a lease renewal failed (not fenced)
	opLeaseRelease = "lease_release" // a lease release failed
	opRecover      = "recover"       // claiming or resuming a run failed
	opFinish       = "finish"        // a run could not be finished and was handed back
	opRetention    = "retention"     // deleting expired responses failed
	opHeartbeat    = "heartbeat"     // refreshing this host's registry entry failed
)

// metrics are the host's Prometheus collectors.
type metrics struct {
	commits        prometheus.Counter
	commitFailures prometheus.Counter
	// createsDeferred counts creates written with their run's first
	// commit (CreateAndWait, deferred.go).
	createsDeferred prometheus.Counter
	commitSeconds   prometheus.Histogram
	activeRuns      prometheus.Gauge
	leaseLost       prometheus.Counter
	// leaseExpired counts runs stopped because their lease ran out with
	// nobody else holding it (a stall; reclaimed here or left for a claim).
	leaseExpired prometheus.Counter
	recovered    prometheus.Counter
	// resumeBackoffs counts failed resumes, each backing the run off.
	resumeBackoffs prometheus.Counter
	failures       *prometheus.CounterVec
	cancelsSeen    prometheus.Counter
	branches       prometheus.Counter
	// livePublish is the time from a live event reaching the host (the
	// executor's EmitLive calls the hook synchronously) to its frames
	// being durable in the log, where readers are woken.
	livePublish prometheus.Histogram
	// checkpointsPruned and responsesPruned count what checkpoint pruning
	// and response retention deleted.
	checkpointsPruned prometheus.Counter
	responsesPruned   prometheus.Counter
	// clockOffset is this host's clock minus the store's (stores with a
	// clock of their own, store.Clock).
	clockOffset prometheus.Gauge
	journal     *journalMetrics
	liveReplay  *liveReplayMetrics
}

// newMetrics creates the collectors and registers them on reg (if not nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_commits_total", Help: "Supersteps committed."}),
		commitFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_commit_failures_total", Help: "Commit attempts that failed (each retry counts)."}),
		createsDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_creates_deferred_total",
			Help: "Responses of blocking requests whose create was written with their first commit, in one transaction."}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "superstep_host_commit_seconds", Help: "Latency of commit attempts.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		activeRuns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "superstep_host_active_runs", Help: "Runs this host is driving."}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_leases_lost_total", Help: "Runs stopped because another owner took their lease."}),
		leaseExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_leases_expired_total",
			Help: "Runs stopped because their own lease expired or could not be renewed in time, with no other owner (a stall)."}),
		resumeBackoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_resume_backoffs_total",
			Help: "Claimed runs that could not be resumed here, each released with a back-off before any host claims it again."}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_runs_recovered_total", Help: "Unfinished runs claimed and resumed."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "superstep_host_failures_total",
			Help: "Failures of host operations (op: commit, create, publish, deliver, lease_renew, lease_release, recover, finish, prune, retention)."},
			[]string{"op"}),
		cancelsSeen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_remote_cancels_total", Help: "Cancels recorded through another host and noticed here."}),
		branches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_branches_total", Help: "Continuations of an earlier response, each started on a new run branching from its state."}),
		livePublish: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "superstep_live_publish_seconds",
			Help:    "Time from a live event (a token) reaching the host to its events being durable and visible to readers (live publication).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		checkpointsPruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_checkpoints_pruned_total", Help: "Checkpoints deleted by pruning runs' histories (Config.KeepCheckpoints)."}),
		responsesPruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_host_responses_pruned_total", Help: "Finished responses deleted by retention (Config.Retention)."}),
		clockOffset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "superstep_host_clock_offset_seconds",
			Help: "This host's clock minus the store's, which judges leases (PostgreSQL's server; 0 for SQLite). Over 1s is logged."}),
		journal:    newJournalMetrics(),
		liveReplay: newLiveReplayMetrics(),
	}
	for _, op := range []string{opCommit, opCreate, opPublish, opDeliver, opLeaseRenew, opLeaseRelease, opRecover, opFinish, opRetention, opHeartbeat} {
		m.failures.WithLabelValues(op) // export every op at 0
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.commits, m.commitFailures, m.createsDeferred, m.commitSeconds, m.activeRuns, m.leaseLost,
		m.leaseExpired, m.resumeBackoffs, m.recovered, m.failures, m.cancelsSeen, m.branches, m.livePublish, m.checkpointsPruned, m.responsesPruned,
		m.clockOffset} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("host: register metrics: %w", err)
		}
	}
	for _, c := range append(m.journal.collectors(), m.liveReplay.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("host: register metrics: %w", err)
		}
	}
	return m, nil
}

// failed counts a failure of op.
func (m *metrics) failed(op string) { m.failures.WithLabelValues(op).Inc() }
