package proxy

import (
	"bufio"
	"io"
	"net/http"
	"sync"
)

// upgradeSet tracks the connections handed over to an upgraded protocol
// (WebSocket and the like). http.Server.Shutdown does not wait for or close
// hijacked connections, so the handler closes them itself in CloseUpgrades.
type upgradeSet struct {
	mu     sync.Mutex
	closed bool
	conns  map[io.Closer]struct{}
}

func (s *upgradeSet) add(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *upgradeSet) remove(c io.Closer) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// CloseUpgrades closes every upgraded connection and refuses new upgrades.
// Call it after the server's graceful shutdown has finished or timed out.
func (h *Handler) CloseUpgrades() {
	s := &h.upgrades
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[io.Closer]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	if len(conns) > 0 {
		h.metrics.drainClosed.WithLabelValues(string(DrainShutdown)).Add(float64(len(conns)))
	}
}

// serveUpgrade completes a protocol switch the endpoint accepted: it writes
// the 101 to the client over the hijacked connection and then copies bytes
// both ways until either side closes. The endpoint's response body is the
// upstream connection (net/http hands it over as an io.ReadWriteCloser).
//
// The tunnel is closed (both sides) once the table the request started on
// was replaced longer than its drain timeout ago (drain.go).
func (o *responder) serveUpgrade(w http.ResponseWriter, r *http.Request, x *exchange, resp *http.Response) {
	backend, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		panic(http.ErrAbortHandler)
	}
	defer backend.Close()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2 and other non-hijackable streams cannot switch protocols.
		o.logger.Debug("upgrade: cannot hijack client connection", "error", err)
		panic(http.ErrAbortHandler)
	}
	defer client.Close()
	if !o.upgrades.add(client) {
		return
	}
	defer o.upgrades.remove(client)

	resp.Header.Del("Content-Length")
	if err := writeSwitchingProtocols(brw.Writer, resp); err != nil {
		return
	}
	// Bytes the client sent after its request, already buffered by the
	// server, belong to the new protocol.
	if n := brw.Reader.Buffered(); n > 0 {
		pending, _ := brw.Reader.Peek(n)
		if _, err := backend.Write(pending); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() {
		copyRaw(backend, client)
		done <- struct{}{}
	}()
	go func() {
		copyRaw(client, backend)
		done <- struct{}{}
	}()
	ended, drained := 0, false
	select {
	case <-done:
		ended = 1
	case <-x.table.drainExpired():
		drained = true
	}
	// One direction ended (or the drain timeout passed): close both so
	// the copies return.
	_ = client.Close()
	_ = backend.Close()
	for ; ended < 2; ended++ {
		<-done
	}
	if drained {
		o.countDrained(x, "upgrade", DrainTimeout)
	}
}

func writeSwitchingProtocols(bw *bufio.Writer, resp *http.Response) error {
	if _, err := bw.WriteString("HTTP/1.1 101 Switching Protocols\r\n"); err != nil {
		return err
	}
	if err := resp.Header.Write(bw); err != nil {
		return err
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		return err
	}
	return bw.Flush()
}

func copyRaw(dst io.Writer, src io.Reader) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	_, _ = io.CopyBuffer(dst, src, *bp)
}
