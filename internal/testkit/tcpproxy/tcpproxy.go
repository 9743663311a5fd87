// Package tcpproxy is a TCP proxy for tests that cuts a server off: every
// connection through it is reset at once, and new ones are reset as soon
// as they are accepted, until the cut is over. Tests put it between a
// store and PostgreSQL to make a real outage (connections reset, connects
// failing) without touching the server.
//
// It is a test harness (see internal/testkit): only tests import it.
package tcpproxy

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards connections to one target address.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every connection's copiers

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[*net.TCPConn]struct{} // both ends of every open pair
}

// Start listens on 127.0.0.1 (a port of its own) and forwards each
// connection to target (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*net.TCPConn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut resets every connection through the proxy and makes it reset new
// ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		reset(c)
	}
}

// Restore ends a Cut: new connections are forwarded again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops listening, resets every connection and waits until the
// proxy's goroutines are gone.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		reset(c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// accept forwards connections until the listener closes.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.forward(c.(*net.TCPConn))
	}
}

// forward connects client to the target and copies both ways until either
// side ends or the proxy resets them.
func (p *Proxy) forward(client *net.TCPConn) {
	defer p.wg.Done()
	p.mu.Lock()
	refuse := p.cut || p.closed
	p.mu.Unlock()
	if refuse {
		reset(client)
		return
	}
	c, err := net.Dial("tcp", p.target)
	if err != nil {
		reset(client)
		return
	}
	server := c.(*net.TCPConn)
	p.mu.Lock()
	if p.cut || p.closed { // cut while dialling
		p.mu.Unlock()
		reset(client)
		reset(server)
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var copiers sync.WaitGroup
	copiers.Add(2)
	pipe := func(dst, src *net.TCPConn) {
		defer copiers.Done()
		if _, err := io.Copy(dst, src); err != nil {
			reset(dst) // a reset (or a Cut) travels on
			return
		}
		_ = dst.CloseWrite() // so does a clean end
	}
	go pipe(server, client)
	go pipe(client, server)
	copiers.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
	client.Close()
	server.Close()
}

// reset closes c with an RST, as a cut network path or a crashed peer
// looks to the other end.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
