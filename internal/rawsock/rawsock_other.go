//go:build !linux

package rawsock

const supported = false

// Off Linux, Wrap returns the connection itself; these keep Conn's method
// set the same on every platform.
func (c *Conn) Read(p []byte) (int, error)  { return c.Conn.Read(p) }
func (c *Conn) Write(p []byte) (int, error) { return c.Conn.Write(p) }
func (c *Conn) readOnce(uintptr) bool       { return true }
func (c *Conn) writeSome(uintptr) bool      { return true }
