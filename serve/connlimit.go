package serve

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxConnsDefault is the default of Config.MaxConns (serve --max-conns): well above the
// default stream cap (responses.MaxStreamsDefault), so that requests
// still get through while every stream slot is taken.
const MaxConnsDefault = 4096

// connWarnEvery spaces the log lines of a listener at its cap.
const connWarnEvery = time.Minute

// connLimitListener caps the connections open at once through a listener:
// at the cap, Accept waits until one closes (new connections queue in the
// kernel's backlog, and beyond it are refused by the kernel), as
// golang.org/x/net/netutil.LimitListener does. With the server's
// ReadHeaderTimeout, IdleTimeout and the handler's body deadline, a
// client holding connections open without sending gets each one closed
// in bounded time, and cannot take more than the cap meanwhile.
type connLimitListener struct {
	net.Listener
	slots  chan struct{} // one token per open connection
	closed chan struct{}
	once   sync.Once

	open     prometheus.Gauge
	waits    prometheus.Counter
	log      *slog.Logger
	lastWarn atomic.Int64 // unix nanoseconds of the last "at the cap" log line
}

// limitConns wraps ln so that at most max connections are open at once,
// with metrics on reg.
func limitConns(ln net.Listener, max int, reg prometheus.Registerer, log *slog.Logger) (*connLimitListener, error) {
	l := &connLimitListener{Listener: ln, slots: make(chan struct{}, max), closed: make(chan struct{}), log: log,
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "superstep_http_open_connections", Help: "Client connections open now (at most Config.MaxConns).",
		}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "superstep_http_connection_waits_total", Help: "Connections accepted only after waiting for Config.MaxConns to free a slot.",
		}),
	}
	for _, c := range []prometheus.Collector{l.open, l.waits} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Accept waits for a free slot, then accepts.
func (l *connLimitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.atCap()
		select {
		case l.slots <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.open.Inc()
	return &limitedConn{Conn: c, l: l}, nil
}

// atCap counts a wait and says so in the log, at most once a minute.
func (l *connLimitListener) atCap() {
	l.waits.Inc()
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last >= int64(connWarnEvery) && l.lastWarn.CompareAndSwap(last, now) {
		l.log.Warn("superstep: connection limit reached; new connections wait for one to close (max conns)", "max_conns", cap(l.slots))
	}
}

// Close stops accepting; an Accept waiting for a slot returns.
func (l *connLimitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitedConn gives its slot back when closed (once).
type limitedConn struct {
	net.Conn
	l    *connLimitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Dec()
		<-c.l.slots
	})
	return err
}
