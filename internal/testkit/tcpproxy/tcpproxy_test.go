package tcpproxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/superstep/superstep/internal/testkit/tcpproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestProxy: bytes go through both ways; a Cut resets open connections
// and new ones; after Restore new connections work again.
func TestProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoDone := make(chan struct{})
	go func() { // an echo server, until its listener closes
		defer close(echoDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	p, err := tcpproxy.Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	echo := func(c net.Conn) error {
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "ping\n" {
			t.Fatalf("echo %q", line)
		}
		return err
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := echo(c); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if err := echo(c); err == nil {
		t.Fatal("connection still works after Cut")
	}
	c.Close()
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if err := echo(c2); err == nil {
			t.Fatal("new connection works during Cut")
		}
		c2.Close()
	}
	p.Restore()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := echo(c3); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	c3.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	<-echoDone
}
