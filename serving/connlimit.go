package serving

// The cap on the connections a Server's Serve keeps open at once
// (Config.MaxConnections): a listener that accepts a connection only
// while fewer than the cap are open, so that the ones beyond it wait in
// the kernel's listen backlog, unread, until one closes. (Like
// golang.org/x/net/netutil.LimitListener, written here rather than adding
// that module for one small type.)

import (
	"net"
	"sync"
)

// limitListener accepts at most cap(slots) connections open at once.
type limitListener struct {
	net.Listener
	slots     chan struct{} // one per open connection
	closeOnce sync.Once
	done      chan struct{} // closed by Close: Accept stops waiting for a slot
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then accepts a connection that gives the
// slot back when it is closed.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener; an Accept waiting for a slot returns
// net.ErrClosed.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
